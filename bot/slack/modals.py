"""Block Kit for the modals the bot opens, built from storage records: a review's edit,
changes, reject and answer forms, a tool call's arguments one input each, "Revise an
earlier task", and a notice in place of a form.

Pure functions returning plain dicts, checked against Slack's limits like the messages
(``sandbox/blockkit.py``). Plain-text inputs hold at most 3000 characters (Slack's
limit, counted in UTF-16 code units): a longer text is cut and the modal says so. The
review or run id and the message to update travel in ``private_metadata``
(``bot.slack.payloads`` reads a submission back).
"""

from __future__ import annotations

import json
from typing import Any

from bot.slack import block_text as t
from bot.slack import long_text
from bot.slack.elements import (
    Block,
    arg_text,
    as_dict,
    context,
    draft_details,
    plain,
    proposed,
    section,
)
from bot.slack.mrkdwn import code, truncate
from bot.slack.payloads import (
    MAX_ARG_NAME,
    MODAL_ACTIONS,
    REASSIGN,
    REVISE,
    arg_block_id,
    callback_id,
)
from crew_runtime.arguments import schema_types
from storage.details import ToolApprovalDetails
from storage.records import Review
from storage.status import DecisionKind, ReviewKind

INPUT_LIMIT = 3000  # plain_text_input, Slack's limit
ONE_LINE_CHARS = 120  # an argument longer than this is edited in a box, however many lines
MAX_ARG_INPUTS = 90  # a modal holds 100 blocks; past this many arguments, one JSON box
MAX_TEXT_PARTS = 95  # a draft in more 3,000-character parts than this cannot be edited here
MAX_OPTIONS = 100  # static_select, Slack's limit
OPTION_TEXT_LIMIT = 75  # an option's text, Slack's limit


# --- a review's modal ---------------------------------------------------------------------


def _editable(review: Review) -> str:
    if (args := proposed(review)) is not None:
        return json.dumps(args, indent=2, ensure_ascii=False, default=str)
    return review.prompt


def modal(
    action: DecisionKind, review: Review, channel_id: str | None, message_ts: str | None
) -> dict[str, Any]:
    """The ``views.open`` view for ``edit``, ``changes``, ``reject`` or ``answer``.

    The review id and the message to update travel in ``private_metadata``; the text comes
    back in ``state.values["text"]["value"]``. An edit box holds at most 3000 chars
    (Slack's limit), so a longer text is cut and the modal says so.

    Raises:
        ValueError: for an action that has no modal (``approve``) or is unknown.
    """
    if action not in MODAL_ACTIONS:
        raise ValueError(f"no modal for action {action!r}")
    metadata: dict[str, Any] = {
        "review_id": review.id,
        "channel_id": channel_id,
        "message_ts": message_ts,
    }
    details = review.details
    if (
        action is DecisionKind.EDIT
        and isinstance(details, ToolApprovalDetails)
        and (fields := _arg_inputs(details))[0]
    ):
        head = _tool_head(review, details)
        if fields[1]:
            metadata["joins"] = fields[1]
        return _view(callback_id(action), metadata, action, [*head, *fields[0]])
    blocks: list[Block] = [context(t.review_ref(review.id, review.run_id))]
    element: Block = {
        "type": "plain_text_input",
        "action_id": "value",
        "multiline": True,
        "max_length": INPUT_LIMIT,
        "placeholder": plain(t.MODAL_PLACEHOLDER[action], 150),
    }
    if action is DecisionKind.REJECT and review.kind is ReviewKind.TOOL_APPROVAL:
        element["placeholder"] = plain(t.MODAL_PLACEHOLDER_DENY, 150)
    if action is DecisionKind.ANSWER:
        blocks.append(section(f"*{t.REVIEW_TITLE[review.kind]}:* {truncate(review.prompt, 2800)}"))
    label = t.MODAL_LABEL[action]
    if action is DecisionKind.EDIT and review.kind is ReviewKind.TOOL_APPROVAL:
        label = t.MODAL_LABEL_ARGS
    field: Block = {
        "type": "input",
        "block_id": "text",
        "label": plain(label, 2000),
        "element": element,
        "optional": action is DecisionKind.REJECT,
    }
    if action is DecisionKind.EDIT and (model := draft_details(review).output_model):
        field["label"] = plain(t.modal_label_output(model), 2000)
        schema = draft_details(review).output_schema or {}
        field["hint"] = plain(t.output_hint(list(as_dict(schema.get("properties")))), 2000)
    if action is not DecisionKind.EDIT:
        return _view(callback_id(action), metadata, action, [*blocks, field])
    editable = _editable(review)
    parts, joins = long_text.split(editable, INPUT_LIMIT)
    if len(parts) > MAX_TEXT_PARTS:
        return notice_view(t.edit_too_long(len(editable), review.id))
    if len(parts) > 1:
        metadata["joins"] = {"text": joins}
        blocks.append(context(t.edit_in_parts_note(len(editable), len(parts), INPUT_LIMIT)))
    blocks += _parts(field, parts)
    return _view(callback_id(action), metadata, action, blocks)


