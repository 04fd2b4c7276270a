"""The outbox dispatcher: announces in Slack what storage committed.

State changes and the rows announcing them commit together; this loop delivers them
in order, one run at a time. A row may take several Slack calls (a draft in parts, a
file and its summary, a result and the root message's update), so it is delivered step
by step and each step is recorded in the row once done: a failed call (rate limit past
the client's retries, a 5xx, a network error) leaves the row in the outbox, and the
retry, after a backoff, goes on from the first step not done. Later rows of the same
run wait, so a thread never shows a result before its draft.

Posts and uploads must not happen twice, and Slack can apply a call and lose its answer
(a timeout, a reset connection, a 5xx from its edge). So every post carries message
metadata naming its row and step and is recorded as tried before it is made (and
forgotten again if Slack answers that it refused it: a 429, an error code); an upload
goes through the external upload flow, so its file id is recorded before the upload is
completed. A step tried before is first looked for: thread replies with
``conversations.replies``, root messages with ``conversations.history``, files with
``files.info``. Lookups happen only on retries: those methods are rate-limited hard for
apps outside the Marketplace. ``chat.update`` of a message that exists is idempotent
and is simply made again.

For the same reason the client given to the dispatcher must not retry server errors or
dropped connections itself (``bot.hosting.server.slack_client``): only this module knows how to
retry a post that may have been applied. Each row is claimed for a while before its
first call (renewed while it is delivered), so two dispatchers never deliver one row at
once, and one that died lets the row go when its claim runs out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import AsyncIterator, Mapping
from datetime import UTC, timedelta
from typing import Any, NamedTuple

from aiohttp import ClientError, ClientSession, ClientTimeout
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.errors import BotError
from bot.slack import blocks
from bot.slack.handlers import api_error, sync
from crew_runtime.config import NOBODY, Config, UnknownCrewError, rule_of
from crew_runtime.service import approvals_required, covered, still_expected
from storage import (
    Decision,
    DecisionKind,
    OutboxClaimLost,
    OutboxKind,
    OutboxMessage,
    Review,
    ReviewKind,
    ReviewStatus,
    Run,
    RunStatus,
    Store,
)
from storage.status import RunNote
from storage.wakeups import OUTBOX

log = logging.getLogger(__name__)

MAX_BACKOFF = timedelta(minutes=5)
CLAIM = timedelta(seconds=30)
METADATA_TYPE = "countersign_outbox"
# Slack's errors after which a call may have been applied in part, as its docs warn.
MAYBE_APPLIED = frozenset({"fatal_error", "internal_error"})
# Slack's clock and ours may differ a little: look for a lost post from a bit earlier.
LOOKUP_MARGIN = timedelta(minutes=1)

JSON = dict[str, Any]


class NotYet(BotError):
    """A row depends on one that has not gone out yet (the run's root message)."""


class Dispatcher:
    """Posts outbox rows to Slack; wake it from any thread after a commit.

    Args:
        client: a client that waits out rate limits but does not retry server errors or
            dropped connections (see the module docstring).
        store: where the rows are.
        config: the crews, for their descriptions and reviewers.
        claim: how long a row is held for this dispatcher without news from it; one that
            died lets its row go after that long.
    """

    def __init__(
        self, client: AsyncWebClient, store: Store, config: Config, *, claim: timedelta = CLAIM
    ) -> None:
        self.client = client
        self.store = store
        self.config = config
        self.claim = claim
        self._wake: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def wake(self) -> None:
        """Thread-safe: look at the outbox now rather than at the next tick."""
        if self._loop is not None and self._wake is not None:
            self._loop.call_soon_threadsafe(self._wake.set)

    async def run(self, stop: asyncio.Event, interval: float = 1.0) -> None:
        """Drain the outbox until ``stop``: when woken (a commit in this process, or on
        PostgreSQL a row written by any process) and every ``interval`` seconds anyway."""
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        wakeups = self.store.wakeups({OUTBOX: self.wake})
        wakeups.start()
        try:
            while not stop.is_set():
                try:
                    await self.drain()
                except Exception:
                    log.exception("outbox dispatch failed; retrying")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout=interval)
                self._wake.clear()
        finally:
            await asyncio.to_thread(wakeups.stop)

    async def drain(self) -> int:
        """Send what is due; returns how many rows went out."""
        sent = 0
        held: set[str] = set()
        for listed in await sync(self.store.due_outbox, 100):
            if listed.run_id in held:
                continue
            token = secrets.token_hex(8)
            message = await sync(self.store.claim_outbox, listed.id, token, self.claim)
            if message is None:  # another dispatcher has it, or an earlier row of its run
                held.add(listed.run_id)
                continue
            steps = _Steps(self.client, self.store, message, token)
            try:
                async with self._holding(steps):
                    await self._deliver(steps)
                sent += 1
            except (NotYet, SlackApiError, ClientError, TimeoutError) as exc:
                held.add(message.run_id)
                reason = _reason(exc)
                backoff = min(timedelta(seconds=2 ** min(message.attempts, 10)), MAX_BACKOFF)
                log.warning(
                    "outbox %d (%s): %s; retry in %s", message.id, message.kind, reason, backoff
                )
                await sync(self.store.mark_failed, message.id, token, reason, backoff)
            except OutboxClaimLost:
                held.add(message.run_id)
                log.warning("outbox %d: taken over by another dispatcher", message.id)
        return sent

    @contextlib.asynccontextmanager
    async def _holding(self, steps: _Steps) -> AsyncIterator[None]:
        """Renew the row's claim while it is delivered (a rate limit may wait minutes)."""

        async def renew() -> None:
            while True:
                await asyncio.sleep(self.claim.total_seconds() / 3)
                try:
                    held = await sync(
                        self.store.renew_outbox_claim, steps.message.id, steps.token, self.claim
                    )
                except Exception:
                    log.exception("outbox %d: claim not renewed", steps.message.id)
                    continue
                if not held:
                    log.warning("outbox %d: claim lost while delivering", steps.message.id)
                    return

        renewing = asyncio.create_task(renew())
        try:
            yield
        finally:
            renewing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewing

    async def _deliver(self, steps: _Steps) -> None:
        message = steps.message
        run = await sync(self.store.get_run, message.run_id)
        if run.channel is None:  # started outside Slack with no channel configured
            await steps.sent()
            return
        kind = OutboxKind(message.kind)
        if kind == OutboxKind.RUN_STARTED:
            await self._root(steps, run, run.channel)
            return
        if run.thread_ts is None:
            raise NotYet("the run's root message is not posted yet")
        thread = _Thread(run.channel, run.thread_ts)
        if kind == OutboxKind.REVIEW_OPENED and message.review_id:
            review = await sync(self.store.get_review, message.review_id)
            await self._review(steps, thread, run, review)
        elif kind == OutboxKind.REVIEW_DECIDED and message.review_id:
            review = await sync(self.store.get_review, message.review_id)
            await self._replace(review)
            await self._update_root(run)
            await steps.sent()
        elif kind == OutboxKind.REVIEW_APPROVED and message.review_id:
            review = await sync(self.store.get_review, message.review_id)
            if review.status == ReviewStatus.PENDING:
                await self._tally(review, run)
            await steps.sent()
        elif kind == OutboxKind.REVIEW_CLAIMED and message.review_id:
            review = await sync(self.store.get_review, message.review_id)
            if review.status == ReviewStatus.PENDING:
                await self._show_claim(review, run)
                said = message.payload
                before = said.get("before")
                claimed = blocks.claimed_message(
                    str(said["by"]), str(said["to"]), None if before is None else str(before)
                )
                await steps.post_all(thread, [claimed])
            await steps.sent()
        elif kind in (OutboxKind.REVIEW_REMINDED, OutboxKind.REVIEW_ESCALATED) and (
            message.review_id
        ):
            review = await sync(self.store.get_review, message.review_id)
            if review.status == ReviewStatus.PENDING:
                away = await sync(self.store.delegates)
                people = await self._dm_people(kind, review, run, away)
                if people:
                    await self._nudge_by_dm(steps, kind, review, run, people)
                else:
                    await steps.post_all(thread, [self._nudge(kind, review, run, away)])
            await steps.sent()
        elif kind == OutboxKind.TASK_REOPENED and message.review_id:
            reopened = await sync(self.store.get_review, message.review_id)
            superseded = await sync(
                self.store.list_reviews, status=ReviewStatus.SUPERSEDED, run_id=run.id
            )
            for review in superseded:
                if review.decision is None:  # it was still waiting: take its buttons away
                    await self._replace(review)
            await steps.post_all(thread, [blocks.reopened_message(reopened)])
            await steps.sent()
        elif kind == OutboxKind.RUN_DIVERGED:
            note = str(message.payload.get("note", ""))
            await steps.post_all(thread, [blocks.divergence_message(note)])
            await steps.sent()
        elif kind == OutboxKind.RUN_NOTE:
            asked = _note(message)
            if asked is not None:
                await steps.post_all(thread, [blocks.note_message(asked)])
            await steps.sent()
        elif kind == OutboxKind.RUN_FINISHED:
            for review in await sync(
                self.store.list_reviews, status=ReviewStatus.CANCELLED, run_id=run.id
            ):
                await self._replace(review)
            await steps.post_all(thread, blocks.result_messages(run, await self._rejection(run)))
            await self._update_root(run)
            await steps.sent()
        else:
            await steps.sent()

    async def _root(self, steps: _Steps, run: Run, channel: str) -> None:
        if run.thread_ts is not None:
            await steps.sent()
            return
        root = self._root_message(run)
        posted = await steps.post("root", _Thread(channel, None), root)
        await steps.sent(thread=(run.id, posted.channel, posted.ts))

    async def _review(self, steps: _Steps, thread: _Thread, run: Run, review: Review) -> None:
        if review.message_ts is not None:
            await steps.sent()
            return
        if blocks.needs_file(review):
            filename = f"draft-{review.id}.md"
            await steps.upload("upload", thread, review.prompt, filename)
            messages = [blocks.review_file_summary(review, run, filename)]
        else:
            messages = blocks.review_messages(review, run)
        last = await steps.post_all(thread, messages)
        # The root shows "Waiting for review" (or an answer) from now on; a failed update is retried
        # with the row, whose posts are done and not made again.
        await self._update_root(run)
        await steps.sent(review_message=(review.id, last.channel, last.ts))

    async def _replace(self, review: Review) -> None:
        """Swap a decided (or cancelled) review's buttons for who decided what."""
        if review.channel is None or review.message_ts is None:
            return
        done = blocks.decided_message(review)
        await self.client.chat_update(
            channel=review.channel, ts=review.message_ts, text=done.text, blocks=done.blocks
        )

    async def _tally(self, review: Review, run: Run) -> None:
        """Show who approved a review that needs several approvals, and who is expected."""
        if review.channel is None or review.message_ts is None:
            return
        spec = self.config.crews.get(run.crew)
        required = 1 if spec is None else approvals_required(spec, review)
        away = await sync(self.store.delegates)
        expected = () if spec is None else still_expected(spec, review, run, away)
        tally = blocks.partly_approved_message(review, required, expected)
        await self.client.chat_update(
            channel=review.channel, ts=review.message_ts, text=tally.text, blocks=tally.blocks
        )

    async def _show_claim(self, review: Review, run: Run) -> None:
        """Show on the pending review's message who has claimed it (with the approvals so
        far, where it needs several)."""
        if review.approvals:
            await self._tally(review, run)
            return
        if review.channel is None or review.message_ts is None:
            return
        shown = blocks.open_review_message(review)
        await self.client.chat_update(
            channel=review.channel, ts=review.message_ts, text=shown.text, blocks=shown.blocks
        )

    async def _update_root(self, run: Run) -> None:
        fresh = await sync(self.store.get_run, run.id)
        if fresh.channel is None or fresh.thread_ts is None:
            return
        pending = await sync(self.store.list_reviews, run_id=fresh.id)
        root = self._root_message(fresh, [r.kind for r in pending])
        await self.client.chat_update(
            channel=fresh.channel, ts=fresh.thread_ts, text=root.text, blocks=root.blocks
        )

    async def _rejection(self, run: Run) -> Decision | None:
        """The decision that rejected a rejected run (its latest rejection), if any."""
        if run.status is not RunStatus.REJECTED:
            return None
        decided = await sync(self.store.list_reviews, status=ReviewStatus.DECIDED, run_id=run.id)
        rejections = [
            r.decision
            for r in decided
            if r.decision is not None and r.decision.kind is DecisionKind.REJECT
        ]
        return max(rejections, key=lambda d: d.created_at, default=None)

    def _nudge(
        self, kind: OutboxKind, review: Review, run: Run, away: Mapping[str, str]
    ) -> blocks.Message:
        """A reminder or an escalation in the thread, mentioning the reviewers (or
        ``escalate_to``), each away one's delegate (``away``: ``Store.delegates``) instead."""
        try:
            spec = self.config.get(run.crew)
        except UnknownCrewError:
            return blocks.reminder_message(review, ())
        reviewers = tuple(r for r in spec.reviewers_of(run.inputs) if r != NOBODY)
        if kind == OutboxKind.REVIEW_ESCALATED:
            return blocks.escalation_message(review, covered(spec.escalate_to or reviewers, away))
        if review.claimed_by is not None:  # whoever claimed it, or was given it
            reviewers = (review.claimed_by,)
        return blocks.reminder_message(review, covered(reviewers, away))

    async def _dm_people(
        self, kind: OutboxKind, review: Review, run: Run, away: Mapping[str, str]
    ) -> list[str]:
        """Who gets a reminder or an escalation as a DM: nobody unless the review's rule
        says ``remind_by = "dm"`` and names people (a crew open to its channel is reminded
        in the thread); user groups' members, each person once; a reminder of a claimed
        review goes to whoever has it; for each one away (``away``: ``Store.delegates``),
        their delegate."""
        spec = self.config.crews.get(run.crew)
        if spec is None:
            return []
        tool, task = rule_of(review.kind, review.stream, review.details)
        if spec.deadlines_for(tool=tool, task=task).remind_by != "dm":
            return []
        named = still_expected(spec, review, run, away)
        if kind == OutboxKind.REVIEW_ESCALATED:
            named = spec.escalate_to or named
        elif review.claimed_by is not None:  # a reminder goes to whoever has it
            named = (review.claimed_by,)
        people: list[str] = []
        for ref in named:
            members = [ref] if not ref.startswith("S") else await self._group(ref)
            people.extend(p for p in covered(tuple(members), away) if p not in people)
        return people

    async def _group(self, group_id: str) -> list[str]:
        response = await self.client.usergroups_users_list(usergroup=group_id)
        return [str(user) for user in response.get("users") or []]

    async def _nudge_by_dm(
        self, steps: _Steps, kind: OutboxKind, review: Review, run: Run, people: list[str]
    ) -> None:
        """The reminder or escalation to each of ``people``, in their DM, each once."""
        link = None
        if review.channel is not None and review.message_ts is not None:
            found = await self.client.chat_getPermalink(
                channel=review.channel, message_ts=review.message_ts
            )
            link = str(found["permalink"])
        escalated = kind == OutboxKind.REVIEW_ESCALATED
        nudge = blocks.dm_nudge_message(review, run.crew, escalated, link)
        for person in people:
            opened = await self.client.conversations_open(users=person)
            dm = str(opened["channel"]["id"])
            await steps.post(f"dm:{person}", _Thread(dm, None), nudge)

    def _root_message(self, run: Run, waiting_on: list[ReviewKind] | None = None) -> blocks.Message:
        """The run's root message, with its crew's description and its reviewer's mention."""
        spec = self.config.crews.get(run.crew)
        return blocks.run_root(
            run,
            "" if spec is None else spec.description,
            waiting_on or (),
            reviewer_input=None if spec is None else spec.reviewers_from_input,
        )


