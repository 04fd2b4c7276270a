"""Block Kit validation, without a network: each limit Slack enforces has a case that breaks it
and a case just inside it, so a validator that accepts everything (or nothing) fails here."""

from __future__ import annotations

from typing import Any

import pytest

from sandbox.blockkit import MAX_BLOCK_TEXT_TOTAL, validate_blocks, validate_view


def section(text: str, **extra: Any) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}, **extra}


def button(action_id: str = "approve", text: str = "Approve", **extra: Any) -> dict[str, Any]:
    return {
        "type": "button",
        "action_id": action_id,
        "text": {"type": "plain_text", "text": text},
        **extra,
    }


def actions(*elements: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "actions", "elements": list(elements), **extra}


def plain(text: str) -> dict[str, Any]:
    return {"type": "plain_text", "text": text}


def option(text: str, value: str = "v") -> dict[str, Any]:
    return {"text": plain(text), "value": value}


def select(*options: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "static_select", "action_id": "pick", "options": list(options), **extra}


def modal(blocks: list[dict[str, Any]], title: str = "Feedback", **extra: Any) -> dict[str, Any]:
    return {
        "type": "modal",
        "title": {"type": "plain_text", "text": title},
        "submit": {"type": "plain_text", "text": "Send"},
        "blocks": blocks,
        **extra,
    }


def text_input(block_id: str = "fb", **element: Any) -> dict[str, Any]:
    return {
        "type": "input",
        "block_id": block_id,
        "label": {"type": "plain_text", "text": "Feedback"},
        "element": {"type": "plain_text_input", "action_id": "text", **element},
    }


