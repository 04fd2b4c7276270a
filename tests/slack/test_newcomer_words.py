"""The words a newcomer reads in a run's thread and on the Home tab agree with each other and
with what happened: a reply hint names the button beside it, an edited tool call shows the
arguments that ran and which ones changed (as fields, not JSON), and a run waiting for a tool
call's approval says so on the Home tab as in its own messages. Messages are checked by the
stand-in's Block Kit validator."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bot.slack import block_text, review_blocks
from bot.slack.home_blocks import home_view
from bot.slack.links import Links
from sandbox.blockkit import validate_blocks
from storage import PendingReviews
from storage.status import DecisionKind, ReviewKind, RunStatus
from tests.support.records import EMAIL, decided, email_review, make_review, make_run, texts


@pytest.mark.parametrize("kind", list(ReviewKind))
def test_a_reply_hint_names_the_buttons_beside_it(kind: ReviewKind) -> None:
    review = make_review("A draft", kind, details={"args": {"to": "x"}})
    [message] = review_blocks.review_messages(review, make_run())
    shown = " ".join(texts(message.blocks))
    labels = {
        e["text"]["text"] for b in message.blocks if b["type"] == "actions" for e in b["elements"]
    }
    hint = block_text.REPLY_HINT[kind]
    assert hint in shown
    if "reject" in hint:
        assert "Reject" in labels
    assert "deny" not in hint


def edited_call() -> Any:
    edited = {**EMAIL, "to": "ben@example.com", "subject": "Otters, in short"}
    return decided(email_review(), DecisionKind.EDIT, json.dumps(edited))


def test_an_edited_tool_call_shows_the_arguments_that_ran_and_names_the_changed_ones() -> None:
    message = review_blocks.decided_message(edited_call())
    assert validate_blocks(message.blocks) == []
    shown = "\n".join(texts(message.blocks))
    assert "*Arguments, as the reviewer edited them:*" in shown
    assert "*to:* _(edited)_ ben@example.com" in shown
    assert "*subject:* _(edited)_ Otters, in short" in shown
    assert "ana@example.com" not in shown  # the card shows what ran, not the old values
    assert "Changed: `to`, `subject`." in shown
    assert '{"to"' not in shown and "\\n" not in shown  # no JSON string of every argument


def test_an_approved_call_shows_its_arguments_as_proposed_and_no_change() -> None:
    message = review_blocks.decided_message(decided(email_review(), DecisionKind.APPROVE))
    shown = "\n".join(texts(message.blocks))
    assert "*Arguments:*" in shown and "ana@example.com" in shown and "Changed" not in shown


LINKS = Links("https://sandbox.slack.com/")


def test_the_home_tab_says_what_a_waiting_run_waits_for_as_its_messages_do() -> None:
    run = make_run(status=RunStatus.WAITING)
    waiting = {run.id: [ReviewKind.TOOL_APPROVAL]}
    view = home_view(PendingReviews([], {}, 0), [run], [], {}, LINKS, waiting)
    shown = "\n".join(texts(view["blocks"]))
    assert block_text.WAITING_FOR[ReviewKind.TOOL_APPROVAL] in shown
    assert block_text.run_status(RunStatus.WAITING, [ReviewKind.TOOL_APPROVAL]) in shown
    assert "Waiting for review" not in shown


def test_the_home_tabs_last_decisions_show_the_arguments_that_ran_not_json() -> None:
    review = edited_call()
    run = make_run()
    view = home_view(PendingReviews([], {}, 0), [], [review], {run.id: run}, LINKS)
    shown = "\n".join(texts(view["blocks"]))
    assert "to: ben@example.com · subject: Otters, in short · body: Hi, A few notes." in shown
    assert "ana@example.com" not in shown and '{"' not in shown and "send_email(" not in shown


def test_the_home_tabs_pending_tool_call_shows_its_arguments_on_a_line() -> None:
    review = email_review()
    run = make_run()
    pending = PendingReviews([review], {run.id: run}, 1)
    view = home_view(pending, [], [], {}, LINKS)
    shown = "\n".join(texts(view["blocks"]))
    assert "to: ana@example.com · subject: A note on &lt;otters&gt; &amp; co" in shown