def _parts(field: Block, parts: list[str]) -> list[Block]:
    """The input ``field`` once per part of its text, each prefilled with its part; parts
    after the first are optional (emptied, they drop out of the text)."""
    blocks: list[Block] = []
    for number, part in enumerate(parts, start=1):
        block = json.loads(json.dumps(field))
        block["block_id"] = long_text.part_id(field["block_id"], number)
        block["element"]["action_id"] = long_text.part_id(field["element"]["action_id"], number)
        if part:
            block["element"]["initial_value"] = part
        if number > 1:
            block.pop("hint", None)
        if len(parts) > 1:
            label = t.input_part_label(block["label"]["text"], number, len(parts))
            block["label"] = plain(label, 2000)
            block["optional"] = block["optional"] or number > 1
        blocks.append(block)
    return blocks


def _view(
    callback: str, metadata: dict[str, Any], action: str, blocks: list[Block]
) -> dict[str, Any]:
    return {
        "type": "modal",
        "callback_id": callback,
        "private_metadata": json.dumps(metadata),
        "title": plain(t.MODAL_TITLE[action], 24),
        "submit": plain(t.MODAL_SUBMIT[action], 24),
        "close": plain(t.MODAL_CLOSE, 24),
        "blocks": blocks,
    }


def notice_view(words: str) -> dict[str, Any]:
    """A modal that only says something (mrkdwn from ``bot.slack.text``, escaped there): opened at
    once while the real one is prepared (a trigger id lives 3 s), or shown instead of it when
    the review cannot be decided."""
    return {
        "type": "modal",
        "title": plain(t.LOADING_TITLE, 24),
        "close": plain(t.CLOSE, 24),
        "blocks": [section(words)],
    }


# --- a tool call's arguments, one input each ----------------------------------------------


def _tool_head(review: Review, details: ToolApprovalDetails) -> list[Block]:
    blocks = [context(t.review_ref(review.id, review.run_id))]
    line = f"*{t.TOOL}:* {code(details.tool)}"
    if details.description:
        line += f"\n{truncate(details.description, 600)}"
    return [*blocks, section(line)]


def _arg_names(properties: dict[str, Any], args: dict[str, Any]) -> list[str] | None:
    """The arguments to show: the schema's, in its order, then any other the call has.

    ``None`` when they cannot be one input each (none, too many, a name too long for a
    block_id); the modal is then one JSON box, which the service also accepts.
    """
    names = [*properties, *(name for name in args if name not in properties)]
    if not 0 < len(names) <= MAX_ARG_INPUTS:
        return None
    longest = MAX_ARG_NAME - len(long_text.PART_SEPARATOR) - 2  # room for "#99"
    if not all(isinstance(n, str) and 0 < len(n) <= longest for n in names):
        return None
    return names


def _arg_inputs(details: ToolApprovalDetails) -> tuple[list[Block], dict[str, list[str]]]:
    """One input per argument of a tool call (a long text in parts), prefilled with what
    the agent proposed, and the joins of the parts (``bot.slack.long_text``).

    Block and action ids are both ``arg:<name>`` (``arg:<name>#2`` for a second part):
    action ids must be unique in a view. No inputs when they would not fit a modal.
    """
    properties = as_dict(details.schema.get("properties"))
    required = details.schema.get("required")
    args = details.args or {}
    names = _arg_names(properties, args)
    if names is None:
        return [], {}
    blocks: list[Block] = []
    joins: dict[str, list[str]] = {}
    for name in names:
        inputs, glue = _arg_input(
            name,
            as_dict(properties.get(name)),
            args,
            required=isinstance(required, list) and name in required,
        )
        blocks += inputs
        if glue:
            joins[arg_block_id(name)] = glue
    if len(blocks) > MAX_ARG_INPUTS:
        return [], {}
    return blocks, joins


