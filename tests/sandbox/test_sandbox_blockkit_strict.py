"""The documented Block Kit mistakes the stand-in refuses as Slack does: a field a block
does not have, an incomplete or overlong confirmation dialog, an ``initial_option`` that is
not one of the options. Each case is checked against slack_sdk's own models where they have
an opinion, so the stand-in is no stricter than Slack's SDK on what it accepts."""

from __future__ import annotations

from typing import Any

import pytest
from slack_sdk.errors import SlackObjectFormationError
from slack_sdk.models import blocks as sdk
from slack_sdk.models.blocks import ButtonElement, ConfirmObject

from sandbox.blockkit import BLOCK_FIELDS, validate_blocks, validate_view

Json = dict[str, Any]


def plain(text: str) -> Json:
    return {"type": "plain_text", "text": text}


def confirm(**changed: Any) -> Json:
    dialog: Json = {
        "title": plain("Reject?"),
        "text": plain("The run stops."),
        "confirm": plain("Reject"),
        "deny": plain("Keep"),
    }
    dialog.update(changed)
    return {k: v for k, v in dialog.items() if v is not None}


def button_with(dialog: Json) -> list[Json]:
    button = {"type": "button", "text": plain("Reject"), "action_id": "r", "confirm": dialog}
    return [{"type": "actions", "elements": [button]}]


def problems(blocks: list[Json]) -> list[tuple[str, str]]:
    return [(p.pointer, p.message) for p in validate_blocks(blocks)]


def test_a_field_a_block_does_not_have_is_refused() -> None:
    section = {"type": "section", "text": {"type": "mrkdwn", "text": "hi"}, "colour": "red"}
    assert problems([section]) == [("/blocks/0/colour", "unknown field: colour")]
    assert validate_blocks([section])[0].code == "invalid_blocks"
    # What Slack documents for a section is fine, block_id and expand included.
    known = {**section, "block_id": "b", "expand": True}
    del known["colour"]
    assert problems([known]) == []
    divider = {"type": "divider", "text": plain("no")}
    assert problems([divider]) == [("/blocks/0/text", "unknown field: text")]


def sdk_fields(kind: str) -> set[str]:
    """The fields slack_sdk's model of a block of ``kind`` has."""
    (model,) = [
        c
        for c in vars(sdk).values()
        if isinstance(c, type) and issubclass(c, sdk.Block) and getattr(c, "type", None) == kind
    ]
    attributes = model.attributes
    if isinstance(attributes, property):
        attributes = attributes.fget(model.__new__(model))  # type: ignore[misc]
    return set(attributes)


@pytest.mark.parametrize("kind", sorted(BLOCK_FIELDS))
def test_the_fields_of_each_block_are_those_of_slacks_sdk(kind: str) -> None:
    assert BLOCK_FIELDS[kind] == sdk_fields(kind)


@pytest.mark.parametrize(
    ("dialog", "where", "message"),
    [
        (confirm(deny=None), "/blocks/0/elements/0/confirm", "missing required field: deny"),
        (confirm(title=None), "/blocks/0/elements/0/confirm", "missing required field: title"),
        (confirm(text=None), "/blocks/0/elements/0/confirm", "missing required field: text"),
        (
            confirm(title=plain("t" * 101)),
            "/blocks/0/elements/0/confirm/title/text",
            "must be less than 101 characters",
        ),
        (
            confirm(text=plain("t" * 301)),
            "/blocks/0/elements/0/confirm/text/text",
            "must be less than 301 characters",
        ),
        (
            confirm(confirm=plain("t" * 31)),
            "/blocks/0/elements/0/confirm/confirm/text",
            "must be less than 31 characters",
        ),
        (
            confirm(deny=plain("t" * 31)),
            "/blocks/0/elements/0/confirm/deny/text",
            "must be less than 31 characters",
        ),
        (
            confirm(title={"type": "mrkdwn", "text": "*no*"}),
            "/blocks/0/elements/0/confirm/title/type",
            "must be plain_text",
        ),
    ],
)
def test_an_incomplete_or_overlong_confirm_dialog_is_refused(
    dialog: Json, where: str, message: str
) -> None:
    assert (where, message) in problems(button_with(dialog))


def test_a_complete_confirm_dialog_within_its_limits_passes() -> None:
    at_limits = confirm(
        title=plain("t" * 100),
        text={"type": "mrkdwn", "text": "t" * 300},
        confirm=plain("c" * 30),
        deny=plain("d" * 30),
        style="danger",
    )
    assert problems(button_with(at_limits)) == []
    # slack_sdk agrees on the limits: one past each is refused there too.
    with pytest.raises(SlackObjectFormationError):
        ButtonElement(
            text="x", action_id="a", confirm=ConfirmObject(title="t" * 101, text="x")
        ).to_dict()


def select(initial: Json, **more: Any) -> list[Json]:
    options = [{"text": plain(w), "value": w} for w in ("true", "false")]
    element = {"type": "static_select", "action_id": "s", "options": options}
    element.update(initial=None, **more)
    element.pop("initial")
    element["initial_option"] = initial
    block = {"type": "input", "block_id": "b", "label": plain("Flag"), "element": element}
    return [block]


def test_an_initial_option_not_among_the_options_is_refused() -> None:
    view = {"type": "modal", "title": plain("Edit"), "submit": plain("Save")}
    among = {**view, "blocks": select({"text": plain("true"), "value": "true"})}
    assert validate_view(among) == []
    for stranger in (
        {"text": plain("maybe"), "value": "maybe"},
        {"text": plain("yes"), "value": "true"},  # the value of one, the text of none
    ):
        refused = validate_view({**view, "blocks": select(stranger)})
        assert [(p.code, p.pointer, p.message) for p in refused] == [
            (
                "invalid_arguments",
                "/view/blocks/0/element/initial_option",
                "must match one of the options",
            )
        ]
