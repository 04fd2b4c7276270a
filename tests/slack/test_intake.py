"""What a Slack request is and which key deduplicates it: pure parsing, no network."""

from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest

from bot.slack.intake import Kind, classify, classify_payload, parse_body

FORM = "application/x-www-form-urlencoded"
JSON = "application/json"


def _slash(text: str) -> str:
    return urlencode({"command": "/crew", "text": text, "trigger_id": "T.1", "user_id": "U1"})


@pytest.mark.parametrize(
    "text", ["run writer topic=payloads", 'run writer topic="the payload={}"', "payload"]
)
def test_a_slash_command_stays_one_whatever_its_text(text: str) -> None:
    # Bolt's own parser takes any form body containing "payload" for an interaction.
    request = classify(_slash(text), FORM, "sig:x")
    assert (request.kind, request.key) == (Kind.SLASH_COMMAND, "trigger:T.1")
    assert request.payload()["text"] == text


def test_a_click_is_keyed_by_its_trigger_and_parsed_only_when_handled() -> None:
    # The same click signed again at a later second (another signature) is the same request.
    click = {"type": "block_actions", "trigger_id": "T.2"}
    body = urlencode({"payload": json.dumps(click)})
    request = classify(body, FORM, "sig:v0=abc")
    assert (request.kind, request.key, request.body) == (Kind.INTERACTION, "trigger:T.2", body)
    assert classify(body, FORM, "sig:v0=def").key == request.key
    compact = urlencode({"payload": json.dumps(click, separators=(",", ":"))})  # as Slack's
    assert classify(compact, FORM, "sig:v0=ghi").key == request.key
    assert request.payload()["trigger_id"] == "T.2"
    assert classify_payload(click, "envelope:E1").key == "trigger:T.2"


def test_without_a_trigger_a_request_is_keyed_by_what_the_transport_gives() -> None:
    over_socket = classify_payload({"type": "block_actions"}, "envelope:E1")
    assert (over_socket.kind, over_socket.key) == (Kind.INTERACTION, "envelope:E1")
    body = urlencode({"payload": json.dumps({"type": "block_actions"})})
    assert classify(body, FORM, "sig:v0=abc").key == "sig:v0=abc"
    assert classify(urlencode({"command": "/crew", "text": ""}), FORM, "sig:y").key == "sig:y"


def test_a_trigger_written_in_a_messages_text_or_a_commands_text_is_not_the_key() -> None:
    said = 'see "trigger_id": "T.FAKE" and &trigger_id=T.FAKE'
    click = {"type": "block_actions", "message": {"text": said}, "trigger_id": "T.4"}
    assert classify(urlencode({"payload": json.dumps(click)}), FORM, "sig:x").key == "trigger:T.4"
    command = urlencode({"command": "/crew", "text": said, "trigger_id": "T.5"})
    assert classify(command, FORM, "sig:x").key == "trigger:T.5"


def test_the_twins_of_a_message_share_a_key_and_other_events_use_their_id() -> None:
    def event(event_type: str, event_id: str) -> str:
        inner = {"type": event_type, "channel": "C1", "ts": "1.000100", "text": "lgtm"}
        return json.dumps({"type": "event_callback", "event_id": event_id, "event": inner})

    mention = classify(event("app_mention", "Ev1"), JSON, "sig:a")
    message = classify(event("message", "Ev2"), JSON, "sig:b")
    assert mention.kind is Kind.EVENT and mention.key == message.key == "msg:C1:1.000100"
    other = {"type": "event_callback", "event_id": "Ev3", "event": {"type": "app_home_opened"}}
    assert classify(json.dumps(other), JSON, "sig:c").key == "event:Ev3"
    assert classify_payload(other, "envelope:E2").key == "event:Ev3"


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (json.dumps({"type": "url_verification", "challenge": "c"}), JSON),
        (urlencode({"payload": json.dumps({"type": "view_submission", "view": {}})}), FORM),
        (urlencode({"ssl_check": "1", "token": "t"}), FORM),
    ],
)
def test_requests_answered_in_the_ack_are_not_recorded(body: str, content_type: str) -> None:
    assert classify(body, content_type, "sig:x").kind is Kind.ANSWERED_IN_ACK


def test_a_click_whose_text_mentions_a_modal_submission_is_still_a_click() -> None:
    click = {"type": "block_actions", "message": {"text": "what a view_submission does"}}
    request = classify(urlencode({"payload": json.dumps(click)}), FORM, "sig:x")
    assert request.kind is Kind.INTERACTION


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        ("[1, 2]", JSON),
        ("{not json", JSON),
        (urlencode({"payload": "[]"}), FORM),
        (urlencode({"payload": "{"}), FORM),
    ],
)
def test_a_body_that_is_not_what_it_says_is_refused(body: str, content_type: str) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 (json's and ours alike)
        parse_body(body, content_type)
