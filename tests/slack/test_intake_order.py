"""The order the intake handles a burst in: the clicks before the rest, whose trigger_id a
modal needs within 3 s of the click (``bot.slack.intake``)."""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import urlencode

from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.intake import Intake, Receipt, classify
from sandbox import StandInThread
from storage import InboxStore, Store
from tests.support.slack_harness import ALICE, CHANNEL, SECRET, new_standin

FORM = "application/x-www-form-urlencoded"


def _command(n: int) -> str:
    return urlencode(
        {
            "command": "/later",
            "text": str(n),
            "user_id": ALICE,
            "channel_id": CHANNEL,
            "trigger_id": f"T.command.{n}",
        }
    )


def _click(n: int) -> str:
    payload = {
        "type": "block_actions",
        "trigger_id": f"T.click.{n}",
        "user": {"id": ALICE},
        "channel": {"id": CHANNEL},
        "actions": [{"action_id": "first", "value": str(n), "type": "button"}],
    }
    return urlencode({"payload": json.dumps(payload)})


def test_the_clicks_of_a_burst_are_handled_before_its_commands(db_url: str) -> None:
    store = Store.open(db_url)
    handled: list[str] = []

    with StandInThread(new_standin()) as slack:

        def app() -> AsyncApp:
            client = AsyncWebClient(token=slack.standin.bot_token, base_url=slack.api_url)
            made = AsyncApp(client=client, signing_secret=SECRET, process_before_response=True)

            @made.command("/later")
            async def command(ack: Any, body: dict[str, Any]) -> None:
                await ack()
                handled.append(f"command {body['text']}")

            @made.action("first")
            async def click(ack: Any, body: dict[str, Any]) -> None:
                await ack()
                handled.append(f"click {body['actions'][0]['value']}")

            return made

        async def burst() -> None:
            intake = Intake(app(), InboxStore(store))
            intake.start()
            try:
                # The commands arrive first, then the clicks, all before any is handled.
                bodies = [_command(n) for n in range(5)] + [_click(n) for n in range(5)]
                receipts = await asyncio.gather(
                    *(intake.receive(classify(b, FORM, f"sig:{i}")) for i, b in enumerate(bodies))
                )
                assert set(receipts) == {Receipt.RECORDED}
                async with asyncio.timeout(30):
                    while len(handled) < len(bodies):
                        await asyncio.sleep(0.01)
            finally:
                await intake.stop()

        try:
            asyncio.run(burst())
        finally:
            store.close()

    assert sorted(handled[:5]) == [f"click {n}" for n in range(5)]
    assert sorted(handled[5:]) == [f"command {n}" for n in range(5)]