def _arg_input(
    name: str, prop: dict[str, Any], args: dict[str, Any], *, required: bool
) -> tuple[list[Block], list[str]]:
    kinds = schema_types(prop)
    title, description = (prop.get(key) for key in ("title", "description"))
    title = title if isinstance(title, str) else ""
    hint = t.arg_hint(kinds, description if isinstance(description, str) else "")
    field: Block = {
        "type": "input",
        "block_id": arg_block_id(name),
        "label": plain(title or name, 2000),
        "hint": plain(hint, 2000),
        "optional": not required,
    }
    if kinds and set(kinds) <= {"boolean", "null"} and "boolean" in kinds:
        element: Block = {
            "type": "static_select",
            "action_id": arg_block_id(name),
            "options": [_option(t.BOOLEAN[v], v) for v in ("true", "false")],
        }
        proposed = args.get(name)
        if isinstance(proposed, bool):
            word = json.dumps(proposed)
            element["initial_option"] = _option(t.BOOLEAN[word], word)
        return [{**field, "element": element}], []
    shown = arg_text(args[name]) if name in args else ""
    parts, joins = long_text.split(shown, INPUT_LIMIT)
    # Sized to the value: one line for a one-line value, a box for text with lines.
    field["element"] = {
        "type": "plain_text_input",
        "action_id": arg_block_id(name),
        "multiline": "\n" in shown or len(shown) > ONE_LINE_CHARS,
        "max_length": INPUT_LIMIT,
    }
    blocks = _parts(field, parts)
    if len(parts) > 1:
        blocks[0]["hint"] = plain(f"{hint} {t.arg_parts_note(len(shown), len(parts))}", 2000)
    return blocks, joins


def _option(label: str, value: str) -> Block:
    return {"text": plain(label, OPTION_TEXT_LIMIT), "value": value}


# --- re-opening an earlier task -----------------------------------------------------------


def reassign_modal(review: Review) -> dict[str, Any]:
    """The modal of "Reassign": a ``users_select`` of who should handle the review; the
    choice comes back as ``state.values["to"]["to"]["selected_user"]``."""
    blocks: list[Block] = [
        context(t.review_ref(review.id, review.run_id)),
        {
            "type": "input",
            "block_id": "to",
            "label": plain(t.REASSIGN_LABEL, 2000),
            "element": {
                "type": "users_select",
                "action_id": "to",
                "placeholder": plain(t.REASSIGN_PLACEHOLDER, 150),
            },
        },
    ]
    return _view(callback_id(REASSIGN), {"review_id": review.id}, REASSIGN, blocks)


def revise_modal(
    run_id: str,
    tasks: list[tuple[int, str]],
    channel_id: str | None,
    message_ts: str | None,
) -> dict[str, Any]:
    """The modal of "Revise an earlier task": which approved task, and the feedback.

    ``tasks`` are ``(index, label)`` pairs of the run's revisable tasks (at least one);
    the chosen index comes back as ``state.values["task"]["task"]`` (action ids are
    unique in a view), the feedback as ``state.values["text"]["value"]``.
    """
    options = [_option(t.task_option(i, label), str(i)) for i, label in tasks[:MAX_OPTIONS]]
    blocks: list[Block] = [
        context(t.run_ref(run_id)),
        section(t.REVISE_EXPLAINED),
        {
            "type": "input",
            "block_id": "task",
            "label": plain(t.REVISE_TASK_LABEL, 2000),
            "element": {
                "type": "static_select",
                "action_id": "task",
                "placeholder": plain(t.REVISE_TASK_PLACEHOLDER, 150),
                "options": options,
            },
        },
        {
            "type": "input",
            "block_id": "text",
            "label": plain(t.MODAL_LABEL[REVISE], 2000),
            "element": {
                "type": "plain_text_input",
                "action_id": "value",
                "multiline": True,
                "max_length": INPUT_LIMIT,
                "placeholder": plain(t.MODAL_PLACEHOLDER[REVISE], 150),
            },
        },
    ]
    metadata = {"run_id": run_id, "channel_id": channel_id, "message_ts": message_ts}
    return _view(callback_id(REVISE), metadata, REVISE, blocks)
