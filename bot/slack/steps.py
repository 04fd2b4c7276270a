"""Delivering one outbox row step by step, each step once (``bot.slack.dispatcher`` says
what each row posts).

A step is recorded in the row as tried before its Slack call and as done, with what Slack
made of it, after. A post carries message metadata naming its row and step; a step tried
before is first looked for (thread replies with ``conversations.replies``, root messages with
``conversations.history``, files with ``files.info``) so that a post Slack stored whose answer
was lost is not made again. An upload goes through the external upload flow, its file id
recorded before the upload is completed.
"""

from __future__ import annotations

import logging
from datetime import UTC, timedelta
from typing import Any, NamedTuple

from aiohttp import ClientSession, ClientTimeout
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack import blocks
from bot.slack.handlers import api_error, sync
from storage import OutboxClaimLost, OutboxMessage, Store

log = logging.getLogger(__name__)

METADATA_TYPE = "countersign_outbox"
# A review's messages say so instead, for other apps (and this one) to find: the same
# payload, with the review's id.
REVIEW_METADATA_TYPE = "countersign_review"
# Slack's errors after which a call may have been applied in part, as its docs warn.
MAYBE_APPLIED = frozenset({"fatal_error", "internal_error"})
# Slack's clock and ours may differ a little: look for a lost post from a bit earlier.
LOOKUP_MARGIN = timedelta(minutes=1)

JSON = dict[str, Any]


class Thread(NamedTuple):
    """Where a post goes: a channel, and the thread's root message (None: top level)."""

    channel: str
    ts: str | None


class Posted(NamedTuple):
    """Where Slack put a message."""

    channel: str
    ts: str


class Steps:
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

    async def post_all(
        self, thread: Thread, messages: list[blocks.Message], *, review_id: str | None = None
    ) -> Posted:
        """Post ``messages`` in order, each once; where the last one is."""
        posted = Posted(thread.channel, "")
        for n, part in enumerate(messages, start=1):
            posted = await self.post(f"post{n}", thread, part, review_id=review_id)
        return posted

    async def post(
        self, step: str, thread: Thread, part: blocks.Message, *, review_id: str | None = None
    ) -> Posted:
        """Post ``part`` unless it was posted already: by an earlier attempt that recorded
        it, or by one whose answer was lost (found by its metadata).

        A message of review ``review_id`` carries the metadata type ``countersign_review``
        and the review's id besides the row and step (Slack keeps it through
        ``chat.update``s that give none)."""
        state = self.progress.get(step)
        if state is not None and state["state"] == "done":
            return Posted(state["channel"], state["ts"])
        if state is None:
            await self._save(step, {"state": "tried"})
        elif (found := await self._find(step, thread, review_id)) is not None:
            await self._save(step, {"state": "done", "channel": found.channel, "ts": found.ts})
            return found
        try:
            response = await self.client.chat_postMessage(
                channel=thread.channel,
                thread_ts=thread.ts,
                text=part.text,
                blocks=part.blocks,
                metadata=self._metadata(step, review_id),
            )
        except SlackApiError as exc:
            if _refused(exc):  # nothing was posted: the retry need not look for it
                del self.progress[step]
                await sync(
                    self.store.save_outbox_progress, self.message.id, self.token, self.progress
                )
            raise
        posted = Posted(str(response["channel"]), str(response["ts"]))
        await self._save(step, {"state": "done", "channel": posted.channel, "ts": posted.ts})
        return posted

    async def upload(self, step: str, thread: Thread, content: str, filename: str) -> None:
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

    def _metadata(self, step: str, review_id: str | None) -> JSON:
        tag: JSON = {"outbox_id": self.message.id, "run_id": self.message.run_id, "step": step}
        if review_id is None:
            return {"event_type": METADATA_TYPE, "event_payload": tag}
        return {
            "event_type": REVIEW_METADATA_TYPE,
            "event_payload": {**tag, "review_id": review_id},
        }

    async def _find(self, step: str, thread: Thread, review_id: str | None) -> Posted | None:
        """The message an earlier attempt posted for ``step``, if Slack has it."""
        since = self.message.created_at.replace(tzinfo=UTC) - LOOKUP_MARGIN
        oldest = f"{since.timestamp():.6f}"
        wanted = self._metadata(step, review_id)
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
                if metadata.get("event_type") == wanted["event_type"] and (
                    metadata.get("event_payload") == wanted["event_payload"]
                ):
                    log.info("outbox %d: %s was posted, its answer lost", self.message.id, step)
                    return Posted(thread.channel, str(found["ts"]))
            cursor = (page.get("response_metadata") or {}).get("next_cursor")
            if not cursor:
                return None

    async def _shared(self, file_id: str, thread: Thread) -> bool:
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


def _refused(exc: SlackApiError) -> bool:
    """Whether Slack answered that it did not apply the call: a 429, or an error code
    other than those with which "some aspect of the operation" may have succeeded."""
    status = exc.response.status_code
    return status == 429 or (status < 500 and api_error(exc) not in MAYBE_APPLIED)


async def _post_bytes(
    session: ClientSession, url: str, data: bytes, timeout: ClientTimeout
) -> None:
    async with session.post(url, data=data, timeout=timeout) as answer:
        answer.raise_for_status()
