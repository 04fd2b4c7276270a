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

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.signature import SignatureVerifier

log = logging.getLogger(__name__)

# Markers of the requests whose answer must be in the HTTP response itself, as they
# appear in the raw body (JSON, or form-encoded JSON). A marker that shows up inside
# some other request's text only sends that request down the slower, synchronous path.
_ANSWERED_IN_THE_ACK = (
    "view_submission",
    "url_verification",
    "ssl_check=",
)


def acks_later(raw_body: str) -> bool:
    """True when the request can be acked before it is parsed and processed.

    Decided on the raw text, not the parsed payload: parsing costs more than the rest
    of the ack, and a burst of requests waits on it.
    """
    return not any(marker in raw_body for marker in _ANSWERED_IN_THE_ACK)


class SlackEndpoint:
    """The aiohttp handler of ``/slack/events`` in front of a Bolt ``AsyncApp``."""

    def __init__(self, app: AsyncApp, signing_secret: str, consumers: int = 4) -> None:
        self.app = app
        self.verifier = SignatureVerifier(signing_secret)
        self.consumers = consumers
        self._queue: asyncio.Queue[tuple[str, str, Mapping[str, str]]] | None = None
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        """Start the consumers on the running loop."""
        self._queue = asyncio.Queue()
        self._tasks = [asyncio.create_task(self._consume()) for _ in range(self.consumers)]

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.text()
        if not self.verifier.is_valid_request(body, dict(request.headers)):
            return web.Response(status=401)
        if self._queue is None or not acks_later(body):
            bolt_request = _bolt_request(body, request.query_string, request.headers)
            return await to_aiohttp_response(await self.app.async_dispatch(bolt_request))
        self._queue.put_nowait((body, request.query_string, dict(request.headers)))
        return web.Response(status=200)

    async def _consume(self) -> None:
        assert self._queue is not None
        while True:
            body, query, headers = await self._queue.get()
            try:
                response = await self.app.async_dispatch(_bolt_request(body, query, headers))
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


def _bolt_request(body: str, query: str, headers: Mapping[str, str]) -> AsyncBoltRequest:
    return AsyncBoltRequest(body=body, query=query, headers=dict(headers))
