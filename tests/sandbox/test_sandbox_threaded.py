"""The synchronous wrapper, as our sync integration tests will use it: the stand-in runs on
its own loop in a thread, a Bolt app on another, and the test body is plain blocking code."""

from __future__ import annotations

from typing import Any

import pytest
from sandbox_helpers import ALICE, BOB, CHANNEL, SECRET, bolt_in_thread, new_standin
from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from sandbox import PersonActionRefused, StandInThread, Tamper

REVIEW = [
    {"type": "section", "text": {"type": "mrkdwn", "text": "Draft ready"}},
    {
        "type": "actions",
        "elements": [
            {
                "type": "button",
                "action_id": "approve",
                "text": {"type": "plain_text", "text": "Approve"},
                "value": "r1",
            }
        ],
    },
]


def test_sync_wrapper_drives_a_bolt_app_end_to_end() -> None:
    decided: list[str] = []
    with StandInThread(new_standin()) as slack:

        def make_app() -> AsyncApp:
            client = AsyncWebClient(token="xoxb-sandbox-bot-token", base_url=slack.api_url)
            app = AsyncApp(client=client, signing_secret=SECRET)

            @app.command("/crew")
            async def start(ack: Any, body: dict[str, Any], client: AsyncWebClient) -> None:
                await ack()
                root = await client.chat_postMessage(channel=body["channel_id"], text="Run r1")
                await client.chat_postMessage(
                    channel=body["channel_id"], thread_ts=root["ts"], text="Draft", blocks=REVIEW
                )

            @app.action("approve")
            async def approve(ack: Any, body: dict[str, Any]) -> None:
                decided.append(f"{body['user']['id']}:{body['actions'][0]['value']}")
                await ack()

            @app.event("message")
            async def feedback(event: dict[str, Any]) -> None:
                decided.append(f"{event['user']}:{event['text']}")

            return app

        with bolt_in_thread(make_app, slack) as endpoint:
            slack.bot_endpoint = endpoint
            assert slack.slash_command(ALICE, CHANNEL, "/crew", "run blog").status == 200
            draft = slack.wait_for(
                lambda: next((m for m in slack.messages(CHANNEL) if m.get("blocks")), None)
            )
            root_ts = draft["thread_ts"]
            assert [m["text"] for m in slack.thread(CHANNEL, root_ts)] == ["Run r1", "Draft"]
            assert slack.click_button(BOB, CHANNEL, draft["ts"], "approve").status == 200
            assert decided == [f"{BOB}:r1"]
            with pytest.raises(PersonActionRefused):
                slack.click_button(BOB, CHANNEL, draft["ts"], "reject")
            spoofed = slack.click_button(
                BOB, CHANNEL, draft["ts"], "approve", tamper=Tamper.BAD_SIGNATURE
            )
            assert spoofed.status == 401
            assert decided == [f"{BOB}:r1"]
            reply = slack.reply_in_thread(ALICE, CHANNEL, root_ts, "looks good")
            assert reply.ok
            assert slack.thread(CHANNEL, root_ts)[-1]["text"] == "looks good"
            slack.wait_for(lambda: len(decided) == 2)
            assert decided[1] == f"{ALICE}:looks good"
            assert len(slack.calls("chat.postMessage")) == 2