# (name, blocks that are just inside a limit, blocks that break it, pointer of the problem)
MESSAGE_CASES: list[tuple[str, list[Any], list[Any], str]] = [
    ("50 blocks", [section("x")] * 50, [section("x")] * 51, "/blocks"),
    ("section 3000", [section("x" * 3000)], [section("x" * 3001)], "/blocks/0/text/text"),
    ("empty text", [section("x")], [section("")], "/blocks/0/text/text"),
    (
        "header 150",
        [{"type": "header", "text": {"type": "plain_text", "text": "h" * 150}}],
        [{"type": "header", "text": {"type": "plain_text", "text": "h" * 151}}],
        "/blocks/0/text/text",
    ),
    (
        "header plain_text only",
        [{"type": "header", "text": {"type": "plain_text", "text": "h"}}],
        [{"type": "header", "text": {"type": "mrkdwn", "text": "h"}}],
        "/blocks/0/text/type",
    ),
    (
        "text type",
        [section("x")],
        [{"type": "section", "text": {"type": "markdown", "text": "x"}}],
        "/blocks/0/text/type",
    ),
    (
        "emoji on mrkdwn",
        [{"type": "section", "text": {"type": "plain_text", "text": "x", "emoji": True}}],
        [{"type": "section", "text": {"type": "mrkdwn", "text": "x", "emoji": True}}],
        "/blocks/0/text/emoji",
    ),
    (
        "button text 75",
        [actions(button(text="b" * 75))],
        [actions(button(text="b" * 76))],
        "/blocks/0/elements/0/text/text",
    ),
    (
        "button text plain",
        [actions(button())],
        [actions({**button(), "text": {"type": "mrkdwn", "text": "x"}})],
        "/blocks/0/elements/0/text/type",
    ),
    (
        "button value 2000",
        [actions(button(value="v" * 2000))],
        [actions(button(value="v" * 2001))],
        "/blocks/0/elements/0/value",
    ),
    (
        "button style",
        [actions(button(style="danger"))],
        [actions(button(style="red"))],
        "/blocks/0/elements/0/style",
    ),
    (
        "action_id 255",
        [actions(button(action_id="a" * 255))],
        [actions(button(action_id="a" * 256))],
        "/blocks/0/elements/0/action_id",
    ),
    (
        "action_id unique in message",
        [actions(button("a"), block_id="b1"), actions(button("b"), block_id="b2")],
        [actions(button("a"), block_id="b1"), actions(button("a"), block_id="b2")],
        "/blocks/1/elements/0/action_id",
    ),
    (
        "block_id unique",
        [section("x", block_id="one"), section("y", block_id="two")],
        [section("x", block_id="one"), section("y", block_id="one")],
        "/blocks/1/block_id",
    ),
    (
        "block_id 255",
        [section("x", block_id="b" * 255)],
        [section("x", block_id="b" * 256)],
        "/blocks/0/block_id",
    ),
    (
        "context 10 elements",
        [{"type": "context", "elements": [{"type": "mrkdwn", "text": "c"}] * 10}],
        [{"type": "context", "elements": [{"type": "mrkdwn", "text": "c"}] * 11}],
        "/blocks/0/elements",
    ),
    (
        "actions 25 elements",
        [actions(*[button(f"a{i}") for i in range(25)])],
        [actions(*[button(f"a{i}") for i in range(26)])],
        "/blocks/0/elements",
    ),
    (
        "section fields 10",
        [{"type": "section", "fields": [{"type": "mrkdwn", "text": "f"}] * 10}],
        [{"type": "section", "fields": [{"type": "mrkdwn", "text": "f"}] * 11}],
        "/blocks/0/fields",
    ),
    (
        "input only in modals",
        [section("x")],
        [text_input()],
        "/blocks/0/type",
    ),
    (
        "unknown block type",
        [{"type": "divider"}],
        [{"type": "carousel"}],
        "/blocks/0/type",
    ),
    (
        "section field 2000",
        [{"type": "section", "fields": [{"type": "mrkdwn", "text": "f" * 2000}]}],
        [{"type": "section", "fields": [{"type": "mrkdwn", "text": "f" * 2001}]}],
        "/blocks/0/fields/0/text",
    ),
    (
        "verbatim on plain_text",
        [{"type": "section", "text": {"type": "mrkdwn", "text": "x", "verbatim": True}}],
        [{"type": "section", "text": {"type": "plain_text", "text": "x", "verbatim": True}}],
        "/blocks/0/text/verbatim",
    ),
    (
        "markdown block 12000",
        [{"type": "markdown", "text": "m" * 12_000}],
        [{"type": "markdown", "text": "m" * 12_001}],
        "/blocks/0/text",
    ),
    (
        "option text 75",
        [actions(select(option("o" * 75)))],
        [actions(select(option("o" * 76)))],
        "/blocks/0/elements/0/options/0/text/text",
    ),
    (
        "option value 150",
        [actions(select(option("o", "v" * 150)))],
        [actions(select(option("o", "v" * 151)))],
        "/blocks/0/elements/0/options/0/value",
    ),
    (
        "placeholder 150",
        [actions(select(option("o"), placeholder=plain("p" * 150)))],
        [actions(select(option("o"), placeholder=plain("p" * 151)))],
        "/blocks/0/elements/0/placeholder/text",
    ),
    (
        "overflow 2 to 5 options",
        [actions({"type": "overflow", "action_id": "o", "options": [option("a")] * 5})],
        [actions({"type": "overflow", "action_id": "o", "options": [option("a")] * 6})],
        "/blocks/0/elements/0/options",
    ),
    (
        "no text inputs in actions",
        [actions(select(option("o")))],
        [actions({"type": "plain_text_input", "action_id": "t"})],
        "/blocks/0/elements/0/type",
    ),
    (
        "accessory type",
        [section("x", accessory=button())],
        [section("x", accessory={"type": "datetimepicker", "action_id": "d"})],
        "/blocks/0/accessory/type",
    ),
    (
        "image alt_text",
        [{"type": "image", "image_url": "https://x/y.png", "alt_text": "a"}],
        [{"type": "image", "image_url": "https://x/y.png"}],
        "/blocks/0/alt_text",
    ),
    (
        "datepicker date format",
        [section("x", accessory={"type": "datepicker", "initial_date": "2026-01-31"})],
        [section("x", accessory={"type": "datepicker", "initial_date": "31/01/2026"})],
        "/blocks/0/accessory/initial_date",
    ),
    (
        "section needs text or fields",
        [section("x")],
        [{"type": "section"}],
        "/blocks/0",
    ),
]


@pytest.mark.parametrize(
    ("inside", "broken", "pointer"),
    [case[1:] for case in MESSAGE_CASES],
    ids=[case[0] for case in MESSAGE_CASES],
)
def test_message_limit(inside: list[Any], broken: list[Any], pointer: str) -> None:
    assert validate_blocks(inside) == []
    problems = validate_blocks(broken)
    assert problems[0].pointer == pointer
    # a 12,001-character markdown block also exceeds the cumulative cap; nothing else may
    assert [p.code for p in problems[1:]] in ([], ["msg_blocks_too_long"])
    assert problems[0].code == "invalid_blocks"
    assert problems[0].slack_line().startswith("[ERROR] ")
    assert problems[0].slack_line().endswith(f"[json-pointer:{pointer}]")