class _Thread(NamedTuple):
    """Where a post goes: a channel, and the thread's root message (None: top level)."""

    channel: str
    ts: str | None


class _Posted(NamedTuple):
    """Where Slack put a message."""

    channel: str
    ts: str


class _Steps:
    """One row's delivery: its steps, each made once and recorded in the row when done.

    ``progress`` maps a step to ``{"state": "tried"}`` (its Slack call may have been
    made), or ``{"state": "done", ...}`` with what Slack made of it: the channel and ts
    of a post, the id of an uploaded file.
    """

    def __init__(
        self, client: AsyncWebClient, store: Store, message: OutboxMessage, token: str
    ) -> None:
        self.client = client
        self.store = store
        self.message = message
        self.token = token
        self.progress: JSON = dict(message.progress)

    async def sent(
        self,
        *,
        thread: tuple[str, str, str] | None = None,
        review_message: tuple[str, str, str] | None = None,
    ) -> None:
        marked = await sync(
            self.store.mark_sent,
            self.message.id,
            self.token,
            thread=thread,
            review_message=review_message,
        )
        if not marked:
            raise OutboxClaimLost(self.message.id)

    async def post_all(self, thread: _Thread, messages: list[blocks.Message]) -> _Posted:
        """Post ``messages`` in order, each once; where the last one is."""
        posted = _Posted(thread.channel, "")
        for n, part in enumerate(messages, start=1):
            posted = await self.post(f"post{n}", thread, part)
        return posted

    async def post(self, step: str, thread: _Thread, part: blocks.Message) -> _Posted:
        """Post ``part`` unless it was posted already: by an earlier attempt that recorded
        it, or by one whose answer was lost (found by its metadata)."""
        state = self.progress.get(step)
        if state is not None and state["state"] == "done":
            return _Posted(state["channel"], state["ts"])
        if state is None:
            await self._save(step, {"state": "tried"})
        elif (found := await self._find(step, thread)) is not None:
            await self._save(step, {"state": "done", "channel": found.channel, "ts": found.ts})
            return found
        try:
            response = await self.client.chat_postMessage(
                channel=thread.channel,
                thread_ts=thread.ts,
                text=part.text,
                blocks=part.blocks,
                metadata={"event_type": METADATA_TYPE, "event_payload": self._tag(step)},
            )
        except SlackApiError as exc:
            if _refused(exc):  # nothing was posted: the retry need not look for it
                del self.progress[step]
                await sync(
                    self.store.save_outbox_progress, self.message.id, self.token, self.progress
                )
            raise
        posted = _Posted(str(response["channel"]), str(response["ts"]))
        await self._save(step, {"state": "done", "channel": posted.channel, "ts": posted.ts})
        return posted

    async def upload(self, step: str, thread: _Thread, content: str, filename: str) -> None:
        """Upload ``content`` as a file in ``thread`` unless an earlier attempt did.

        The three calls of the external upload flow, so that the file's id is recorded
        before the upload is completed (shared): a retry asks Slack about that file.
        """
        state = self.progress.get(step)
        if state is not None and state["state"] == "done":
            return
        if state is not None and await self._shared(str(state["file"]), thread):
            await self._save(step, {"state": "done", "file": state["file"]})
            return
        data = content.encode()
        started = await self.client.files_getUploadURLExternal(filename=filename, length=len(data))
        file_id = str(started["file_id"])
        await self._save(step, {"state": "tried", "file": file_id})
        await self._put(str(started["upload_url"]), data)
        await self.client.files_completeUploadExternal(
            files=[{"id": file_id, "title": filename}],
            channel_id=thread.channel,
            thread_ts=thread.ts,
        )
        await self._save(step, {"state": "done", "file": file_id})

    async def _save(self, step: str, state: JSON) -> None:
        self.progress[step] = state
        await sync(self.store.save_outbox_progress, self.message.id, self.token, self.progress)

    def _tag(self, step: str) -> JSON:
        return {"outbox_id": self.message.id, "run_id": self.message.run_id, "step": step}

    async def _find(self, step: str, thread: _Thread) -> _Posted | None:
        """The message an earlier attempt posted for ``step``, if Slack has it."""
        since = self.message.created_at.replace(tzinfo=UTC) - LOOKUP_MARGIN
        oldest = f"{since.timestamp():.6f}"
        tag = self._tag(step)
        cursor: str | None = None
        while True:
            try:
                if thread.ts is None:
                    page = await self.client.conversations_history(
                        channel=thread.channel,
                        oldest=oldest,
                        include_all_metadata=True,
                        cursor=cursor,
                    )
                else:
                    page = await self.client.conversations_replies(
                        channel=thread.channel,
                        ts=thread.ts,
                        oldest=oldest,
                        include_all_metadata=True,
                        cursor=cursor,
                    )
            except SlackApiError as exc:
                if api_error(exc) != "channel_not_found":
                    raise
                # A channel configured by name: the lookup needs its id, which only an
                # answer would have told. Posting again risks a duplicate; not posting
                # would hold the run's thread forever.
                log.warning(
                    "outbox %d: cannot look for %s in %s", self.message.id, step, thread.channel
                )
                return None
            for found in page.get("messages") or []:
                metadata = found.get("metadata") or {}
                if metadata.get("event_type") == METADATA_TYPE and (
                    metadata.get("event_payload") == tag
                ):
                    log.info("outbox %d: %s was posted, its answer lost", self.message.id, step)
                    return _Posted(thread.channel, str(found["ts"]))
            cursor = (page.get("response_metadata") or {}).get("next_cursor")
            if not cursor:
                return None

    async def _shared(self, file_id: str, thread: _Thread) -> bool:
        """Whether the file an earlier attempt uploaded is in the thread already."""
        try:
            info = await self.client.files_info(file=file_id)
        except SlackApiError as exc:
            if api_error(exc) == "file_not_found":  # never uploaded: start over
                return False
            raise
        shares = (info.get("file") or {}).get("shares") or {}
        for scope in ("public", "private"):
            for share in (shares.get(scope) or {}).get(thread.channel, []):
                if share.get("thread_ts") == thread.ts:
                    return True
        return False

    async def _put(self, url: str, data: bytes) -> None:
        """The upload's second call: the bytes to the URL Slack gave."""
        timeout = ClientTimeout(total=self.client.timeout)
        session = self.client.session
        if session is not None:
            await _post_bytes(session, url, data, timeout)
            return
        async with ClientSession() as own:
            await _post_bytes(own, url, data, timeout)


async def _post_bytes(
    session: ClientSession, url: str, data: bytes, timeout: ClientTimeout
) -> None:
    async with session.post(url, data=data, timeout=timeout) as answer:
        answer.raise_for_status()


def _refused(exc: SlackApiError) -> bool:
    """Whether Slack answered that it did not apply the call: a 429, or an error code
    other than those with which "some aspect of the operation" may have succeeded."""
    status = exc.response.status_code
    return status == 429 or (status < 500 and api_error(exc) not in MAYBE_APPLIED)


def _note(message: OutboxMessage) -> RunNote | None:
    """The note a RUN_NOTE row asks for; None (logged) for one this bot has no words for."""
    try:
        return RunNote(str(message.payload.get("note", "")))
    except ValueError:
        log.warning("outbox %d: unknown run note %r; skipped", message.id, message.payload)
        return None


def _reason(exc: Exception) -> str:
    if isinstance(exc, SlackApiError):
        return f"slack: {api_error(exc)}"
    return f"{type(exc).__name__}: {exc}"
