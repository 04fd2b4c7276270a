"""The outbox dispatcher: announces in Slack what storage committed.

State changes and the rows announcing them commit together; this loop posts them
in order, one run at a time, and marks each row sent in the same transaction that
remembers where Slack put the message. A failed post (rate limit past the client's
retries, a 5xx, a network error) stays in the outbox and is retried with backoff;
later rows of the same run wait, so a thread never shows a result before its draft.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import timedelta

from aiohttp import ClientError
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot import blocks
from bot.listeners import api_error, sync
from crew_runtime.config import Config, UnknownCrewError
from storage import OutboxKind, OutboxMessage, Review, ReviewStatus, Run, Store
from storage.status import RunNote

log = logging.getLogger(__name__)

MAX_BACKOFF = timedelta(minutes=5)
_NUDGES = (OutboxKind.REVIEW_REMINDED, OutboxKind.REVIEW_ESCALATED)


class NotYet(Exception):
    """A row depends on one that has not gone out yet (the run's root message)."""


class Dispatcher:
    """Posts outbox rows to Slack; wake it from any thread after a commit."""

    def __init__(self, client: AsyncWebClient, store: Store, config: Config) -> None:
        self.client = client
        self.store = store
        self.config = config
        self._wake: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def wake(self) -> None:
        """Thread-safe: look at the outbox now rather than at the next tick."""
        if self._loop is not None and self._wake is not None:
            self._loop.call_soon_threadsafe(self._wake.set)

    async def run(self, stop: asyncio.Event, interval: float = 1.0) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        while not stop.is_set():
            try:
                await self.drain()
            except Exception:
                log.exception("outbox dispatch failed; retrying")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=interval)
            self._wake.clear()

    async def drain(self) -> int:
        """Send what is due; returns how many rows went out."""
        sent = 0
        held: set[str] = set()
        for message in await sync(self.store.due_outbox, 100):
            if message.run_id in held:
                continue
            try:
                await self._deliver(message)
                sent += 1
            except (NotYet, SlackApiError, ClientError, TimeoutError) as exc:
                held.add(message.run_id)
                reason = _reason(exc)
                backoff = min(timedelta(seconds=2 ** min(message.attempts, 10)), MAX_BACKOFF)
                log.warning(
                    "outbox %d (%s): %s; retry in %s", message.id, message.kind, reason, backoff
                )
                await sync(self.store.mark_failed, message.id, reason, backoff)
        return sent

    async def _deliver(self, message: OutboxMessage) -> None:
        run = await sync(self.store.get_run, message.run_id)
        if run.channel is None:  # started outside Slack with no channel configured
            await sync(self.store.mark_sent, message.id)
            return
        kind = OutboxKind(message.kind)
        if kind == OutboxKind.RUN_STARTED:
            await self._root(message, run)
            return
        if run.thread_ts is None:
            raise NotYet("the run's root message is not posted yet")
        if kind == OutboxKind.REVIEW_OPENED and message.review_id:
            await self._review(message, run, await sync(self.store.get_review, message.review_id))
        elif kind == OutboxKind.REVIEW_DECIDED and message.review_id:
            review = await sync(self.store.get_review, message.review_id)
            await self._replace(review)
            await self._update_root(run)
            await sync(self.store.mark_sent, message.id)
        elif (
            kind in (OutboxKind.REVIEW_REMINDED, OutboxKind.REVIEW_ESCALATED) and message.review_id
        ):
            review = await sync(self.store.get_review, message.review_id)
            if review.status == ReviewStatus.PENDING:
                await self._post_thread(run, [self._nudge(kind, review, run)])
            await sync(self.store.mark_sent, message.id)
        elif kind == OutboxKind.TASK_REOPENED and message.review_id:
            reopened = await sync(self.store.get_review, message.review_id)
            superseded = await sync(
                self.store.list_reviews, status=ReviewStatus.SUPERSEDED, run_id=run.id
            )
            for review in superseded:
                if review.decision is None:  # it was still waiting: take its buttons away
                    await self._replace(review)
            await self._post_thread(run, [blocks.reopened_message(reopened)])
            await sync(self.store.mark_sent, message.id)
        elif kind == OutboxKind.RUN_DIVERGED:
            note = str(message.payload.get("note", ""))
            await self._post_thread(run, [blocks.divergence_message(note)])
            await sync(self.store.mark_sent, message.id)
        elif kind == OutboxKind.RUN_NOTE:
            asked = _note(message)
            if asked is not None:
                await self._post_thread(run, [blocks.note_message(asked)])
            await sync(self.store.mark_sent, message.id)
        elif kind == OutboxKind.RUN_FINISHED:
            for review in await sync(
                self.store.list_reviews, status=ReviewStatus.CANCELLED, run_id=run.id
            ):
                await self._replace(review)
            await self._post_thread(run, blocks.result_messages(run))
            await self._update_root(run)
            await sync(self.store.mark_sent, message.id)
        else:
            await sync(self.store.mark_sent, message.id)

    async def _root(self, message: OutboxMessage, run: Run) -> None:
        if run.thread_ts is not None:
            await sync(self.store.mark_sent, message.id)
            return
        root = blocks.run_root(run, self._description(run))
        response = await self.client.chat_postMessage(
            channel=run.channel or "", text=root.text, blocks=root.blocks
        )
        await sync(
            self.store.mark_sent,
            message.id,
            thread=(run.id, str(response["channel"]), str(response["ts"])),
        )

    async def _review(self, message: OutboxMessage, run: Run, review: Review) -> None:
        if review.message_ts is not None:
            await sync(self.store.mark_sent, message.id)
            return
        if len(review.prompt) > blocks.FILE_THRESHOLD:
            filename = f"draft-{review.id}.md"
            await self.client.files_upload_v2(
                channel=run.channel,
                thread_ts=run.thread_ts,
                content=review.prompt,
                filename=filename,
                title=filename,
            )
            messages = [blocks.review_file_summary(review, run, filename)]
        else:
            messages = blocks.review_messages(review, run)
        channel, ts = await self._post_thread(run, messages)
        await sync(self.store.mark_sent, message.id, review_message=(review.id, channel, ts))
        # The root shows "Waiting for review" from now on. Best effort: the review is out
        # and must not be posted again, and the next decision updates the root anyway.
        try:
            await self._update_root(run)
        except (SlackApiError, ClientError, TimeoutError) as exc:
            log.warning("run %s: root message not updated: %s", run.id, _reason(exc))

    async def _post_thread(self, run: Run, messages: list[blocks.Message]) -> tuple[str, str]:
        channel, ts = run.channel or "", ""
        for part in messages:
            response = await self.client.chat_postMessage(
                channel=channel, thread_ts=run.thread_ts, text=part.text, blocks=part.blocks
            )
            channel, ts = str(response["channel"]), str(response["ts"])
        return channel, ts

    async def _replace(self, review: Review) -> None:
        """Swap a decided (or cancelled) review's buttons for who decided what."""
        if review.channel is None or review.message_ts is None:
            return
        done = blocks.decided_message(review)
        await self.client.chat_update(
            channel=review.channel, ts=review.message_ts, text=done.text, blocks=done.blocks
        )

    async def _update_root(self, run: Run) -> None:
        fresh = await sync(self.store.get_run, run.id)
        if fresh.channel is None or fresh.thread_ts is None:
            return
        root = blocks.run_root(fresh, self._description(fresh))
        await self.client.chat_update(
            channel=fresh.channel, ts=fresh.thread_ts, text=root.text, blocks=root.blocks
        )

    def _nudge(self, kind: OutboxKind, review: Review, run: Run) -> blocks.Message:
        try:
            spec = self.config.get(run.crew)
        except UnknownCrewError:
            return blocks.reminder_message(review, ())
        if kind == OutboxKind.REVIEW_ESCALATED:
            return blocks.escalation_message(review, spec.escalate_to or spec.reviewers)
        return blocks.reminder_message(review, spec.reviewers)

    def _description(self, run: Run) -> str:
        try:
            return self.config.get(run.crew).description
        except UnknownCrewError:
            return ""


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