def test_blocks_not_an_array_is_invalid_blocks_format() -> None:
    assert [p.code for p in validate_blocks({"type": "section"})] == ["invalid_blocks_format"]


def test_cumulative_text_is_msg_blocks_too_long() -> None:
    per_block = 3000
    fits = [section("x" * per_block)] * (MAX_BLOCK_TEXT_TOTAL // per_block)
    assert validate_blocks(fits) == []
    problems = validate_blocks([*fits, section("x")])
    assert [p.code for p in problems] == ["msg_blocks_too_long"]


# (name, view just inside a limit, view that breaks it, pointer)
VIEW_CASES: list[tuple[str, Any, Any, str]] = [
    ("title 24", modal([], title="t" * 24), modal([], title="t" * 25), "/view/title/text"),
    (
        "submit 24",
        modal([], submit={"type": "plain_text", "text": "s" * 24}),
        modal([], submit={"type": "plain_text", "text": "s" * 25}),
        "/view/submit/text",
    ),
    (
        "close 24",
        modal([], close={"type": "plain_text", "text": "c" * 24}),
        modal([], close={"type": "plain_text", "text": "c" * 25}),
        "/view/close/text",
    ),
    (
        "100 blocks",
        modal([section("x")] * 100),
        modal([section("x")] * 101),
        "/view/blocks",
    ),
    (
        "private_metadata 3000",
        modal([], private_metadata="m" * 3000),
        modal([], private_metadata="m" * 3001),
        "/view/private_metadata",
    ),
    (
        "input max_length 3000",
        modal([text_input(max_length=3000)]),
        modal([text_input(max_length=3001)]),
        "/view/blocks/0/element/max_length",
    ),
    (
        "initial_value within max_length",
        modal([text_input(max_length=5, initial_value="12345")]),
        modal([text_input(max_length=5, initial_value="123456")]),
        "/view/blocks/0/element/initial_value",
    ),
    (
        "callback_id 255",
        modal([], callback_id="c" * 255),
        modal([], callback_id="c" * 256),
        "/view/callback_id",
    ),
    (
        "input min_length 0..3000",
        modal([text_input(min_length=3000)]),
        modal([text_input(min_length=3001)]),
        "/view/blocks/0/element/min_length",
    ),
    (
        "label 2000",
        modal([{**text_input(), "label": plain("l" * 2000)}]),
        modal([{**text_input(), "label": plain("l" * 2001)}]),
        "/view/blocks/0/label/text",
    ),
    (
        "checkboxes 10 options",
        modal(
            [
                {
                    **text_input(),
                    "element": {
                        "type": "checkboxes",
                        "action_id": "c",
                        "options": [option("o")] * 10,
                    },
                }
            ]
        ),
        modal(
            [
                {
                    **text_input(),
                    "element": {
                        "type": "checkboxes",
                        "action_id": "c",
                        "options": [option("o")] * 11,
                    },
                }
            ]
        ),
        "/view/blocks/0/element/options",
    ),
    (
        "type",
        modal([]),
        {**modal([]), "type": "dialog"},
        "/view/type",
    ),
]


@pytest.mark.parametrize(
    ("inside", "broken", "pointer"),
    [case[1:] for case in VIEW_CASES],
    ids=[case[0] for case in VIEW_CASES],
)
def test_view_limit(inside: Any, broken: Any, pointer: str) -> None:
    assert validate_view(inside) == []
    problems = validate_view(broken)
    assert [p.pointer for p in problems] == [pointer]
    assert problems[0].code == "invalid_arguments"


def test_modal_with_inputs_needs_submit() -> None:
    view = modal([text_input()])
    del view["submit"]
    assert [p.pointer for p in validate_view(view)] == ["/view/submit"]


def test_huge_view_is_view_too_large() -> None:
    view = modal([section("x" * 3000, block_id=f"b{i}") for i in range(90)])
    assert [p.code for p in validate_view(view)] == ["view_too_large"]
