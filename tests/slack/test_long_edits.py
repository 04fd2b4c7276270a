"""A draft or a tool argument of any length is edited in Slack without losing a character:
longer than one input holds (3,000 UTF-16 units), it is shown in several, cut where nothing
is lost, and the parts read back join into exactly the text shown, also when Slack trims an
input's value. Past what a modal holds, the edit is refused with another way to make it;
nothing cut is ever approved. The modals are checked by the stand-in's Block Kit validator
and filled in by its own payload functions, as a person would in Slack's client."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.slack import long_text, modals
from bot.slack.payloads import PayloadError, parse_submission
from sandbox import payloads as slack
from sandbox.blockkit import validate_view
from storage.status import DecisionKind, ReviewKind
from tests.support.records import make_review, tool_review

Json = dict[str, Any]

ARTICLE = "\n\n".join(
    f"## Section {i}\n" + " ".join(f"Otters use tools, sentence {i}.{j}." for j in range(33))
    for i in range(10)
)  # about 11,000 characters, as a long article


def units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def inputs(view: Json) -> list[Json]:
    return [b for b in view["blocks"] if b["type"] == "input"]


def submit(view: Json, typed: dict[str, str], *, trim: bool = False) -> Json:
    """A view_submission of ``view`` after a person typed ``typed``; ``trim`` strips every
    value as Slack may."""
    view = {**view, "id": "V0001", "team_id": "T0TEST", "hash": "1.abc"}
    view["state"] = slack.view_state(view, typed)
    if trim:
        for block in view["state"]["values"].values():
            for entry in block.values():
                if entry.get("value"):
                    entry["value"] = entry["value"].strip()
    return {"type": "view_submission", "user": {"id": "U0ANA01"}, "view": view}


TEXTS = [
    ARTICLE,
    "x" * 9001,  # no whitespace at all: cut anywhere
    "😀" * 4000,  # two UTF-16 units each
    ("word " * 700 + "\n" * 9) * 5,  # long runs of line breaks
    " " * 7000 + "end",  # a run of spaces longer than any join
    "a&<b>" * 2000,
]


@pytest.mark.parametrize(
    "text", TEXTS, ids=["article", "nospace", "emoji", "breaks", "spaces", "marks"]
)
def test_a_long_text_splits_into_parts_that_fit_and_join_back_exactly(text: str) -> None:
    parts, joins = long_text.split(text, 3000)
    assert len(parts) > 1 and len(joins) == len(parts) - 1
    assert all(units(p) <= 3000 for p in parts)
    assert all(len(j) <= long_text.MAX_JOIN for j in joins)
    assert long_text.join(parts, joins) == text
    assert long_text.join([p.strip() for p in parts], joins) in (text, text.strip())


@settings(max_examples=200, deadline=None)
@given(st.text(st.sampled_from(["a", "b", " ", "\n", "😀", "é"]), max_size=400), st.integers(4, 40))
def test_any_text_joins_back_from_its_parts(text: str, limit: int) -> None:
    parts, joins = long_text.split(text, limit)
    assert all(units(p) <= limit for p in parts)
    assert long_text.join(parts, joins) == text


def test_a_long_article_is_edited_in_parts_and_read_back_whole() -> None:
    assert 10_000 < len(ARTICLE) < 12_000
    view = modals.modal(DecisionKind.EDIT, make_review(ARTICLE), "C0DRAFTS", "1700.1")
    assert validate_view(view) == []
    boxes = inputs(view)
    count = len(boxes)
    assert 4 <= count <= 5  # cut at a section's end, never mid-sentence
    assert all(b["element"]["initial_value"].endswith(".") for b in boxes)
    assert [b["label"]["text"] for b in boxes] == [
        f"The text to approve (part {n} of {count})" for n in range(1, count + 1)
    ]
    assert f"{len(ARTICLE):,} characters" in json.dumps(view["blocks"])
    # Submitted as shown, trimmed or not: the whole article, not a character lost.
    for trim in (False, True):
        read = parse_submission(submit(view, {}, trim=trim))
        assert read.text == ARTICLE
    # A change in part 3 is kept, every other part as it was.
    third = boxes[2]["element"]["initial_value"]
    edited = third.replace("sentence", "line", 1)
    read = parse_submission(submit(view, {boxes[2]["block_id"]: edited}))
    assert read.text == ARTICLE.replace(third, edited, 1)
    assert len(read.text) == len(ARTICLE) - len("sentence") + len("line")


def test_emptying_a_part_removes_it_and_only_it() -> None:
    view = modals.modal(DecisionKind.EDIT, make_review(ARTICLE), None, None)
    boxes = inputs(view)
    assert [b["optional"] for b in boxes] == [False] + [True] * (len(boxes) - 1)
    read = parse_submission(submit(view, {boxes[1]["block_id"]: ""}))
    shown = [b["element"]["initial_value"] for b in boxes]
    assert shown[1] not in read.text and all(p in read.text for p in (shown[0], *shown[2:]))


def test_a_short_draft_keeps_one_box() -> None:
    view = modals.modal(DecisionKind.EDIT, make_review("Short"), None, None)
    [box] = inputs(view)
    assert box["block_id"] == "text" and box["label"]["text"] == "The text to approve"
    assert "joins" not in json.loads(view["private_metadata"])


def test_a_text_no_modal_holds_is_not_offered_cut_but_another_way() -> None:
    huge = make_review("word " * 60_000)  # 300,000 characters: over 95 boxes
    view = modals.modal(DecisionKind.EDIT, huge, None, None)
    assert validate_view(view) == []
    assert inputs(view) == [] and "submit" not in view
    words = json.dumps(view["blocks"])
    assert "300,000 characters" in words and f"reviews decide {huge.id} edit -" in words


def test_a_long_tool_argument_is_edited_in_parts_and_runs_whole() -> None:
    lines = (f"Line {i} of a long letter about otters." for i in range(160))
    body = "Dear Ana,\n\n" + "\n".join(lines)
    assert units(body) > 6000
    view = modals.modal(DecisionKind.EDIT, tool_review({"amount": 1, "to": body}), None, None)
    assert validate_view(view) == []
    ids = [b["block_id"] for b in inputs(view)]
    assert ids[:4] == ["arg:amount", "arg:to", "arg:to#2", "arg:to#3"]
    assert not any(i.startswith("arg:to#") for i in ids[4:])
    assert all(b["element"]["action_id"] == b["block_id"] for b in inputs(view))
    read = parse_submission(submit(view, {}, trim=True))
    assert read.fields["to"] == body and read.fields["amount"] == "1"
    assert read.text == ""


def test_a_typed_drafts_long_json_is_edited_in_parts() -> None:
    data = {"title": "Otters", "body": "x " * 4000}
    review = make_review(json.dumps(data, indent=2), ReviewKind.TASK_REVIEW)
    view = modals.modal(DecisionKind.EDIT, review, None, None)
    assert len(inputs(view)) == 3
    assert json.loads(parse_submission(submit(view, {})).text) == data


@pytest.mark.parametrize("joins", [[], {"text": "  "}, {"text": [1]}])
def test_joins_that_are_not_joins_are_a_payload_error(joins: Any) -> None:
    view = modals.modal(DecisionKind.EDIT, make_review(ARTICLE), None, None)
    meta = {**json.loads(view["private_metadata"]), "joins": joins}
    body = submit({**view, "private_metadata": json.dumps(meta)}, {})
    with pytest.raises(PayloadError, match="joins"):
        parse_submission(body)
