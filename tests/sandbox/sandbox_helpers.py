"""Helpers shared by the stand-in's tests (a plain module, not conftest.py, so that its name
cannot clash with other test folders' conftest modules).

Tests are synchronous (pytest-asyncio is not used): each scenario is one coroutine run with
``asyncio.run``, starting the stand-in and, where a bot is needed, a tiny Bolt ``AsyncApp``
served by Bolt's own aiohttp server on 127.0.0.1, so requests cross a real socket.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from aiohttp import web
from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from sandbox import SandboxPage, SlackStandIn

SECRET = "test-signing-secret"
CHANNEL = "C0REVIEW"
ALICE = "UALICE"
BOB = "UBOB"

# A review message: a button and a menu, as the bot posts them.
APPROVAL_BLOCKS = [
    {"type": "section", "text": {"type": "mrkdwn", "text": "*Draft v1* is ready"}},
    {
        "type": "actions",
        "block_id": "review",
        "elements": [
            {
                "type": "button",
                "action_id": "approve",
                "text": {"type": "plain_text", "text": "Approve"},
                "style": "primary",
                "value": "review:r1:v1",
            },
            {
                "type": "static_select",
                "action_id": "verdict",
                "placeholder": {"type": "plain_text", "text": "Verdict"},
                "options": [
                    {"text": {"type": "plain_text", "text": "Good"}, "value": "good"},
                    {"text": {"type": "plain_text", "text": "Bad"}, "value": "bad"},
                ],
            },
        ],
    },
]


def new_standin(**options: Any) -> SlackStandIn:
    """A stand-in with two people and one review channel."""
    standin = SlackStandIn(signing_secret=SECRET, **options)
    standin.add_user(ALICE, "alice", "Alice Liddell")
    standin.add_user(BOB, "bob")
    standin.add_channel(CHANNEL, "reviews", [ALICE, BOB])
    return standin


@asynccontextmanager
async def running(
    standin: SlackStandIn, page: SandboxPage | None = None
) -> AsyncIterator[SlackStandIn]:
    await standin.start(page=page)
    try:
        yield standin
    finally:
        await standin.stop()


def bolt_app(standin: SlackStandIn, secret: str = SECRET) -> AsyncApp:
    """A Bolt app whose Web API client talks to the stand-in (slack_sdk ``base_url``)."""
    client = AsyncWebClient(token=standin.bot_token, base_url=standin.api_url, timeout=5)
    return AsyncApp(client=client, signing_secret=secret)


@asynccontextmanager
async def serving(app: AsyncApp, standin: SlackStandIn) -> AsyncIterator[str]:
    """Serve ``app`` over HTTP on 127.0.0.1 and point the stand-in's deliveries at it."""
    runner = web.AppRunner(app.web_app(path="/slack/events"), handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    standin.bot_endpoint = f"http://127.0.0.1:{port}/slack/events"
    try:
        yield standin.bot_endpoint
    finally:
        await runner.cleanup()


@contextmanager
def bolt_in_thread(app_factory: Any, standin_api: Any) -> Iterator[str]:
    """Serve a Bolt app on its own loop in a thread, for the synchronous wrapper's tests.

    ``app_factory()`` is called on that loop (Bolt wants a running loop for its client).
    """
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    async def start() -> tuple[web.AppRunner, str]:
        runner = web.AppRunner(app_factory().web_app(path="/slack/events"), handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        return runner, f"http://127.0.0.1:{runner.addresses[0][1]}/slack/events"

    runner, url = asyncio.run_coroutine_threadsafe(start(), loop).result(10)
    try:
        yield url
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
