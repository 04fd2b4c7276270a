"""Every message the bot builds is one Slack accepts (checked by the stand-in's Block Kit
validator), carries no live ping or link from LLM or user text, and keeps ids, never text,
in its buttons. Long drafts are split without losing a character."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.slack import block_text, blocks, modals, review_blocks
from bot.slack.batch_blocks import confirm_view
from bot.slack.batch_payloads import (
    CARRIED_DIGITS,
    MAX_BATCH,
    REASON_LIMIT,
    BatchChoice,
    Picked,
    parse_batch_confirm,
)
from bot.slack.elements import split_text
from bot.slack.message import Message
from bot.slack.mrkdwn import escape, unescape
from bot.slack.payloads import ACTIONS
from bot.slack.review_blocks import FILE_THRESHOLD
from sandbox.blockkit import MAX_BLOCK_TEXT_TOTAL, validate_blocks, validate_view
from storage.records import Approval, Review
from storage.status import DecisionKind, ReviewKind, ReviewStatus, RunStatus
from tests.support.records import (
    HOSTILE,
    NOW,
    assert_safe,
    decided,
    email_review,
    make_review,
    make_run,
    texts,
    typed_review,
)

FAST = settings(deadline=None, max_examples=40)


# --- what every message must satisfy --------------------------------------------------------


def assert_message(message: Message) -> None:
    problems = validate_blocks(message.blocks)
    assert problems == [], [p.slack_line() for p in problems]
    assert message.text.strip()
    assert len(message.text) <= 4000  # chat.update refuses more (msg_too_long)
    assert_safe({"text": message.text, "blocks": message.blocks})
    total = sum(len(t) for t in texts(message.blocks))
    assert total <= 11_000 < MAX_BLOCK_TEXT_TOTAL


def buttons(message: Message) -> list[dict[str, Any]]:
    return [e for b in message.blocks if b["type"] == "actions" for e in b["elements"]]


def draft_text(message: Message) -> str:
    """The draft sections of a review message (the fixture's reviews have no other sections)."""
    return "".join(b["text"]["text"] for b in message.blocks if b["type"] == "section")


# --- reviews --------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(ReviewKind))
def test_a_short_review_is_one_valid_message_with_its_buttons(kind: ReviewKind) -> None:
    review = make_review(HOSTILE, kind, details={"task": "t", "agent": HOSTILE, "tool": "x"})
    [message] = review_blocks.review_messages(review, make_run())
    assert_message(message)
    found = buttons(message)
    decisions = [f"countersign:{a}" for a in review_blocks.BUTTONS[kind]]
    assert [b["action_id"] for b in found] == [
        *decisions,
        "countersign:claim",
        "countersign:reassign",
    ]
    assert all(b["value"] == review.id for b in found)
    assert {b["action_id"].split(":")[1] for b in found} <= {*ACTIONS, "claim", "reassign"}
    assert HOSTILE not in message.text


def test_a_claimed_review_says_who_has_it_under_its_buttons() -> None:
    review = replace(make_review(), claimed_by="U0BEN")
    [message] = review_blocks.review_messages(review, make_run())
    assert_message(message)
    claimed = [b for b in message.blocks if b["type"] == "context" and "Claimed" in str(b)]
    assert [b["elements"][0]["text"] for b in claimed] == ["Claimed by <@U0BEN>"]
    shown = review_blocks.open_review_message(review)
    assert_message(shown)
    assert shown.text == "Claimed by <@U0BEN>" and buttons(shown) == buttons(message)
    done = review_blocks.decided_message(decided(review, DecisionKind.APPROVE))
    assert "Claimed" not in str(done.blocks)
    # where it needs several approvals, the tally and the claim show together
    given = (Approval(review.id, "U0CAL", {}, NOW),)
    tally = review_blocks.partly_approved_message(replace(review, approvals=given), 2, ("U0BEN",))
    assert_message(tally)
    said = str(tally.blocks)
    assert "1 of 2 approvals" in said and "Claimed by <@U0BEN>" in said


def test_reject_is_dangerous_and_asks_first() -> None:
    [message] = review_blocks.review_messages(make_review(), make_run())
    reject = next(b for b in buttons(message) if b["action_id"] == "countersign:reject")
    assert reject["style"] == "danger"
    assert set(reject["confirm"]) == {"title", "text", "confirm", "deny", "style"}
    approve = next(b for b in buttons(message) if b["action_id"] == "countersign:approve")
    assert approve["style"] == "primary"


def test_a_draft_with_channel_ping_renders_escaped() -> None:
    [message] = review_blocks.review_messages(make_review("Hey <!channel>, read this"), make_run())
    assert "Hey &lt;!channel&gt;, read this" in draft_text(message)
    assert all(b["text"].get("verbatim") for b in message.blocks if b["type"] == "section")


def _long_draft(length: int) -> str:
    paragraph = (
        "Durable agents & humans <in the loop> keep state. <!channel> "
        "A paragraph of prose, with *bold* and _italics_ and a 😀.\n"
    )
    draft = ""
    i = 0
    while len(draft) < length:
        draft += f"{i}. " + paragraph * (1 + i % 4) + ("\n" if i % 3 else "")
        i += 1
    return draft[:length]


def test_a_30000_char_draft_is_split_across_valid_messages() -> None:
    draft = _long_draft(30_000)
    review = make_review(draft)
    messages = review_blocks.review_messages(review, make_run())
    assert len(messages) > 1
    for message in messages:
        assert_message(message)
        assert all(len(b["text"]["text"]) <= 3000 for b in message.blocks if "text" in b)
    assert [bool(buttons(m)) for m in messages] == [False] * (len(messages) - 1) + [True]
    assert unescape("".join(draft_text(m) for m in messages)) == draft
    assert "Draft, part 2 of" in json.dumps(messages[1].blocks)


DRAFT_PIECES = st.sampled_from(
    ["word ", "&&&&&&&&", "<<<>>>", "\n\n", "\n", "x" * 700, "😀", "<!channel>", "&lt;"]
)


@FAST
@given(st.lists(DRAFT_PIECES, max_size=120).map("".join))
def test_any_draft_splits_into_valid_messages_that_reassemble(draft: str) -> None:
    review = make_review(draft, details={})
    messages = review_blocks.review_messages(review, make_run())
    for message in messages:
        assert_message(message)
    assert sum(bool(buttons(m)) for m in messages) == 1
    assert buttons(messages[-1])
    if draft.strip():
        assert unescape("".join(draft_text(m) for m in messages)) == draft


@FAST
@given(st.lists(DRAFT_PIECES, max_size=60).map("".join), st.integers(5, 3000))
def test_split_text_keeps_every_character_within_the_limit(raw: str, limit: int) -> None:
    pieces = split_text(raw, limit)
    assert "".join(pieces) == raw
    assert all(0 < len(escape(p)) <= limit for p in pieces)


def test_split_prefers_paragraphs() -> None:
    raw = "a" * 60 + "\n\n" + "b" * 30 + "\n" + "c" * 30
    assert split_text(raw, 100) == ["a" * 60 + "\n\n", "b" * 30 + "\n" + "c" * 30]


def test_a_very_long_draft_gets_a_summary_with_buttons() -> None:
    draft = _long_draft(FILE_THRESHOLD + 5000)
    review = make_review(draft)
    assert review_blocks.needs_file(review)
    assert not review_blocks.needs_file(make_review(_long_draft(FILE_THRESHOLD)))
    message = review_blocks.review_file_summary(review, make_run(), "draft <v2>.md")
    assert_message(message)
    assert len(buttons(message)) == 6  # four decisions, claim and reassign
    shown = json.dumps(message.blocks)
    assert "draft &lt;v2&gt;.md" in shown
    summary = [b["text"]["text"] for b in message.blocks if b["type"] == "section"]
    assert any(s.endswith("…") and len(s) <= 500 for s in summary)


@pytest.mark.parametrize(
    ("kind", "decision", "said", "says"),
    [
        (ReviewKind.TASK_REVIEW, DecisionKind.APPROVE, None, "✅ Approved by <@U0BOB>"),
        (ReviewKind.TASK_REVIEW, DecisionKind.EDIT, "New <!here> text", "✏️ Approved with edits"),
        (ReviewKind.TASK_REVIEW, DecisionKind.CHANGES, HOSTILE, "🔁 Changes requested by"),
        (ReviewKind.TASK_REVIEW, DecisionKind.REJECT, "off topic", "⛔ Rejected by <@U0BOB>"),
        (ReviewKind.TASK_REVIEW, DecisionKind.REJECT, None, "⛔ Rejected by <@U0BOB>"),
        (ReviewKind.TASK_REVIEW, DecisionKind.EXPIRE, None, "⌛ Expired"),
        (ReviewKind.QUESTION, DecisionKind.ANSWER, "x" * 5000, "💬 Answered by <@U0BOB>"),
        (ReviewKind.TOOL_APPROVAL, DecisionKind.APPROVE, None, "✅ Approved by"),
    ],
)
def test_decided_messages_say_who_what_when_without_buttons(
    kind: ReviewKind, decision: DecisionKind, said: str | None, says: str
) -> None:
    review = decided(make_review(HOSTILE, kind), decision, said)
    message = review_blocks.decided_message(review)
    assert_message(message)
    assert buttons(message) == []
    shown = json.dumps(message.blocks, ensure_ascii=False)
    assert says in shown
    assert "<!date^1767323345^{date_short_pretty} {time}|2026-01-02 03:09 UTC>" in shown
    if said:
        assert escape(said[:100]) in shown


def test_decided_replaces_only_the_last_part_of_a_split_review() -> None:
    review = make_review(_long_draft(30_000), details={})
    posted = review_blocks.review_messages(review, make_run())
    message = review_blocks.decided_message(
        decided(review, DecisionKind.CHANGES, "shorter"), as_file=False
    )
    assert_message(message)
    assert draft_text(message).startswith(draft_text(posted[-1]))
    assert buttons(message) == []


@pytest.mark.parametrize("kind", list(ReviewKind))
def test_worst_case_chrome_still_fits(kind: ReviewKind) -> None:
    """Everything at its longest at once: task, agent, arguments, draft, decision."""
    details = {
        "task": "t" * 400,
        "tool": "x" * 400,
        "agent": "<&>" * 500,
        "description": "&" * 5000,
        "args": {"body": "<&>" * 5000},
        "round": 3,
    }
    review = make_review("&\n" * 15_000, kind, details=details)
    for message in review_blocks.review_messages(review, make_run(crew="c" * 80)):
        assert_message(message)
    assert_message(review_blocks.review_file_summary(review, make_run(), "f" * 300))
    for as_file in (True, False):
        for decision in DecisionKind:
            done = decided(review, decision, "&\n" * 5000)
            assert_message(review_blocks.decided_message(done, as_file=as_file))


def test_split_text_refuses_a_limit_too_small_for_an_entity() -> None:
    with pytest.raises(ValueError, match="limit"):
        split_text("&", 4)


def test_decided_file_review_keeps_its_summary() -> None:
    review = decided(make_review(_long_draft(FILE_THRESHOLD + 1)), DecisionKind.APPROVE)
    message = review_blocks.decided_message(review)
    assert_message(message)
    assert "attached in this thread" in json.dumps(message.blocks)


def test_a_cancelled_review_without_decision() -> None:
    message = review_blocks.decided_message(make_review(status=ReviewStatus.SUPERSEDED))
    assert_message(message)
    assert "Superseded" in message.text


# --- runs -----------------------------------------------------------------------------------


@pytest.mark.parametrize("status", list(RunStatus))
def test_run_root_for_every_status(status: RunStatus) -> None:
    run = make_run(status=status, inputs={"topic": HOSTILE, "tone": "dry"})
    message = blocks.run_root(run, "Writes a blog post & <b>reviews</b> it")
    assert_message(message)
    shown = json.dumps(message.blocks, ensure_ascii=False)
    assert "<@U0ALICE>" in shown and "run_0a1b2c3d4e5f" in shown
    assert blocks.run_root(run, "").blocks  # no description is fine


def test_run_root_with_many_long_inputs() -> None:
    inputs = {f"key_{i}": HOSTILE * 20 for i in range(40)}
    assert_message(blocks.run_root(make_run(inputs=inputs), "x" * 5000))


@pytest.mark.parametrize(
    ("status", "output", "error"),
    [
        (RunStatus.SUCCEEDED, "Done: <!channel> & more", None),
        (RunStatus.SUCCEEDED, "", None),
        (RunStatus.FAILED, None, "Traceback <module>\n" * 400),
        (RunStatus.REJECTED, None, "off topic <!here>"),
        (RunStatus.CANCELLED, None, None),
        (RunStatus.RUNNING, None, None),
    ],
)
def test_results(status: RunStatus, output: str | None, error: str | None) -> None:
    for message in blocks.result_messages(make_run(status=status, output=output, error=error)):
        assert_message(message)


def test_a_long_result_is_split_and_a_huge_one_is_cut() -> None:
    output = _long_draft(30_000)
    messages = blocks.result_messages(make_run(status=RunStatus.SUCCEEDED, output=output))
    for message in messages:
        assert_message(message)
    sections = [b["text"]["text"] for m in messages for b in m.blocks if b["type"] == "section"]
    assert unescape("".join(sections[1:])) == output
    huge = blocks.result_messages(make_run(status=RunStatus.SUCCEEDED, output="y " * 100_000))
    assert len(huge) == blocks.MAX_RESULT_MESSAGES
    for message in huge:
        assert_message(message)
    assert "more characters not shown" in json.dumps(huge[-1].blocks)


def test_status_with_many_reviews() -> None:
    reviews = [
        decided(make_review(HOSTILE), DecisionKind.CHANGES, HOSTILE),
        make_review(kind=ReviewKind.QUESTION),
        *[make_review(id=f"rev_{i}") for i in range(300)],
    ]
    run = make_run(error="boom <!channel>", divergence="changed")
    message = blocks.status_message(run, reviews)
    assert_message(message)
    assert re.search(r"and \d+ more", json.dumps(message.blocks))
    assert_message(blocks.status_message(make_run(inputs={}), []))


@pytest.mark.parametrize("count", [0, 1, 60])
def test_pending(count: int) -> None:
    reviews = [
        make_review(HOSTILE * 10, id=f"rev_{i}", created_at=NOW - timedelta(hours=i))
        for i in range(count)
    ]
    runs = {"run_0a1b2c3d4e5f": make_run(crew="blog")}
    message = blocks.pending_message(reviews, runs)
    assert_message(message)
    shown = json.dumps(message.blocks)
    if count == 60:  # oldest first; the newest are left for later
        assert "`rev_59`" in shown and "`rev_0`" not in shown and "and 40 more" in shown


@pytest.mark.parametrize("count", [0, 3, 200])
def test_crews(count: int) -> None:
    crews = [(f"crew-{i}", f"Does <things> & {'stuff ' * i}") for i in range(count)]
    assert_message(blocks.crews_message(crews))


def test_divergence() -> None:
    message = blocks.divergence_message("prompt hash changed at <!channel> " + "z" * 5000)
    assert_message(message)


# --- revising an earlier task ---------------------------------------------------------------


def revise_buttons(message: Message) -> list[dict[str, Any]]:
    return [b for b in buttons(message) if b["action_id"] == "countersign:revise"]


def test_a_later_task_review_offers_to_revise_an_earlier_task() -> None:
    first = make_review(stream="task0:Writer")
    later = make_review(stream="task1:Editor")
    assert revise_buttons(review_blocks.review_messages(first, make_run())[-1]) == []
    [message] = review_blocks.review_messages(later, make_run())
    assert_message(message)
    [button] = revise_buttons(message)
    assert button["value"] == later.run_id
    assert button["text"]["text"] == block_text.REVISE_BUTTON
    assert len(buttons(message)) == 7  # four decisions, revise, claim and reassign
    assert revise_buttons(review_blocks.decided_message(decided(later, DecisionKind.APPROVE))) == []


def test_only_the_last_message_of_a_split_review_offers_it() -> None:
    review = make_review("word " * 3000, stream="task2:Editor")
    messages = review_blocks.review_messages(review, make_run())
    assert len(messages) > 1
    assert [len(revise_buttons(m)) for m in messages] == [0] * (len(messages) - 1) + [1]


def test_status_offers_to_revise_only_when_asked() -> None:
    run = make_run()
    assert revise_buttons(blocks.status_message(run, [])) == []
    message = blocks.status_message(run, [make_review()], revisable=True)
    assert_message(message)
    [button] = revise_buttons(message)
    assert button["value"] == run.id


# --- reminders, escalations, a reopened task -----------------------------------------------


def test_reminder_and_escalation_mention_people() -> None:
    review = make_review()
    reminder = blocks.reminder_message(review, ("U0ALICE", "S0TEAM"))
    assert "<@U0ALICE>" in reminder.text and "<!subteam^S0TEAM>" in reminder.text
    assert validate_blocks(reminder.blocks) == []
    escalation = blocks.escalation_message(review, ("U0BOSS",))
    assert "<@U0BOSS>" in escalation.text
    assert validate_blocks(escalation.blocks) == []


def test_a_reopened_task_is_named_and_its_feedback_quoted_once_escaped() -> None:
    review = decided(make_review(details={"task": "write <post>"}), DecisionKind.CHANGES, "A & B")
    said = blocks.reopened_message(replace(review, stream="task1:Writer")).text
    assert said == (
        "↩️ <@U0BOB> reopened task 2 (*write &lt;post&gt;*). It is being revised, then every "
        "later task runs again.\n>A &amp; B"
    )


# --- typed task outputs -------------------------------------------------------------------


def test_a_typed_draft_is_shown_as_json_in_a_code_block_escaped() -> None:
    draft = json.dumps({"headline": f"Otters {HOSTILE}", "sections": 3}, indent=2)
    [message] = review_blocks.review_messages(typed_review(draft), make_run())
    assert_message(message)
    (code,) = [s for s in draft_text(message).split("\n\n") if s.startswith("```")]
    assert code == f"```{escape(draft)}```"


def test_a_long_typed_draft_keeps_each_code_block_within_a_section() -> None:
    draft = json.dumps({"headline": "o" * 9000, "sections": 3}, indent=2)
    messages = review_blocks.review_messages(typed_review(draft), make_run())
    for message in messages:
        assert_message(message)
    shown = [
        b["text"]["text"]
        for m in messages
        for b in m.blocks
        if b["type"] == "section" and b["text"]["text"].startswith("```")
    ]
    assert "".join(s.removeprefix("```").removesuffix("```") for s in shown) == draft


def test_a_typed_draft_that_is_not_json_says_so_and_is_shown_as_text() -> None:
    review = typed_review(f"Otters {HOSTILE}", output_problem=f"Invalid JSON {HOSTILE}")
    [message] = review_blocks.review_messages(review, make_run())
    assert_message(message)
    shown = draft_text(message)
    assert "```" not in shown
    assert "not JSON of Outline" in json.dumps(message.blocks)


def test_a_draft_reviewed_again_says_why_the_edit_was_not_used() -> None:
    review = typed_review("{}", refused_edit=f"the task's guardrail refused it: {HOSTILE}")
    [message] = review_blocks.review_messages(review, make_run())
    assert_message(message)
    assert "The last edit was not used" in json.dumps(message.blocks)


# --- a tool call's card, as a newcomer reads it ----------------------------------------------


def test_a_tool_call_shows_its_arguments_once_with_their_line_breaks() -> None:
    review = email_review()
    [message] = review_blocks.review_messages(review, make_run())
    assert_message(message)
    shown = "\n".join(texts(message.blocks))
    assert shown.count("ana@example.com") == 1
    assert "\\n" not in shown  # no JSON escapes: the body's lines are lines
    assert "*body:*\n```Hi,\n\nA few notes.\n\nBest regards```" in shown
    assert "*subject:* A note on &lt;otters&gt; &amp; co" in shown
    assert "*Tool:* Send an e-mail." in shown and "*Task:*" not in shown
    done = review_blocks.decided_message(decided(review, DecisionKind.APPROVE))
    assert_message(done)
    assert "\n".join(texts(done.blocks)).count("ana@example.com") == 1


def test_a_tool_calls_long_arguments_stay_within_a_message() -> None:
    args = {f"a{i}": "word " * 400 + "\nend" for i in range(80)}
    review = make_review("t", ReviewKind.TOOL_APPROVAL, details={"tool": "t", "args": args})
    [message] = review_blocks.review_messages(review, make_run())
    assert_message(message)
    assert "more." in "\n".join(texts(message.blocks))  # "…and N more.": the rest is in Edit


def test_rejecting_says_what_it_does_for_each_kind_of_review() -> None:
    def confirm(review: Review) -> str:
        [message] = review_blocks.review_messages(review, make_run())
        reject = next(b for b in buttons(message) if b["action_id"] == "countersign:reject")
        words: str = reject["confirm"]["text"]["text"]
        return words

    assert confirm(make_review()) == "Rejecting stops this run."
    denial = confirm(email_review())
    assert "stops" not in denial and "carries on" in denial
    view = modals.modal(DecisionKind.REJECT, email_review(), None, None)
    placeholder = view["blocks"][-1]["element"]
    assert "carries on" in placeholder["placeholder"]["text"]


def test_a_confirmation_of_a_hundred_reviews_fits_slacks_limits_and_reads_back() -> None:
    """The most a batch takes, each review with a whole digest, and the longest reason of
    characters JSON escapes: the confirmation passes Slack's checks (its metadata's 3,000
    characters), and its button's click reads back every review and the reason."""
    reason = ('"\\\n' * REASON_LIMIT)[:REASON_LIMIT]
    picked = tuple(
        Picked(f"rev_{n:012x}", f"{n:064x}", "writer · a task review", "x" * 75)
        for n in range(MAX_BATCH)
    )
    choice = BatchChoice("UALICE", "V1", DecisionKind.REJECT, reason, picked, "C0123456789")
    view = confirm_view(choice)
    assert validate_view(view) == []
    (button,) = view["blocks"][-1]["elements"]
    click = {
        "type": "block_actions",
        "user": {"id": "UALICE"},
        "view": {**view, "id": "V1"},
        "actions": [{"action_id": button["action_id"], "value": button["value"]}],
    }
    back = parse_batch_confirm(click)
    assert (back.kind, back.text, back.channel_id) == (DecisionKind.REJECT, reason, "C0123456789")
    assert [(p.review_id, p.digest) for p in back.picked] == [
        (p.review_id, p.digest[:CARRIED_DIGITS]) for p in picked if p.digest
    ]
