"""Every modal the bot opens is one Slack accepts (checked by the stand-in's Block Kit
validator) and carries no live ping or link: a review's forms prefilled with what can be
edited (a long text in parts: tests/slack/test_long_edits.py), a tool call's arguments one typed
input each, the "Revise an earlier task" form, and a notice in place of a form."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bot.slack import modals, text
from bot.slack.payloads import MODAL_ACTIONS
from sandbox.blockkit import validate_view
from storage.status import DecisionKind, ReviewKind
from tests.support.records import (
    HOSTILE,
    assert_safe,
    decided,
    email_review,
    make_review,
    tool_review,
    typed_review,
)


def assert_view(view: dict[str, Any]) -> None:
    problems = validate_view(view)
    assert problems == [], [p.slack_line() for p in problems]
    assert_safe(view)


@pytest.mark.parametrize("kind", list(ReviewKind))
@pytest.mark.parametrize("action", MODAL_ACTIONS)
def test_every_modal_is_valid(action: DecisionKind, kind: ReviewKind) -> None:
    review = make_review(HOSTILE, kind, details={"args": {"to": HOSTILE}})
    view = modals.modal(action, review, "C0DRAFTS", "1700000250.000400")
    assert_view(view)
    assert view["callback_id"] == f"countersign:modal:{action}"
    assert json.loads(view["private_metadata"]) == {
        "review_id": review.id,
        "channel_id": "C0DRAFTS",
        "message_ts": "1700000250.000400",
    }
    if action == "edit" and kind is ReviewKind.TOOL_APPROVAL:
        return  # one input per argument: see the tests of the tool call's edit modal below
    [field] = [b for b in view["blocks"] if b["type"] == "input"]
    assert (field["block_id"], field["element"]["action_id"]) == ("text", "value")
    assert field["element"]["multiline"] is True
    assert field["optional"] is (action == "reject")


def test_edit_prefills_the_draft() -> None:
    view = modals.modal(DecisionKind.EDIT, make_review("Draft <b>"), None, None)
    assert_view(view)
    [field] = [b for b in view["blocks"] if b["type"] == "input"]
    assert field["element"]["initial_value"] == "Draft <b>"  # plain text: not escaped
    assert json.loads(view["private_metadata"])["channel_id"] is None


def test_edit_of_a_tool_call_prefills_its_arguments() -> None:
    review = make_review("send mail", ReviewKind.TOOL_APPROVAL, details={"args": {"to": "a@b"}})
    view = modals.modal(DecisionKind.EDIT, review, None, None)
    [field] = [b for b in view["blocks"] if b["type"] == "input"]
    assert field["block_id"] == "arg:to"
    assert field["element"]["initial_value"] == "a@b"


def arg_inputs(view: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {b["block_id"]: b for b in view["blocks"] if b["type"] == "input"}


def test_a_tool_call_edit_has_one_typed_prefilled_input_per_argument() -> None:
    review = tool_review({"amount": 1500, "to": "ACME <x>", "urgent": True, "tags": ["a"]})
    view = modals.modal(DecisionKind.EDIT, review, "C0DRAFTS", "1700000250.000400")
    assert_view(view)
    assert view["callback_id"] == "countersign:modal:edit"
    assert json.loads(view["private_metadata"])["review_id"] == review.id
    fields = arg_inputs(view)
    assert list(fields) == ["arg:amount", "arg:to", "arg:urgent", "arg:tags", "arg:memo"]
    assert all(f["element"]["action_id"] == f["block_id"] for f in fields.values())
    amount, to = fields["arg:amount"], fields["arg:to"]
    assert amount["label"]["text"] == "Amount" and fields["arg:memo"]["label"]["text"] == "memo"
    assert amount["element"]["initial_value"] == "1500"
    assert amount["element"]["multiline"] is False
    assert "integer" in amount["hint"]["text"] and "cents" in amount["hint"]["text"]
    assert to["element"]["initial_value"] == "ACME <x>"  # plain text: not escaped
    assert "text" in to["hint"]["text"]
    assert fields["arg:urgent"]["element"]["type"] == "static_select"
    assert fields["arg:urgent"]["element"]["initial_option"]["value"] == "true"
    assert json.loads(fields["arg:tags"]["element"]["initial_value"]) == ["a"]
    assert "initial_value" not in fields["arg:memo"]["element"]
    assert [f["optional"] for f in fields.values()] == [False, False, True, True, True]
    shown = json.dumps(view["blocks"])
    assert "&lt;!channel&gt;" in shown and "<!channel>" not in shown


@pytest.mark.parametrize(
    "schema", [{}, {"properties": {f"a{i}": {"type": "string"} for i in range(95)}}]
)
def test_a_tool_call_whose_arguments_do_not_fit_inputs_gets_one_json_box(
    schema: dict[str, Any],
) -> None:
    view = modals.modal(DecisionKind.EDIT, tool_review({}, schema), None, None)
    assert_view(view)
    [field] = arg_inputs(view).values()
    assert field["block_id"] == "text"
    assert json.loads(field["element"]["initial_value"]) == {}


def test_the_revise_modal_lists_the_tasks_and_asks_for_feedback() -> None:
    tasks = [(0, "Task 1: Outline <!channel>"), (2, "Task 3: " + "long " * 40)]
    view = modals.revise_modal("run_0a1b2c3d4e5f", tasks, "C0DRAFTS", "1700000250.000400")
    problems = validate_view(view)
    assert problems == [], [p.slack_line() for p in problems]
    assert view["callback_id"] == "countersign:modal:revise"
    assert json.loads(view["private_metadata"]) == {
        "run_id": "run_0a1b2c3d4e5f",
        "channel_id": "C0DRAFTS",
        "message_ts": "1700000250.000400",
    }
    fields = arg_inputs(view)
    assert list(fields) == ["task", "text"]
    select = fields["task"]["element"]
    assert (select["type"], select["action_id"]) == ("static_select", "task")
    assert [o["value"] for o in select["options"]] == ["0", "2"]
    assert select["options"][0]["text"]["text"] == "Task 1: Outline <!channel>"
    assert len(select["options"][1]["text"]["text"]) <= 75
    feedback = fields["text"]["element"]
    assert (feedback["type"], feedback["action_id"]) == ("plain_text_input", "value")


def test_approve_has_no_modal() -> None:
    with pytest.raises(ValueError, match="approve"):
        modals.modal(DecisionKind.APPROVE, make_review(), None, None)


@pytest.mark.parametrize(
    "words",
    [text.LOADING, text.NOT_A_REVIEWER, text.unknown_crew("<!channel> & co", ["a&b"])],
)
def test_notice_view_is_a_valid_modal_and_shows_the_text_modules_words_as_they_are(
    words: str,
) -> None:
    view = modals.notice_view(words)
    assert validate_view(view) == []
    shown = json.dumps(view)
    assert "<!channel>" not in shown and "&amp;amp;" not in shown
    assert view["blocks"][0]["text"]["text"] == words


def test_a_notice_that_the_review_was_decided_mentions_who_decided() -> None:
    view = modals.notice_view(text.already_decided(decided(make_review(), DecisionKind.APPROVE)))
    assert "<@U0BOB>" in view["blocks"][0]["text"]["text"]


def test_the_edit_modal_of_a_typed_draft_is_prefilled_with_its_json_and_names_the_fields() -> None:
    draft = json.dumps({"headline": "Otters <b>", "sections": 3}, indent=2)
    view = modals.modal(DecisionKind.EDIT, typed_review(draft), None, None)
    assert_view(view)
    [field] = [b for b in view["blocks"] if b["type"] == "input"]
    assert field["element"]["initial_value"] == draft
    assert field["label"]["text"] == "The output to approve, as JSON of Outline"
    assert field["hint"]["text"] == "Fields: headline, sections."


def test_one_line_arguments_get_one_line_inputs_and_text_with_lines_a_box() -> None:
    view = modals.modal(DecisionKind.EDIT, email_review(), None, None)
    assert_view(view)
    fields = arg_inputs(view)
    assert fields["arg:to"]["element"]["multiline"] is False
    assert fields["arg:subject"]["element"]["multiline"] is False
    assert fields["arg:body"]["element"]["multiline"] is True
