"""What the dispatcher posts in a run's thread besides its rows' own messages: the run's
progress message (posted once, then edited, at most every ``EDIT_EVERY``) and a revised
draft's changes since the round before (``bot.slack.dispatcher`` says when)."""

from __future__ import annotations

import logging
from datetime import datetime

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.errors import BotError
from bot.slack import diff_blocks, progress_blocks
from bot.slack.handlers import api_error, sync
from bot.slack.message import Message
from bot.slack.steps import Steps, Thread
from crew_runtime import policy
from crew_runtime.config import Config
from storage import EDIT_EVERY, Review, ReviewKind, ReviewStatus, Run, RunStatus, Store

log = logging.getLogger(__name__)

# chat.update's answers for a message no longer there to edit (deleted by someone).
_GONE = frozenset({"message_not_found", "cant_update_message"})


class Deferred(BotError):
    """A row that must wait (a progress edit too soon after the last), not a failure."""

    def __init__(self, until: datetime) -> None:
        super().__init__(f"deferred until {until}")
        self.until = until


async def show_progress(
    client: AsyncWebClient, store: Store, config: Config, steps: Steps, thread: Thread, run: Run
) -> None:
    """Post the run's progress message, or edit it to show the newest state, and mark the
    row sent; no sooner than ``EDIT_EVERY`` after it was last shown (:class:`Deferred`)."""
    progress = await sync(store.load_progress, run.id)
    if progress is None:
        await steps.sent()
        return
    if progress.shown_at is not None and store.clock() < progress.shown_at + EDIT_EVERY:
        raise Deferred(progress.shown_at + EDIT_EVERY)
    fresh = await sync(store.get_run, run.id)
    pending = await sync(store.list_reviews, run_id=run.id)
    expected: list[str] = []
    spec = config.crews.get(run.crew)
    if fresh.status is RunStatus.WAITING and spec is not None:
        away = await sync(store.delegates)
        for review in pending:
            expected += [
                p for p in policy.waiting_for(spec, fresh, review, away) if p not in expected
            ]
    shown = progress_blocks.progress_message(
        progress.state, fresh.status, [r.kind for r in pending], expected
    )
    if progress.message_ts is None or progress.channel is None:
        posted = await steps.post("progress", thread, shown)
        await sync(store.progress_posted, run.id, posted.channel, posted.ts)
    else:
        try:
            await client.chat_update(
                channel=progress.channel,
                ts=progress.message_ts,
                text=shown.text,
                blocks=shown.blocks,
            )
        except SlackApiError as exc:
            if api_error(exc) not in _GONE:
                raise
            log.warning("run %s: progress message gone (%s)", run.id, api_error(exc))
    await sync(store.progress_shown, run.id, progress.version)
    await steps.sent()


async def changes(store: Store, review: Review) -> Message | None:
    """What changed in a revised task draft since the round before it (the latest decided
    review of the same task), if anything did."""
    if review.kind is not ReviewKind.TASK_REVIEW or review.seq == 0:
        return None
    decided = await sync(store.list_reviews, status=ReviewStatus.DECIDED, run_id=review.run_id)
    earlier = [
        r
        for r in decided
        if r.kind is ReviewKind.TASK_REVIEW and r.stream == review.stream and r.seq < review.seq
    ]
    if not earlier:
        return None
    previous = max(earlier, key=lambda r: r.seq)
    return diff_blocks.changes_message(previous.prompt, review.prompt, previous.seq + 1)
