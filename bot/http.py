"""Slack's HTTP entry point: check the signature, ack at once, let Bolt do the work after.

Slack wants an HTTP 200 within 3 s. Bolt answers only when a listener calls ``ack()``,
after its middleware chain: about a millisecond of event-loop CPU per request here, so
a burst of 200 requests queues for hundreds of milliseconds before the last ack. Our
acks carry nothing for button clicks, events and slash commands (slash answers go by
``response_url``), so those are acked as soon as their signature checks out and Bolt
processes them in a background task. View submissions, whose ack may carry
``response_action`` errors, and ``url_verification`` go through Bolt synchronously.
"""

from __future__ import annotations

import asyncio
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

    def __init__(self, app: AsyncApp, signing_secret: str) -> None:
        self.app = app
        self.verifier = SignatureVerifier(signing_secret)
        self._background: set[asyncio.Task[None]] = set()

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.text()
        if not self.verifier.is_valid_request(body, dict(request.headers)):
            return web.Response(status=401)
        bolt_request = AsyncBoltRequest(
            body=body,
            query=request.query_string,
            headers=request.headers,  # type: ignore[arg-type]
        )
        if not acks_later(bolt_request.body):
            return await to_aiohttp_response(await self.app.async_dispatch(bolt_request))
        task = asyncio.create_task(self._dispatch(bolt_request))
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return web.Response(status=200)

    async def _dispatch(self, request: AsyncBoltRequest) -> None:
        response = await self.app.async_dispatch(request)
        if response.status >= 400:
            log.warning("Bolt answered %d to an acked request: %s", response.status, response.body)

    async def drain(self, timeout: float = 10.0) -> None:
        """Let requests already acked finish (shutdown)."""
        if self._background:
            await asyncio.wait(set(self._background), timeout=timeout)
