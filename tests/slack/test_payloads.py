"""Slack payloads parse into typed values; anything malformed or untrusted is a
``PayloadError`` with a reason, never a ``KeyError``/``TypeError`` in a listener.

The happy-path payloads follow Slack's reference pages; the click and the submission
are built by the Slack stand-in's own payload functions from the blocks ``bot.slack.blocks``
and the modal ``bot.slack.modals`` produce, so a button or input the bot never rendered cannot
parse here."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.slack import modals, review_blocks
from bot.slack.payloads import (
    ACTIONS,
    BUTTON_PATTERN,
    MODAL_ACTIONS,
    MODAL_PATTERN,
    REVISE,
    ButtonClick,
    ClaimClick,
    ModalSubmission,
    PayloadError,
    ReassignSubmission,
    ReviseClick,
    ReviseSubmission,
    SlashCommand,
    ThreadMessage,
    action_id,
    callback_id,
    parse_approve_all,
    parse_button,
    parse_claim_click,
    parse_message_event,
    parse_reassign_submission,
    parse_revise_click,
    parse_revise_submission,
    parse_revoke_click,
    parse_slash,
    parse_submission,
)
from crew_runtime.config import Config
from crew_runtime.errors import UsageError
from crew_runtime.service import Countersign
from sandbox import payloads as slack
from storage import Store, ToolApprovalDetails
from storage.status import DecisionKind, ReviewKind
from tests.support.records import FAST, JSONISH, review, run

NOW = datetime(2026, 1, 2, 3, 4, 5)
Json = dict[str, Any]


def user() -> Json:
    return {"id": "U0ALICE", "username": "alice", "name": "alice", "team_id": "T0TEST"}


def click(action: str, kind: ReviewKind = ReviewKind.TASK_REVIEW) -> Json:
    """A block_actions payload for a click on the button the bot really rendered."""
    posted = review_blocks.review_messages(review(kind), run())[-1].blocks
    block, element = slack.find_element(posted, f"countersign:{action}")
    block = {**block, "block_id": block.get("block_id", "b1")}
    return {
        "type": "block_actions",
        "user": user(),
        "api_app_id": "A0APP",
        "token": "legacy",
        "trigger_id": "123.456.abcdef",
        "container": {
            "type": "message",
            "message_ts": "1700000250.000400",
            "channel_id": "C0DRAFTS",
            "is_ephemeral": False,
            "thread_ts": "1700000000.000100",
        },
        "team": {"id": "T0TEST", "domain": "test"},
        "channel": {"id": "C0DRAFTS", "name": "drafts"},
        "message": {"type": "message", "ts": "1700000250.000400", "blocks": posted},
        "state": {"values": {}},
        "response_url": "https://hooks.slack.com/actions/T0TEST/123/abc",
        "actions": [slack.action(block, element, "1700000400.123456", None)],
    }


def submission(action: str, typed: str | None = "Please cite sources") -> Json:
    """A view_submission of the modal the bot really built, filled in by a person."""
    view = modals.modal(DecisionKind(action), review(), "C0DRAFTS", "1700000250.000400")
    view = {**view, "id": "V0001", "team_id": "T0TEST", "hash": "1.abc"}
    view["state"] = slack.view_state(view, {"text": typed} if typed is not None else {})
    return {"type": "view_submission", "user": user(), "trigger_id": "1.2.3", "view": view}


PAY_SCHEMA: Json = {
    "properties": {
        "amount": {"title": "Amount", "type": "integer"},
        "to": {"title": "To", "type": "string"},
        "urgent": {"title": "Urgent", "type": "boolean", "default": False},
    },
    "required": ["amount", "to"],
}


def tool_edit_submission(typed: dict[str, Any]) -> Json:
    """A view_submission of the edit modal of a tool call, one input per argument."""
    proposed = replace(
        review(ReviewKind.TOOL_APPROVAL),
        details=ToolApprovalDetails("pay", args={"amount": 1500, "to": "ACME"}, schema=PAY_SCHEMA),
    )
    view = modals.modal(DecisionKind.EDIT, proposed, "C0DRAFTS", "1700000250.000400")
    view = {**view, "id": "V0002", "team_id": "T0TEST", "hash": "1.abc"}
    view["state"] = slack.view_state(view, typed)
    return {"type": "view_submission", "user": user(), "trigger_id": "1.2.3", "view": view}


def revise_click() -> Json:
    """A click on "Revise an earlier task" in a later task's review message."""
    later = replace(review(), stream="task1:Editor")
    posted = review_blocks.review_messages(later, run())[-1].blocks
    block, element = slack.find_element(posted, "countersign:revise")
    body = click("approve")
    body["message"]["blocks"] = posted
    body["actions"] = [slack.action(block, element, "1700000400.123456", None)]
    return body


