"""The order the intake handles a burst in: a fresh click's early step (its modal) first,
then the clicks before the rest, whose trigger_id a modal needs within 3 s of the click
(``bot.slack.intake``); and how it reads a click before handling it."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Coroutine
from contextvars import ContextVar
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qsl, urlencode

import pytest
from hypothesis import given
from hypothesis import strategies as st
from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.intake import Intake, Receipt, classify, clicked, parse_body
from sandbox import StandInThread
from storage import InboxStore, NewRequest, Store
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


def _app(
    slack: StandInThread,
    click_id: str | re.Pattern[str],
    on_click: Callable[[dict[str, Any]], None],
    on_command: Callable[[dict[str, Any]], None],
) -> AsyncApp:
    """A Bolt app handling clicks on ``click_id`` and ``/later`` commands (acked first)."""
    client = AsyncWebClient(token=slack.standin.bot_token, base_url=slack.api_url)
    made = AsyncApp(client=client, signing_secret=SECRET, process_before_response=True)

    @made.command("/later")
    async def command(ack: Any, body: dict[str, Any]) -> None:
        await ack()
        on_command(body)

    @made.action(click_id)
    async def click(ack: Any, body: dict[str, Any]) -> None:
        await ack()
        on_click(body)

    return made


def _burst(
    store: Store, intake: Callable[[], Intake], bodies: list[str], seen: list[str], until: int
) -> None:
    """``bodies`` received at once by a new ``intake()``, all recorded; then until ``seen``
    has ``until`` lines, and the intake stopped."""

    async def burst() -> None:
        started = intake()
        started.start()
        try:
            receipts = await asyncio.gather(
                *(started.receive(classify(b, FORM, f"sig:{i}")) for i, b in enumerate(bodies))
            )
            assert set(receipts) == {Receipt.RECORDED}
            async with asyncio.timeout(30):
                while len(seen) < until:
                    await asyncio.sleep(0.01)
        finally:
            await started.stop()

    try:
        asyncio.run(burst())
    finally:
        store.close()


def test_the_clicks_of_a_burst_are_handled_before_its_commands(db_url: str) -> None:
    store = Store.open(db_url)
    handled: list[str] = []

    with StandInThread(new_standin()) as slack:

        def app() -> AsyncApp:
            return _app(
                slack,
                "first",
                lambda body: handled.append(f"click {body['actions'][0]['value']}"),
                lambda body: handled.append(f"command {body['text']}"),
            )

        # The commands arrive first, then the clicks, all before any is handled.
        bodies = [_command(n) for n in range(5)] + [_click(n) for n in range(5)]
        _burst(store, lambda: Intake(app(), InboxStore(store)), bodies, handled, len(bodies))

    assert sorted(handled[:5]) == [f"click {n}" for n in range(5)]
    assert sorted(handled[5:]) == [f"command {n}" for n in range(5)]


def _button(n: int, action_id: str) -> str:
    """A click on a review button, its message (with every button's action id) along."""
    message = {
        "ts": "1.1",
        "blocks": [
            {
                "type": "actions",
                "elements": [
                    {"type": "button", "action_id": f"countersign:{a}", "value": "rev_1"}
                    for a in ("approve", "edit", "changes", "reject")
                ],
            }
        ],
        "text": 'say "actions": [ and "action_id": "countersign:edit" in a draft',
    }
    payload = {
        "type": "block_actions",
        "user": {"id": ALICE},
        "channel": {"id": CHANNEL},
        "message": message,
        "trigger_id": f"T.click.{n}",
        "actions": [{"action_id": action_id, "value": "rev_1", "type": "button"}],
    }
    return urlencode({"payload": json.dumps(payload)})


@pytest.mark.parametrize("action", ["countersign:changes", "countersign:approve", "other:x"])
def test_a_click_is_read_for_its_trigger_and_what_was_clicked_without_decoding(
    action: str,
) -> None:
    body = _button(7, action)
    assert clicked(body, FORM) == ("T.click.7", action)
    as_json = json.dumps(parse_body(body, FORM))
    assert clicked(as_json, "application/json") == ("T.click.7", action)
    assert clicked(_command(1), FORM) is None


@given(st.lists(st.tuples(st.text(), st.text()), max_size=5), st.text())
def test_a_form_body_is_decoded_as_parse_qsl_decodes_it(
    fields: list[tuple[str, str]], tail: str
) -> None:
    body = urlencode(fields) + "&" + tail
    assert parse_body(body, FORM) == dict(parse_qsl(body, keep_blank_values=True))


SEEN: ContextVar[str] = ContextVar("seen", default="")


def test_a_fresh_clicks_early_step_runs_once_in_its_own_context_before_its_listener(
    db_url: str,
) -> None:
    """The step a listener finds done (a modal opened early): in the click's context, before
    its listener, for a fresh click only (not for commands, not for a request a dead process
    left, whose handling the sweep takes up)."""
    store = Store.open(db_url)
    events: list[str] = []

    def early(trigger_id: str, action_id: str) -> Coroutine[Any, Any, None] | None:
        async def step() -> None:
            events.append(f"early {trigger_id}")
            SEEN.set(trigger_id)

        return step() if action_id == "countersign:changes" else None

    with StandInThread(new_standin()) as slack:

        def intake() -> Intake:
            app = _app(
                slack,
                re.compile("countersign:.*"),
                lambda body: events.append(
                    f"listener {body['trigger_id']} saw {SEEN.get() or 'nothing'}"
                ),
                lambda body: events.append(f"command saw {SEEN.get() or 'nothing'}"),
            )
            inbox = InboxStore(store, claim=timedelta(seconds=0.3))
            # left by a process that died after its ack: the sweep handles it
            inbox.record([NewRequest("trigger:T.click.0", _button(0, "countersign:changes"), FORM)])
            return Intake(app, inbox, early=early)

        bodies = [_command(1), _button(1, "countersign:changes")]
        _burst(store, intake, [*bodies, _button(2, "countersign:approve")], events, 5)

    assert events.index("early T.click.1") < events.index("listener T.click.1 saw T.click.1")
    assert sorted(events) == [
        "command saw nothing",
        "early T.click.1",
        "listener T.click.0 saw nothing",
        "listener T.click.1 saw T.click.1",
        "listener T.click.2 saw nothing",
    ]
