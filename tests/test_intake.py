"""What a Slack request is and which key deduplicates it: pure parsing, no network."""

from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest

from bot.intake import Kind, classify, parse_body

FORM = "application/x-www-form-urlencoded"


def _slash(text: str) -> str:
    return urlencode({"command": "/crew", "text": text, "trigger_id": "T.1", "user_id": "U1"})


@pytest.mark.parametrize(
    "text", ["run writer topic=payloads", 'run writer topic="the payload={}"', "payload"]
)
def test_a_slash_command_stays_one_whatever_its_text(text: str) -> None:
    # Bolt's own parser takes any form body containing "payload" for an interaction.
    parsed = parse_body(_slash(text), FORM)
    assert parsed["text"] == text
    request = classify(parsed, "sig:x")
    assert (request.kind, request.key) == (Kind.SLASH_COMMAND, "trigger:T.1")


def test_an_interaction_is_keyed_by_its_trigger() -> None:
    body = urlencode({"payload": json.dumps({"type": "block_actions", "trigger_id": "T.2"})})
    request = classify(parse_body(body, FORM), "sig:x")
    assert (request.kind, request.key) == (Kind.INTERACTION, "trigger:T.2")


def test_the_twins_of_a_message_share_a_key_and_other_events_use_their_id() -> None:
    def event(event_type: str, event_id: str) -> str:
        inner = {"type": event_type, "channel": "C1", "ts": "1.000100", "text": "lgtm"}
        return json.dumps({"type": "event_callback", "event_id": event_id, "event": inner})

    mention = classify(parse_body(event("app_mention", "Ev1"), "application/json"), "sig:a")
    message = classify(parse_body(event("message", "Ev2"), "application/json"), "sig:b")
    assert mention.kind is Kind.EVENT and mention.key == message.key == "msg:C1:1.000100"
    other = {"type": "event_callback", "event_id": "Ev3", "event": {"type": "app_home_opened"}}
    assert classify(other, "sig:c").key == "event:Ev3"


@pytest.mark.parametrize(
    "payload",
    [
        {"type": "url_verification", "challenge": "c"},
        {"type": "view_submission", "trigger_id": "T.3", "view": {}},
        {"ssl_check": "1", "token": "t"},
    ],
)
def test_requests_answered_in_the_ack_are_not_recorded(payload: dict[str, str]) -> None:
    assert classify(payload, "sig:x").kind is Kind.ANSWERED_IN_ACK


def test_a_request_without_an_id_of_its_own_is_keyed_by_what_the_transport_gives() -> None:
    assert classify({"type": "view_closed"}, "sig:v0=abc").key == "sig:v0=abc"


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        ("[1, 2]", "application/json"),
        ("{not json", "application/json"),
        (urlencode({"payload": "[]"}), FORM),
        (urlencode({"payload": "{"}), FORM),
    ],
)
def test_a_body_that_is_not_what_it_says_is_refused(body: str, content_type: str) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 (json's and ours alike)
        parse_body(body, content_type)