def revise_submission(chosen: str | None = "2", feedback: str | None = "add otters facts") -> Json:
    view = modals.revise_modal(
        "run_0a1b2c3d4e5f", [(0, "Task 1: Outline"), (2, "Task 3")], "C0DRAFTS", None
    )
    view = {**view, "id": "V0003", "team_id": "T0TEST", "hash": "1.abc"}
    if chosen is not None and feedback:
        view["state"] = slack.view_state(view, {"task": chosen, "text": feedback})
    else:  # Slack's client would refuse this; a lax or forged one may send it
        view["state"] = {
            "values": {
                "task": {"task": {"type": "static_select", "selected_option": None}},
                "text": {"value": {"type": "plain_text_input", "value": feedback or None}},
            }
        }
    return {"type": "view_submission", "user": user(), "trigger_id": "1.2.3", "view": view}


def message_event(**event: Any) -> Json:
    base = {
        "type": "message",
        "channel": "C0DRAFTS",
        "channel_type": "channel",
        "user": "U0ALICE",
        "text": "make it shorter",
        "ts": "1700000100.000200",
        "thread_ts": "1700000000.000100",
        "event_ts": "1700000100.000200",
    }
    return {"type": "event_callback", "event_id": "Ev0PV52K21", "event": {**base, **event}}


def slash(**fields: Any) -> Json:
    return {
        "token": "legacy",
        "team_id": "T0TEST",
        "channel_id": "C0DRAFTS",
        "user_id": "U0ALICE",
        "command": "/crew",
        "text": "run blog topic=x",
        "response_url": "https://hooks.slack.com/commands/T0TEST/111/xxx",
        "trigger_id": "13345224609.738474920.8088930838d88f008e0",
        **fields,
    }


# --- happy paths --------------------------------------------------------------------------


@pytest.mark.parametrize("action", ["approve", "edit", "changes", "reject"])
def test_click_on_a_rendered_button(action: str) -> None:
    assert parse_button(click(action)) == ButtonClick(
        action=action,
        review_id="rev_0a1b2c3d4e5f",
        user_id="U0ALICE",
        channel_id="C0DRAFTS",
        message_ts="1700000250.000400",
        trigger_id="123.456.abcdef",
        thread_ts="1700000000.000100",
    )


def test_click_without_container_falls_back_to_channel_and_message() -> None:
    body = click("answer", ReviewKind.QUESTION)
    del body["container"]
    parsed = parse_button(body)
    assert (parsed.action, parsed.channel_id, parsed.message_ts) == (
        "answer",
        "C0DRAFTS",
        "1700000250.000400",
    )


@pytest.mark.parametrize("action", MODAL_ACTIONS)
def test_submission_of_a_rendered_modal(action: DecisionKind) -> None:
    assert parse_submission(submission(action)) == ModalSubmission(
        action=action,
        review_id="rev_0a1b2c3d4e5f",
        user_id="U0ALICE",
        text="Please cite sources",
        view_id="V0001",
        channel_id="C0DRAFTS",
        message_ts="1700000250.000400",
    )


def test_reject_reason_may_be_left_empty() -> None:
    assert parse_submission(submission("reject", None)).text == ""


def test_submission_of_a_tool_calls_edit_modal_has_its_fields() -> None:
    parsed = parse_submission(
        tool_edit_submission({"arg:amount": "900", "arg:to": "ACME Ltd", "arg:urgent": "true"})
    )
    assert (parsed.action, parsed.review_id, parsed.text) == ("edit", "rev_0a1b2c3d4e5f", "")
    assert parsed.fields == {"amount": "900", "to": "ACME Ltd", "urgent": "true"}


def test_an_unchanged_tool_edit_sends_the_prefilled_values() -> None:
    parsed = parse_submission(tool_edit_submission({}))
    assert parsed.fields == {"amount": "1500", "to": "ACME", "urgent": ""}


def test_other_modals_have_no_fields() -> None:
    assert parse_submission(submission("edit")).fields == {}


