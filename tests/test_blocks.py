"""Every message and modal the bot builds is one Slack accepts (checked by the stand-in's
Block Kit validator), carries no live ping or link from LLM or user text, and keeps ids,
never text, in its buttons. Long drafts are split without losing a character."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.sandbox.blockkit import MAX_BLOCK_TEXT_TOTAL, validate_blocks, validate_view
from bot.slack import blocks, text
from bot.slack.blocks import FILE_THRESHOLD, Message, escape
from bot.slack.payloads import ACTIONS, MODAL_ACTIONS
from bot.slack.text import unescape
from crew_runtime.errors import InputsRefused, NothingToReopen, TextRefused, UsageError
from storage.details import TaskReviewDetails, details_from_json
from storage.errors import AlreadyDecided, CountersignError
from storage.records import Decision, Review, Run
from storage.status import DecisionKind, ReviewKind, ReviewStatus, RunStatus

FAST = settings(deadline=None, max_examples=40)
NOW = datetime(2026, 1, 2, 3, 4, 5)
HOSTILE = "<!channel> hi <@U123> <https://evil.example|click to approve> a&b <!here>"


def make_run(**fields: Any) -> Run:
    values: dict[str, Any] = {
        "id": "run_0a1b2c3d4e5f",
        "crew": "blog",
        "inputs": {"topic": "durable agents"},
        "status": RunStatus.WAITING,
        "output": None,
        "error": None,
        "divergence": None,
        "started_by": "U0ALICE",
        "channel": "C0DRAFTS",
        "thread_ts": "1700000000.000100",
        "attempts": 1,
        "lease_owner": None,
        "lease_token": None,
        "lease_expires": None,
        "created_at": NOW,
        "updated_at": NOW,
    }
    return Run(**(values | fields))


def make_review(
    prompt: str = "A short draft.", kind: ReviewKind = ReviewKind.TASK_REVIEW, **fields: Any
) -> Review:
    values: dict[str, Any] = {
        "id": "rev_0a1b2c3d4e5f",
        "run_id": "run_0a1b2c3d4e5f",
        "kind": kind,
        "status": ReviewStatus.PENDING,
        "stream": "0:writer",
        "seq": 0,
        "prompt": prompt,
        "details": TaskReviewDetails(task="write_post", agent="Writer"),
        "journal_pos": 3,
        "channel": "C0DRAFTS",
        "message_ts": "1700000250.000400",
        "created_at": NOW,
        "decided_at": None,
        "remind_at": None,
        "escalate_at": None,
        "expires_at": None,
    }
    values |= fields
    if isinstance(values["details"], dict):  # as stored: read as a row of the kind is
        values["details"] = details_from_json(kind, values["details"])
    return Review(**values)


def decided(review: Review, kind: DecisionKind, text: str | None = None) -> Review:
    decision = Decision(
        review_id=review.id,
        run_id=review.run_id,
        kind=kind,
        text=text,
        original=None,
        details={},
        decided_by="U0BOB",
        created_at=NOW + timedelta(minutes=5),
    )
    return make_review(
        review.prompt,
        review.kind,
        details=review.details,
        status=ReviewStatus.DECIDED,
        decision=decision,
    )


# --- what every message must satisfy --------------------------------------------------------

# What our own code may put in mrkdwn: mentions, channel links, dates.
OURS = re.compile(r"<@U0[A-Z]+>|<#C[A-Z0-9]+>|<!date\^\d+\^\{date_short_pretty\} \{time\}\|[^<>]*>")
LIVE = re.compile(r"<!(channel|here|everyone|subteam)|<@U123|<https?:")


def texts(value: Any) -> list[str]:
    """Every ``text`` string in a payload (text objects, markdown blocks, fallbacks)."""
    found: list[str] = []
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "text" and isinstance(inner, str):
                found.append(inner)
            else:
                found += texts(inner)
    elif isinstance(value, list):
        for inner in value:
            found += texts(inner)
    return found


def assert_safe(payload: Any) -> None:
    for shown in texts(payload):
        assert not LIVE.search(shown), shown
        leftover = OURS.sub("", shown)
        assert "<" not in leftover and ">" not in leftover.replace("\n>", "\n"), shown


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


# --- escaping -------------------------------------------------------------------------------


def test_escape_is_exactly_slacks_three_entities() -> None:
    assert escape(HOSTILE) == (
        "&lt;!channel&gt; hi &lt;@U123&gt; &lt;https://evil.example|click to approve&gt; "
        "a&amp;b &lt;!here&gt;"
    )
    assert escape("&amp;") == "&amp;amp;"
    assert escape("\"quotes' *bold* _it_") == "\"quotes' *bold* _it_"


@settings(deadline=None, max_examples=200)
@given(st.text(alphabet="<>&!@#|:/ abcU123;", max_size=80) | st.text(max_size=80))
def test_escape_never_leaves_markup(raw: str) -> None:
    out = escape(raw)
    assert "<" not in out and ">" not in out
    assert unescape(out) == raw
    assert not re.search(r"&(?!amp;|lt;|gt;)", out)


# --- reviews --------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(ReviewKind))
def test_a_short_review_is_one_valid_message_with_its_buttons(kind: ReviewKind) -> None:
    review = make_review(HOSTILE, kind, details={"task": "t", "agent": HOSTILE, "tool": "x"})
    [message] = blocks.review_messages(review, make_run())
    assert_message(message)
    found = buttons(message)
    assert [b["action_id"] for b in found] == [f"countersign:{a}" for a in blocks.BUTTONS[kind]]
    assert all(b["value"] == review.id for b in found)
    assert {b["action_id"].split(":")[1] for b in found} <= set(ACTIONS)
    assert HOSTILE not in message.text


def test_reject_is_dangerous_and_asks_first() -> None:
    [message] = blocks.review_messages(make_review(), make_run())
    reject = next(b for b in buttons(message) if b["action_id"] == "countersign:reject")
    assert reject["style"] == "danger"
    assert set(reject["confirm"]) == {"title", "text", "confirm", "deny", "style"}
    approve = next(b for b in buttons(message) if b["action_id"] == "countersign:approve")
    assert approve["style"] == "primary"


def test_a_draft_with_channel_ping_renders_escaped() -> None:
    [message] = blocks.review_messages(make_review("Hey <!channel>, read this"), make_run())
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
    messages = blocks.review_messages(review, make_run())
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
    messages = blocks.review_messages(review, make_run())
    for message in messages:
        assert_message(message)
    assert sum(bool(buttons(m)) for m in messages) == 1
    assert buttons(messages[-1])
    if draft.strip():
        assert unescape("".join(draft_text(m) for m in messages)) == draft


@FAST
@given(st.lists(DRAFT_PIECES, max_size=60).map("".join), st.integers(5, 3000))
def test_split_text_keeps_every_character_within_the_limit(raw: str, limit: int) -> None:
    pieces = blocks.split_text(raw, limit)
    assert "".join(pieces) == raw
    assert all(0 < len(escape(p)) <= limit for p in pieces)


def test_split_prefers_paragraphs() -> None:
    raw = "a" * 60 + "\n\n" + "b" * 30 + "\n" + "c" * 30
    assert blocks.split_text(raw, 100) == ["a" * 60 + "\n\n", "b" * 30 + "\n" + "c" * 30]


def test_a_very_long_draft_gets_a_summary_with_buttons() -> None:
    draft = _long_draft(FILE_THRESHOLD + 5000)
    review = make_review(draft)
    assert blocks.needs_file(review)
    assert not blocks.needs_file(make_review(_long_draft(FILE_THRESHOLD)))
    message = blocks.review_file_summary(review, make_run(), "draft <v2>.md")
    assert_message(message)
    assert len(buttons(message)) == 4
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
    message = blocks.decided_message(review)
    assert_message(message)
    assert buttons(message) == []
    shown = json.dumps(message.blocks, ensure_ascii=False)
    assert says in shown
    assert "<!date^1767323345^{date_short_pretty} {time}|2026-01-02 03:09 UTC>" in shown
    if said:
        assert escape(said[:100]) in shown


def test_decided_replaces_only_the_last_part_of_a_split_review() -> None:
    review = make_review(_long_draft(30_000), details={})
    posted = blocks.review_messages(review, make_run())
    message = blocks.decided_message(
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
    for message in blocks.review_messages(review, make_run(crew="c" * 80)):
        assert_message(message)
    assert_message(blocks.review_file_summary(review, make_run(), "f" * 300))
    for as_file in (True, False):
        for decision in DecisionKind:
            done = decided(review, decision, "&\n" * 5000)
            assert_message(blocks.decided_message(done, as_file=as_file))


def test_split_text_refuses_a_limit_too_small_for_an_entity() -> None:
    with pytest.raises(ValueError, match="limit"):
        blocks.split_text("&", 4)


def test_decided_file_review_keeps_its_summary() -> None:
    review = decided(make_review(_long_draft(FILE_THRESHOLD + 1)), DecisionKind.APPROVE)
    message = blocks.decided_message(review)
    assert_message(message)
    assert "attached in this thread" in json.dumps(message.blocks)


def test_a_cancelled_review_without_decision() -> None:
    message = blocks.decided_message(make_review(status=ReviewStatus.SUPERSEDED))
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


# --- modals ---------------------------------------------------------------------------------


def assert_view(view: dict[str, Any]) -> None:
    problems = validate_view(view)
    assert problems == [], [p.slack_line() for p in problems]
    assert_safe(view)


@pytest.mark.parametrize("kind", list(ReviewKind))
@pytest.mark.parametrize("action", MODAL_ACTIONS)
def test_every_modal_is_valid(action: DecisionKind, kind: ReviewKind) -> None:
    review = make_review(HOSTILE, kind, details={"args": {"to": HOSTILE}})
    view = blocks.modal(action, review, "C0DRAFTS", "1700000250.000400")
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
    view = blocks.modal(DecisionKind.EDIT, make_review("Draft <b>"), None, None)
    assert_view(view)
    [field] = [b for b in view["blocks"] if b["type"] == "input"]
    assert field["element"]["initial_value"] == "Draft <b>"  # plain text: not escaped
    assert json.loads(view["private_metadata"])["channel_id"] is None


@pytest.mark.parametrize("unit", ["a", "😀", "&"])
def test_edit_of_a_long_draft_is_cut_to_what_the_box_holds_and_says_so(unit: str) -> None:
    view = blocks.modal(DecisionKind.EDIT, make_review(unit * 5000), None, None)
    assert_view(view)
    [field] = [b for b in view["blocks"] if b["type"] == "input"]
    initial = field["element"]["initial_value"]
    assert len(initial.encode("utf-16-le")) // 2 <= 3000 == field["element"]["max_length"]
    assert "5,000 characters" in json.dumps(view["blocks"], ensure_ascii=False)


def test_edit_of_a_tool_call_prefills_its_arguments() -> None:
    review = make_review("send mail", ReviewKind.TOOL_APPROVAL, details={"args": {"to": "a@b"}})
    view = blocks.modal(DecisionKind.EDIT, review, None, None)
    [field] = [b for b in view["blocks"] if b["type"] == "input"]
    assert field["block_id"] == "arg:to"
    assert field["element"]["initial_value"] == "a@b"


PAY_SCHEMA = {
    "properties": {
        "amount": {"title": "Amount", "type": "integer", "description": "In cents"},
        "to": {"title": "To", "type": "string"},
        "urgent": {"title": "Urgent", "type": "boolean", "default": False},
        "tags": {"title": "Tags", "type": "array", "items": {"type": "string"}},
        "memo": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
    },
    "required": ["amount", "to"],
    "title": "PayInput",
    "type": "object",
}


def tool_review(args: dict[str, Any], schema: dict[str, Any] | None = None) -> Review:
    details = {"tool": "pay", "description": "Pays <!channel>", "args": args}
    details["schema"] = PAY_SCHEMA if schema is None else schema
    return make_review("pay", ReviewKind.TOOL_APPROVAL, details=details)


def arg_inputs(view: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {b["block_id"]: b for b in view["blocks"] if b["type"] == "input"}


def test_a_tool_call_edit_has_one_typed_prefilled_input_per_argument() -> None:
    review = tool_review({"amount": 1500, "to": "ACME <x>", "urgent": True, "tags": ["a"]})
    view = blocks.modal(DecisionKind.EDIT, review, "C0DRAFTS", "1700000250.000400")
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


def test_a_long_argument_is_cut_to_the_box_and_says_so() -> None:
    view = blocks.modal(DecisionKind.EDIT, tool_review({"amount": 1, "to": "x" * 5000}), None, None)
    assert_view(view)
    to = arg_inputs(view)["arg:to"]
    assert len(to["element"]["initial_value"]) == 3000
    assert "5,000 characters" in to["hint"]["text"]


@pytest.mark.parametrize(
    "schema", [{}, {"properties": {f"a{i}": {"type": "string"} for i in range(95)}}]
)
def test_a_tool_call_whose_arguments_do_not_fit_inputs_gets_one_json_box(
    schema: dict[str, Any],
) -> None:
    view = blocks.modal(DecisionKind.EDIT, tool_review({}, schema), None, None)
    assert_view(view)
    [field] = arg_inputs(view).values()
    assert field["block_id"] == "text"
    assert json.loads(field["element"]["initial_value"]) == {}


# --- revising an earlier task ---------------------------------------------------------------


def revise_buttons(message: Message) -> list[dict[str, Any]]:
    return [b for b in buttons(message) if b["action_id"] == "countersign:revise"]


def test_a_later_task_review_offers_to_revise_an_earlier_task() -> None:
    first = make_review(stream="task0:Writer")
    later = make_review(stream="task1:Editor")
    assert revise_buttons(blocks.review_messages(first, make_run())[-1]) == []
    [message] = blocks.review_messages(later, make_run())
    assert_message(message)
    [button] = revise_buttons(message)
    assert button["value"] == later.run_id
    assert button["text"]["text"] == text.REVISE_BUTTON
    assert len(buttons(message)) == 5
    assert revise_buttons(blocks.decided_message(decided(later, DecisionKind.APPROVE))) == []


def test_only_the_last_message_of_a_split_review_offers_it() -> None:
    review = make_review("word " * 3000, stream="task2:Editor")
    messages = blocks.review_messages(review, make_run())
    assert len(messages) > 1
    assert [len(revise_buttons(m)) for m in messages] == [0] * (len(messages) - 1) + [1]


def test_status_offers_to_revise_only_when_asked() -> None:
    run = make_run()
    assert revise_buttons(blocks.status_message(run, [])) == []
    message = blocks.status_message(run, [make_review()], revisable=True)
    assert_message(message)
    [button] = revise_buttons(message)
    assert button["value"] == run.id


def test_the_revise_modal_lists_the_tasks_and_asks_for_feedback() -> None:
    tasks = [(0, "Task 1: Outline <!channel>"), (2, "Task 3: " + "long " * 40)]
    view = blocks.revise_modal("run_0a1b2c3d4e5f", tasks, "C0DRAFTS", "1700000250.000400")
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


def test_the_words_of_typed_arguments() -> None:
    assert text.arg_problem(("integer",)) == "Expected an integer."
    assert text.arg_problem(("integer", "null")) == "Expected an integer or null."
    assert text.arg_problem(()) == "Required."
    assert text.arg_hint((), "") == "Expected: JSON, or text."


def test_approve_has_no_modal() -> None:
    with pytest.raises(ValueError, match="approve"):
        blocks.modal(DecisionKind.APPROVE, make_review(), None, None)


# --- the words ------------------------------------------------------------------------------


def test_ephemeral_answers() -> None:
    review = decided(make_review(), DecisionKind.APPROVE)
    assert review.decision is not None
    assert text.already_decided(review.decision) == (
        "This review was already decided by <@U0BOB> (approve) at "
        "<!date^1767323345^{date_short_pretty} {time}|2026-01-02 03:09 UTC>."
    )
    assert text.wrong_channel("writer", "C0WRITERS") == (
        "`writer` runs can only be started in <#C0WRITERS>."
    )
    assert text.unknown_crew("<!here>", ["blog", "alpha"]) == (
        "There is no crew named `&lt;!here&gt;`. Crews: `alpha`, `blog`."
    )
    assert text.NOT_A_REVIEWER == "You are not a reviewer of this run."


def test_answers_the_listeners_give() -> None:
    closed = make_review(status=ReviewStatus.CANCELLED)
    assert text.already_decided(closed) == "This review is no longer open (cancelled)."
    won = decided(make_review(), DecisionKind.REJECT)
    assert text.already_decided(won).startswith("This review was already decided by <@U0BOB>")
    late = AlreadyDecided("rev_1", "decided", by="U0BOB", kind="approve", at=NOW)
    assert text.too_late(late) == (
        "This review was already decided by <@U0BOB> (approve) at "
        "<!date^1767323045^{date_short_pretty} {time}|2026-01-02 03:04 UTC>."
    )
    assert text.too_late(AlreadyDecided("rev_1", "superseded")) == (
        "This review is no longer open (superseded)."
    )
    assert text.not_found("no run with id '<x>'") == "No run with id '&lt;x&gt;'."
    assert text.already_final("run_1", "succeeded") == "Run `run_1` is already over (✅ Succeeded)."
    assert text.cancelled("run_1", "U0ALICE") == "Run `run_1` was cancelled by <@U0ALICE>."
    assert "`blog`" in text.starting("blog")
    assert "deny" in text.reply_hint(ReviewKind.TOOL_APPROVAL)
    assert "approve" in text.reply_hint(ReviewKind.TASK_REVIEW)


def test_people_and_channels_that_are_not_slack_ids_stay_text() -> None:
    assert text.user_ref("U0ALICE") == "<@U0ALICE>"
    assert text.user_ref("cli:<!channel>") == "cli:&lt;!channel&gt;"
    assert text.channel_ref("C0DRAFTS") == "<#C0DRAFTS>"
    assert text.channel_ref("drafts") == "#drafts"
    assert text.code("a`b<") == "`a'b&lt;`"


@pytest.mark.parametrize("status", list(RunStatus))
def test_every_run_status_has_a_word_with_emoji(status: RunStatus) -> None:
    word = text.run_status(status)
    assert not word[0].isascii() and word.split()[-1].isalpha()


def test_truncate_never_cuts_an_entity() -> None:
    assert text.truncate("&&&&", 12) == "&amp;&amp;…"
    assert text.truncate("ok", 2) == "ok"


@pytest.mark.parametrize(
    "words",
    [text.LOADING, text.NOT_A_REVIEWER, text.unknown_crew("<!channel> & co", ["a&b"])],
)
def test_notice_view_is_a_valid_modal_and_shows_the_text_modules_words_as_they_are(
    words: str,
) -> None:
    view = blocks.notice_view(words)
    assert validate_view(view) == []
    shown = json.dumps(view)
    assert "<!channel>" not in shown and "&amp;amp;" not in shown
    assert view["blocks"][0]["text"]["text"] == words


def test_a_notice_that_the_review_was_decided_mentions_who_decided() -> None:
    view = blocks.notice_view(text.already_decided(decided(make_review(), DecisionKind.APPROVE)))
    assert "<@U0BOB>" in view["blocks"][0]["text"]["text"]


def test_reminder_and_escalation_mention_people() -> None:
    review = make_review()
    reminder = blocks.reminder_message(review, ("U0ALICE", "S0TEAM"))
    assert "<@U0ALICE>" in reminder.text and "<!subteam^S0TEAM>" in reminder.text
    assert validate_blocks(reminder.blocks) == []
    escalation = blocks.escalation_message(review, ("U0BOSS",))
    assert "<@U0BOSS>" in escalation.text
    assert validate_blocks(escalation.blocks) == []


# --- typed task outputs -------------------------------------------------------------------

OUTLINE_SCHEMA = {
    "title": "Outline",
    "type": "object",
    "properties": {"headline": {"type": "string"}, "sections": {"type": "integer"}},
    "required": ["headline", "sections"],
}


def _typed(prompt: str, **details: Any) -> Review:
    return make_review(
        prompt,
        details={"task": "t", "agent": "Writer", "round": 1, "output_model": "Outline"}
        | {"output_schema": OUTLINE_SCHEMA}
        | details,
    )


def test_a_typed_draft_is_shown_as_json_in_a_code_block_escaped() -> None:
    draft = json.dumps({"headline": f"Otters {HOSTILE}", "sections": 3}, indent=2)
    [message] = blocks.review_messages(_typed(draft), make_run())
    assert_message(message)
    (code,) = [s for s in draft_text(message).split("\n\n") if s.startswith("```")]
    assert code == f"```{escape(draft)}```"


def test_a_long_typed_draft_keeps_each_code_block_within_a_section() -> None:
    draft = json.dumps({"headline": "o" * 9000, "sections": 3}, indent=2)
    messages = blocks.review_messages(_typed(draft), make_run())
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
    review = _typed(f"Otters {HOSTILE}", output_problem=f"Invalid JSON {HOSTILE}")
    [message] = blocks.review_messages(review, make_run())
    assert_message(message)
    shown = draft_text(message)
    assert "```" not in shown
    assert "not JSON of Outline" in json.dumps(message.blocks)


def test_a_draft_reviewed_again_says_why_the_edit_was_not_used() -> None:
    review = _typed("{}", refused_edit=f"the task's guardrail refused it: {HOSTILE}")
    [message] = blocks.review_messages(review, make_run())
    assert_message(message)
    assert "The last edit was not used" in json.dumps(message.blocks)


def test_the_edit_modal_of_a_typed_draft_is_prefilled_with_its_json_and_names_the_fields() -> None:
    draft = json.dumps({"headline": "Otters <b>", "sections": 3}, indent=2)
    view = blocks.modal(DecisionKind.EDIT, _typed(draft), None, None)
    assert_view(view)
    [field] = [b for b in view["blocks"] if b["type"] == "input"]
    assert field["element"]["initial_value"] == draft
    assert field["label"]["text"] == "The output to approve, as JSON of Outline"
    assert field["hint"]["text"] == "Fields: headline, sections."


# --- a tool call's card, as a newcomer reads it ----------------------------------------------

EMAIL = {
    "to": "ana@example.com",
    "subject": "A note on <otters> & co",
    "body": "Hi,\n\nA few notes.\n\nBest regards",
}


def email_review() -> Review:
    prompt = f"send_email({json.dumps(EMAIL)})"  # the call on one line, as the runtime asks
    details = {"tool": "send_email", "description": "Send an e-mail.", "args": EMAIL}
    return make_review(prompt, ReviewKind.TOOL_APPROVAL, details=details)


def test_a_tool_call_shows_its_arguments_once_with_their_line_breaks() -> None:
    review = email_review()
    [message] = blocks.review_messages(review, make_run())
    assert_message(message)
    shown = "\n".join(texts(message.blocks))
    assert shown.count("ana@example.com") == 1
    assert "\\n" not in shown  # no JSON escapes: the body's lines are lines
    assert "*body:*\n```Hi,\n\nA few notes.\n\nBest regards```" in shown
    assert "*subject:* A note on &lt;otters&gt; &amp; co" in shown
    assert "*Tool:* Send an e-mail." in shown and "*Task:*" not in shown
    done = blocks.decided_message(decided(review, DecisionKind.APPROVE))
    assert_message(done)
    assert "\n".join(texts(done.blocks)).count("ana@example.com") == 1


def test_a_tool_calls_long_arguments_stay_within_a_message() -> None:
    args = {f"a{i}": "word " * 400 + "\nend" for i in range(80)}
    review = make_review("t", ReviewKind.TOOL_APPROVAL, details={"tool": "t", "args": args})
    [message] = blocks.review_messages(review, make_run())
    assert_message(message)
    assert "more." in "\n".join(texts(message.blocks))  # "…and N more.": the rest is in Edit


def test_one_line_arguments_get_one_line_inputs_and_text_with_lines_a_box() -> None:
    view = blocks.modal(DecisionKind.EDIT, email_review(), None, None)
    assert_view(view)
    fields = arg_inputs(view)
    assert fields["arg:to"]["element"]["multiline"] is False
    assert fields["arg:subject"]["element"]["multiline"] is False
    assert fields["arg:body"]["element"]["multiline"] is True


def test_rejecting_says_what_it_does_for_each_kind_of_review() -> None:
    def confirm(review: Review) -> str:
        [message] = blocks.review_messages(review, make_run())
        reject = next(b for b in buttons(message) if b["action_id"] == "countersign:reject")
        words: str = reject["confirm"]["text"]["text"]
        return words

    assert confirm(make_review()) == "Rejecting stops this run."
    denial = confirm(email_review())
    assert "stops" not in denial and "carries on" in denial
    view = blocks.modal(DecisionKind.REJECT, email_review(), None, None)
    assert "carries on" in view["blocks"][-1]["element"]["placeholder"]["text"]


# --- refusals: every expected failure in the text module's words ---------------------------


@pytest.mark.parametrize(
    ("refused", "said"),
    [
        (
            InputsRefused("writer", missing=["topic", "tone"]),
            "`writer` needs `topic`, `tone`: give each as `topic=…`.",
        ),
        (
            InputsRefused("writer", unknown=["colour"], taken="topic (required)"),
            "`writer` does not take `colour`. It takes topic (required).",
        ),
        (
            TextRefused(
                "the input 'a&b'",
                "contains U+0000 (a NUL character), which cannot be stored: remove it",
            ),
            "The input 'a&amp;b' contains U+0000 (a NUL character), which cannot be stored: "
            "remove it. Nothing was recorded.",
        ),
        (
            NothingToReopen("run_1", 2, [1]),
            "Task 2 has no approved draft to send back (approved: 1).",
        ),
        (UsageError("<!channel> & co."), "&lt;!channel&gt; &amp; co."),
    ],
)
def test_a_refusal_is_told_in_the_text_modules_words_escaped_once(
    refused: CountersignError, said: str
) -> None:
    assert text.refusal(refused) == said
    in_form = text.refusal_in_form(refused)  # plain text: no entities, no code marks
    assert "&amp;" not in in_form and "&lt;" not in in_form and "`" not in in_form
