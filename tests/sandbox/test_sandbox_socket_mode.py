"""Socket Mode: Bolt's ``AsyncSocketModeHandler`` (slack_sdk's aiohttp client) connects to the
stand-in through ``apps.connections.open`` and acks the envelopes that people's actions
become; the ack's payload is what a slash command or a view submission answers."""

from __future__ import annotations

import asyncio
from typing import Any

from sandbox_helpers import ALICE, CHANNEL, bolt_app, new_standin, running
from slack_bolt.adapter.socket_mode.aiohttp import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp

from sandbox import SlackStandIn

MODAL = {
    "type": "modal",
    "callback_id": "feedback",
    "title": {"type": "plain_text", "text": "Feedback"},
    "submit": {"type": "plain_text", "text": "Send"},
    "blocks": [
        {
            "type": "input",
            "block_id": "fb",
            "label": {"type": "plain_text", "text": "Feedback"},
            "element": {"type": "plain_text_input", "action_id": "text"},
        }
    ],
}


def tiny_app(slack: SlackStandIn, seen: list[Any]) -> AsyncApp:
    app = bolt_app(slack)

    @app.command("/crew")
    async def command(ack: Any, body: dict[str, Any], client: Any) -> None:
        await ack(f"Starting run: {body['text']}")
        await client.views_open(trigger_id=body["trigger_id"], view=MODAL)

    @app.event("message")
    async def message(event: dict[str, Any]) -> None:
        seen.append(event)

    @app.view("feedback")
    async def submitted(ack: Any, view: dict[str, Any]) -> None:
        await ack(response_action="errors", errors={"fb": "Try again"})

    return app


def test_socket_mode_delivery_and_acks() -> None:
    async def main() -> None:
        async with running(new_standin(transport="socket")) as slack:
            seen: list[Any] = []
            app = tiny_app(slack, seen)
            handler = AsyncSocketModeHandler(app, app_token=slack.app_token)
            await handler.connect_async()
            try:
                await slack.wait_for_socket(timeout=5)
                assert slack.calls("apps.connections.open")[0].ok

                command = await slack.slash_command(ALICE, CHANNEL, "/crew", "run blog")
                assert command.transport == "socket"
                assert command.status == 200
                assert command.json == {"text": "Starting run: run blog"}
                assert [e.text for e in slack.ephemerals(ALICE)] == ["Starting run: run blog"]

                root = await app.client.chat_postMessage(channel=CHANNEL, text="Draft")
                event = await slack.reply_in_thread(ALICE, CHANNEL, root["ts"], "shorter")
                assert event.status == 200
                assert event.json is None
                await slack.wait_for(lambda: seen)
                assert seen[0]["thread_ts"] == root["ts"]

                views = await slack.wait_for(lambda: slack.open_views(ALICE))
                submitted = await slack.submit_view(ALICE, views[0]["id"], {"fb": "x"})
                assert submitted.json == {
                    "response_action": "errors",
                    "errors": {"fb": "Try again"},
                }
                assert slack.open_views(ALICE)
            finally:
                await handler.close_async()

    asyncio.run(asyncio.wait_for(main(), 30))


def test_socket_mode_without_an_ack_times_out() -> None:
    async def main() -> None:
        async with running(new_standin(transport="socket", ack_timeout=0.5)) as slack:
            app = bolt_app(slack)

            @app.command("/slow")
            async def slow(ack: Any) -> None:
                await asyncio.sleep(1.0)
                await ack()

            handler = AsyncSocketModeHandler(app, app_token=slack.app_token)
            await handler.connect_async()
            try:
                await slack.wait_for_socket(timeout=5)
                delivery = await slack.slash_command(ALICE, CHANNEL, "/slow")
                assert delivery.timed_out
                assert delivery.latency >= 0.5
            finally:
                await handler.close_async()

    asyncio.run(asyncio.wait_for(main(), 30))