def test_click_on_revise_an_earlier_task() -> None:
    assert parse_revise_click(revise_click()) == ReviseClick(
        run_id="run_0a1b2c3d4e5f",
        user_id="U0ALICE",
        channel_id="C0DRAFTS",
        message_ts="1700000250.000400",
        trigger_id="123.456.abcdef",
    )
    with pytest.raises(PayloadError):
        parse_button(revise_click())
    with pytest.raises(PayloadError):
        parse_revise_click(click("approve"))


@pytest.mark.parametrize("action", ["claim", "reassign"])
def test_click_on_claim_or_reassign(action: str) -> None:
    assert parse_claim_click(click(action)) == ClaimClick(
        reassign=action == "reassign",
        review_id="rev_0a1b2c3d4e5f",
        user_id="U0ALICE",
        channel_id="C0DRAFTS",
        message_ts="1700000250.000400",
        trigger_id="123.456.abcdef",
        thread_ts="1700000000.000100",
    )
    with pytest.raises(PayloadError):
        parse_button(click(action))
    with pytest.raises(PayloadError):
        parse_claim_click(click("approve"))


def test_submission_of_the_reassign_modal() -> None:
    view = {**modals.reassign_modal(review()), "id": "V0004", "team_id": "T0TEST", "hash": "1.a"}
    view["state"] = slack.view_state(view, {"to": "U0BEN"})
    body = {"type": "view_submission", "user": user(), "trigger_id": "1.2.3", "view": view}
    assert parse_reassign_submission(body) == ReassignSubmission(
        review_id="rev_0a1b2c3d4e5f", user_id="U0ALICE", to="U0BEN", view_id="V0004"
    )
    # Slack's client requires a choice; a lax or forged one may send none
    view["state"]["values"]["to"]["to"]["selected_user"] = None
    with pytest.raises(PayloadError):
        parse_reassign_submission(body)
    with pytest.raises(PayloadError):
        parse_reassign_submission(submission("changes"))


def test_submission_of_the_revise_modal() -> None:
    assert parse_revise_submission(revise_submission()) == ReviseSubmission(
        run_id="run_0a1b2c3d4e5f",
        user_id="U0ALICE",
        task_index=2,
        feedback="add otters facts",
        view_id="V0003",
        channel_id="C0DRAFTS",
        message_ts=None,
    )
    nothing = parse_revise_submission(revise_submission(None, ""))
    assert (nothing.task_index, nothing.feedback) == (None, "")
    with pytest.raises(PayloadError):
        parse_submission(revise_submission())
    with pytest.raises(PayloadError):
        parse_revise_submission(submission("changes"))


def test_message_event() -> None:
    assert parse_message_event(message_event()) == ThreadMessage(
        event_id="Ev0PV52K21",
        channel_id="C0DRAFTS",
        ts="1700000100.000200",
        thread_ts="1700000000.000100",
        user_id="U0ALICE",
        bot_id=None,
        subtype=None,
        text="make it shorter",
    )


def test_bot_echo_and_edits_are_reported_not_judged() -> None:
    echo = parse_message_event(message_event(bot_id="B0BOT", user="U0BOT"))
    assert (echo.bot_id, echo.user_id) == ("B0BOT", "U0BOT")
    edit = message_event(subtype="message_changed", hidden=True)
    del edit["event"]["text"], edit["event"]["user"]
    parsed = parse_message_event(edit)
    assert (parsed.subtype, parsed.text, parsed.user_id) == ("message_changed", "", None)


def test_app_mention_without_thread() -> None:
    body = message_event(type="app_mention", text="<@U0BOT> hi")
    del body["event"]["thread_ts"]
    parsed = parse_message_event(body)
    assert (parsed.thread_ts, parsed.text) == (None, "<@U0BOT> hi")


def test_slash_command() -> None:
    assert parse_slash(slash()) == SlashCommand(
        command="/crew",
        text="run blog topic=x",
        user_id="U0ALICE",
        channel_id="C0DRAFTS",
        trigger_id="13345224609.738474920.8088930838d88f008e0",
        response_url="https://hooks.slack.com/commands/T0TEST/111/xxx",
    )
    bare = slash()
    del bare["text"], bare["trigger_id"], bare["response_url"]
    assert parse_slash(bare).text == ""


# --- refusals -----------------------------------------------------------------------------

Edit = Callable[[Json], None]


def _set(path: tuple[Any, ...], value: Any) -> Edit:
    def edit(body: Json) -> None:
        target = body
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return edit


