"""Slack's HTTP entry point: check the signature, ack at once, let Bolt do the work after.

Slack wants an HTTP 200 within 3 s. Bolt answers only when a listener calls ``ack()``,
after its middleware chain: about a millisecond of event-loop CPU per request here, so
a burst of 200 requests queues for hundreds of milliseconds before the last ack. Our
acks carry nothing for button clicks, events and slash commands (slash answers go by
``response_url``), so those are acked as soon as their signature checks out and queued;
a few consumer tasks hand them to Bolt. The queue keeps the processing of earlier
requests from interleaving with (and delaying) the acks of a burst. View submissions,
whose ack may carry ``response_action`` errors, and ``url_verification`` go through Bolt
synchronously.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Any

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.signature import SignatureVerifier

log = logging.getLogger(__name__)

# Request types whose answer must be in the HTTP response itself.
_ANSWERED_IN_THE_ACK = frozenset({"view_submission", "url_verification", "ssl_check"})


def acks_later(body: Mapping[str, Any]) -> bool:
    """True when the request can be acked before it is processed."""
    if body.get("ssl_check"):
        return False
    if "command" in body:
        return True
    return str(body.get("type", "")) not in _ANSWERED_IN_THE_ACK


class SlackEndpoint:
    """The aiohttp handler of ``/slack/events`` in front of a Bolt ``AsyncApp``."""

    def __init__(self, app: AsyncApp, signing_secret: str, consumers: int = 4) -> None:
        self.app = app
        self.verifier = SignatureVerifier(signing_secret)
        self.consumers = consumers
        self._queue: asyncio.Queue[AsyncBoltRequest] | None = None
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        """Start the consumers on the running loop."""
        self._queue = asyncio.Queue()
        self._tasks = [asyncio.create_task(self._consume()) for _ in range(self.consumers)]

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.text()
        if not self.verifier.is_valid_request(body, dict(request.headers)):
            return web.Response(status=401)
        bolt_request = AsyncBoltRequest(
            body=body,
            query=request.query_string,
            headers=request.headers,  # type: ignore[arg-type]
        )
        if self._queue is None or not acks_later(bolt_request.body):
            return await to_aiohttp_response(await self.app.async_dispatch(bolt_request))
        self._queue.put_nowait(bolt_request)
        return web.Response(status=200)

    async def _consume(self) -> None:
        assert self._queue is not None
        while True:
            request = await self._queue.get()
            try:
                response = await self.app.async_dispatch(request)
                if response.status >= 400:
                    log.warning(
                        "Bolt answered %d after the ack: %s", response.status, response.body
                    )
            except Exception:
                log.exception("processing an acked Slack request failed")
            finally:
                self._queue.task_done()

    async def stop(self, timeout: float = 10.0) -> None:
        """Finish the requests already acked (bounded), then stop the consumers."""
        if self._queue is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._queue.join(), timeout)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