def _drop(path: tuple[Any, ...]) -> Edit:
    def edit(body: Json) -> None:
        target = body
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]

    return edit


BUTTON_BREAKS = {
    "wrong type": _set(("type",), "view_submission"),
    "no actions": _set(("actions",), []),
    "actions not a list": _set(("actions",), {"0": {}}),
    "foreign action": _set(("actions", 0, "action_id"), "someone_else:approve"),
    "unknown action": _set(("actions", 0, "action_id"), "countersign:delete"),
    "no value": _drop(("actions", 0, "value")),
    "value is text": _set(("actions", 0, "value"), "please approve this draft"),
    "value too long": _set(("actions", 0, "value"), "r" * 65),
    "value not a string": _set(("actions", 0, "value"), 7),
    "no user": _drop(("user",)),
    "user not an object": _set(("user",), "U0ALICE"),
    "user id with markup": _set(("user", "id"), "<!channel>"),
    "container not an object": _set(("container",), "C1"),
    "channel id wrong type": _set(("container", "channel_id"), ["C1"]),
    "trigger id with spaces": _set(("trigger_id",), "1 2 3"),
}


@pytest.mark.parametrize("name", BUTTON_BREAKS)
def test_broken_clicks_are_refused(name: str) -> None:
    body = click("approve")
    BUTTON_BREAKS[name](body)
    with pytest.raises(PayloadError):
        parse_button(body)


SUBMISSION_BREAKS = {
    "wrong type": _set(("type",), "block_actions"),
    "no view": _drop(("view",)),
    "foreign callback": _set(("view", "callback_id"), "feedback_modal"),
    "approve has no modal": _set(("view", "callback_id"), "countersign:modal:approve"),
    "metadata not JSON": _set(("view", "private_metadata"), "{review_id: 1"),
    "metadata a list": _set(("view", "private_metadata"), "[1, 2]"),
    "metadata too deep": _set(("view", "private_metadata"), "[" * 2999),
    "metadata too long": _set(("view", "private_metadata"), " " * 3001),
    "metadata without review": _set(("view", "private_metadata"), '{"channel_id": "C1"}'),
    "metadata bad channel": _set(
        ("view", "private_metadata"), '{"review_id": "rev_1", "channel_id": "#general"}'
    ),
    "no state": _drop(("view", "state")),
    "no text block": _set(("view", "state", "values"), {}),
    "text not a string": _set(("view", "state", "values", "text", "value", "value"), 3),
    "no view id": _drop(("view", "id")),
}


@pytest.mark.parametrize("name", SUBMISSION_BREAKS)
def test_broken_submissions_are_refused(name: str) -> None:
    body = submission("changes")
    SUBMISSION_BREAKS[name](body)
    with pytest.raises(PayloadError):
        parse_submission(body)


REVISE_BREAKS = {
    "metadata without run": _set(("view", "private_metadata"), '{"review_id": "rev_1"}'),
    "task not an index": _set(
        ("view", "state", "values", "task", "task", "selected_option", "value"), "-1"
    ),
    "task option not an object": _set(
        ("view", "state", "values", "task", "task", "selected_option"), "2"
    ),
    "no task block": _drop(("view", "state", "values", "task")),
}


@pytest.mark.parametrize("name", REVISE_BREAKS)
def test_broken_revise_submissions_are_refused(name: str) -> None:
    body = revise_submission()
    REVISE_BREAKS[name](body)
    with pytest.raises(PayloadError):
        parse_revise_submission(body)


EVENT_BREAKS = {
    "not a callback": _set(("type",), "url_verification"),
    "no event": _drop(("event",)),
    "reaction event": _set(("event", "type"), "reaction_added"),
    "event type unhashable": _set(("event", "type"), ["message"]),
    "no channel": _drop(("event", "channel")),
    "no ts": _drop(("event", "ts")),
    "ts with slash": _set(("event", "ts"), "1/2"),
    "text not a string": _set(("event", "text"), {"t": 1}),
    "event id too long": _set(("event_id",), "E" * 65),
}


@pytest.mark.parametrize("name", EVENT_BREAKS)
def test_broken_events_are_refused(name: str) -> None:
    body = message_event()
    EVENT_BREAKS[name](body)
    with pytest.raises(PayloadError):
        parse_message_event(body)


SLASH_BREAKS = {
    "no command": _drop(("command",)),
    "command without slash": _set(("command",), "crew"),
    "text not a string": _set(("text",), ["run"]),
    "no user": _drop(("user_id",)),
    "no channel": _drop(("channel_id",)),
    "response url not http": _set(("response_url",), "javascript:alert(1)"),
}


@pytest.mark.parametrize("name", SLASH_BREAKS)
def test_broken_slash_commands_are_refused(name: str) -> None:
    body = slash()
    SLASH_BREAKS[name](body)
    with pytest.raises(PayloadError):
        parse_slash(body)


@pytest.mark.parametrize(
    "parse", [parse_button, parse_submission, parse_message_event, parse_slash]
)
@pytest.mark.parametrize("body", [None, "payload", 3, [], {}])
def test_non_payloads_are_refused(parse: Callable[[Any], object], body: Any) -> None:
    with pytest.raises(PayloadError):
        parse(body)


def test_actions_are_the_decision_words() -> None:
    assert ACTIONS == ("approve", "edit", "changes", "reject", "answer")
    assert all(isinstance(action, DecisionKind) for action in ACTIONS)


@pytest.mark.parametrize("action", ACTIONS)
def test_the_ids_slack_sees_are_unchanged_and_parse_back_to_the_decision(
    action: DecisionKind,
) -> None:
    assert action_id(action) == f"countersign:{action.value}"
    assert BUTTON_PATTERN.fullmatch(action_id(action))
    assert not BUTTON_PATTERN.fullmatch(action_id(REVISE))
    click = parse_button(_click_body(action_id(action)))
    assert click.action is action
    if action is not DecisionKind.APPROVE:
        assert MODAL_PATTERN.fullmatch(callback_id(action))
        assert parse_submission(submission(action)).action is action


def _click_body(clicked: str) -> Json:
    return {
        "type": "block_actions",
        "user": user(),
        "container": {"channel_id": "C0DRAFTS", "message_ts": "1700000250.000400"},
        "actions": [{"action_id": clicked, "value": "rev_0a1b2c3d4e5f"}],
    }


def test_a_person_cannot_decide_that_a_review_expired() -> None:
    service = Countersign(cast(Store, None), Config(Path("countersign.toml")))  # no read
    with pytest.raises(UsageError, match="unknown decision 'expire'"):
        service.decide("rev_0a1b2c3d4e5f", DecisionKind.EXPIRE, None, by="U1")


# --- properties ---------------------------------------------------------------------------

PARSERS: list[Callable[[Any], object]] = [
    parse_button,
    parse_approve_all,
    parse_revoke_click,
    parse_submission,
    parse_message_event,
    parse_slash,
    parse_revise_click,
    parse_revise_submission,
]


def parse_or_error(parse: Callable[[Any], object], body: Any) -> object:
    """The parsed value, or the PayloadError; any other exception fails the test."""
    try:
        return parse(body)
    except PayloadError as exc:
        return exc


@FAST
@given(JSONISH, st.sampled_from(PARSERS))
def test_arbitrary_json_only_ever_raises_payload_error(
    body: Any, parse: Callable[[Any], object]
) -> None:
    assert str(parse_or_error(parse, body))


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, inner in value.items():
            found += _paths(inner, (*prefix, key))
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            found += _paths(inner, (*prefix, i))
    return found


VALID: list[tuple[Callable[[], Json], Callable[[Any], object]]] = [
    (lambda: click("approve"), parse_button),
    (lambda: submission("changes"), parse_submission),
    (message_event, parse_message_event),
    (slash, parse_slash),
    (lambda: tool_edit_submission({"arg:amount": "900"}), parse_submission),
    (revise_click, parse_revise_click),
    (revise_submission, parse_revise_submission),
]


@FAST
@given(st.sampled_from(VALID), st.data())
def test_any_field_replaced_by_junk_only_ever_raises_payload_error(
    case: tuple[Callable[[], Json], Callable[[Any], object]], data: st.DataObject
) -> None:
    make, parse = case
    body = make()
    path = data.draw(st.sampled_from(_paths(body)))
    junk = data.draw(JSONISH)
    broken = copy.deepcopy(body)
    _set(path, junk)(broken)
    parse_or_error(parse, broken)


@FAST
@given(st.text(max_size=3000))
def test_metadata_text_only_ever_raises_payload_error(raw: str) -> None:
    body = submission("answer")
    body["view"]["private_metadata"] = raw
    try:
        parsed = parse_submission(body)
    except PayloadError:
        return
    assert parsed.review_id == json.loads(raw)["review_id"]
