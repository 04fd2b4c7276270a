"""Slack's payloads turned into small typed values, or a ``PayloadError``.

Why: a listener should not dig through nested dicts, and it must never crash on what
arrives over the network. Every field a listener uses is checked here once, the way
bolt's ``request/payload_utils.py`` reads payloads without I/O. Shapes follow Slack's
reference pages for ``block_actions``, ``view_submission`` and slash commands.

A tool call's edit modal has one input per argument (block and action ``arg:<name>``, as
action ids must be unique in a view): its texts come back as :attr:`ModalSubmission.fields`,
for ``crew_runtime.arguments.coerce_fields`` to type by the tool's argument schema.

Ids (users, channels, timestamps, trigger ids, review ids) must be 1-64 characters of
``[A-Za-z0-9_.:-]``: every real one is, and anything else is refused before it reaches
storage, a log line or a message. Optional fields may be absent or ``null``; when present
they are checked like required ones.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bot.errors import BotError
from bot.slack import long_text
from storage.status import HUMAN_DECISIONS, DecisionKind

__all__ = [
    "ACTIONS",
    "ACTION_PREFIX",
    "APPROVE_ALL",
    "ARG_PREFIX",
    "BUTTON_PATTERN",
    "CLAIM",
    "MAX_ARG_NAME",
    "MODAL_ACTIONS",
    "MODAL_PATTERN",
    "MODAL_PREFIX",
    "REASSIGN",
    "REVISE",
    "REVOKE",
    "ButtonClick",
    "ClaimClick",
    "ModalSubmission",
    "PayloadError",
    "ReassignSubmission",
    "ReviseClick",
    "ReviseSubmission",
    "RevokeClick",
    "SlashCommand",
    "ThreadMessage",
    "action_id",
    "arg_block_id",
    "callback_id",
    "parse_approve_all",
    "parse_button",
    "parse_claim_click",
    "parse_message_event",
    "parse_reassign_submission",
    "parse_revise_click",
    "parse_revise_submission",
    "parse_revoke_click",
    "parse_slash",
    "parse_submission",
]

ACTIONS: tuple[DecisionKind, ...] = HUMAN_DECISIONS
"""The buttons on a review: a person's decisions, ``countersign:<decision>``."""

MODAL_ACTIONS = tuple(k for k in ACTIONS if k != DecisionKind.APPROVE)
"""The buttons that open a modal (approving needs no words)."""

REVISE = "revise"
CLAIM = "claim"
"""The button that claims a review for whoever clicks; its value is the review id."""
REASSIGN = "reassign"
"""The button (and modal) that hands a review to another reviewer; its value is the review id."""
APPROVE_ALL = "approve_all"
"""The button that approves a gated call and grants a standing approval of the tool's later
calls in the run; its value is the review id."""
REVOKE = "revoke_standing"
"""The button that revokes a standing approval; its value is the standing approval's id."""
"""The button (and modal) that re-opens an earlier task of a run; its value is the run id.
Not a decision on a review: it reopens one decided before."""

ACTION_PREFIX = "countersign:"
MODAL_PREFIX = "countersign:modal:"
BUTTON_PATTERN = re.compile(rf"^{ACTION_PREFIX}({'|'.join(ACTIONS)})$")
"""The ``action_id`` of a review's buttons (not "Revise", which belongs to the run)."""
MODAL_PATTERN = re.compile(rf"^{MODAL_PREFIX}({'|'.join(MODAL_ACTIONS)})$")
"""The ``callback_id`` of a review's modals."""
ARG_PREFIX = "arg:"
"""The ``block_id`` prefix of a tool argument's input in the edit modal: ``arg:amount``."""
MAX_ARG_NAME = 255 - len(ARG_PREFIX)  # a block_id holds at most 255 chars

_ID = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
_COMMAND = re.compile(r"/[^\s/]{1,31}")
_URL = re.compile(r"https?://[^\s]{1,2000}")
_TASK_INDEX = re.compile(r"\d{1,6}")
_MESSAGE_EVENTS = frozenset({"message", "app_mention"})
# Slack caps private_metadata at 3000 chars; longer cannot be ours.
_MAX_METADATA = 3000


class PayloadError(BotError, ValueError):
    """A payload this bot does not understand or does not trust; the message says why."""


def action_id(action: str) -> str:
    """The ``action_id`` of a review button, e.g. ``countersign:approve``."""
    return ACTION_PREFIX + action


def callback_id(action: str) -> str:
    """The ``callback_id`` of a review modal, e.g. ``countersign:modal:changes``."""
    return MODAL_PREFIX + action


def arg_block_id(name: str) -> str:
    """The ``block_id`` of a tool argument's input in the edit modal, e.g. ``arg:amount``."""
    return ARG_PREFIX + name


@dataclass(frozen=True)
class ButtonClick:
    """A click on one of a review's buttons (``block_actions``)."""

    action: DecisionKind
    review_id: str
    user_id: str
    channel_id: str | None
    message_ts: str | None
    trigger_id: str | None
    thread_ts: str | None = None


@dataclass(frozen=True)
class ModalSubmission:
    """A submitted review modal (``view_submission``); ``text`` is ``""`` when left empty.

    ``fields`` holds the texts of a tool call's edit modal by argument name (``""`` for an
    input left empty); it is empty for every other modal, whose words are in ``text``.
    """

    action: DecisionKind
    review_id: str
    user_id: str
    text: str
    view_id: str
    channel_id: str | None
    message_ts: str | None
    fields: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ReviseClick:
    """A click on "Revise an earlier task" (a review message, or ``/crew status``)."""

    run_id: str
    user_id: str
    channel_id: str | None
    message_ts: str | None
    trigger_id: str | None


@dataclass(frozen=True)
class ClaimClick:
    """A click on a review's "Claim" (``reassign`` False) or "Reassign" button."""

    reassign: bool
    review_id: str
    user_id: str
    channel_id: str | None
    message_ts: str | None
    trigger_id: str | None
    thread_ts: str | None = None


@dataclass(frozen=True)
class RevokeClick:
    """A click on a standing approval's "Revoke" button, in its message in the run's thread."""

    standing_id: str
    user_id: str
    channel_id: str | None
    message_ts: str | None


@dataclass(frozen=True)
class ReassignSubmission:
    """The submitted "Reassign" modal: who ``user_id`` hands the review to (``to``)."""

    review_id: str
    user_id: str
    to: str
    view_id: str


@dataclass(frozen=True)
class ReviseSubmission:
    """The submitted "Revise an earlier task" modal.

    ``task_index`` is ``None`` when no task was chosen; ``feedback`` is ``""`` when empty.
    """

    run_id: str
    user_id: str
    task_index: int | None
    feedback: str
    view_id: str
    channel_id: str | None
    message_ts: str | None


@dataclass(frozen=True)
class ThreadMessage:
    """A ``message`` or ``app_mention`` event; ``text`` is as Slack sent it (escaped)."""

    event_id: str | None
    channel_id: str
    ts: str
    thread_ts: str | None
    user_id: str | None
    bot_id: str | None
    subtype: str | None
    text: str


@dataclass(frozen=True)
class SlashCommand:
    """A slash command's form fields; ``text`` is as Slack sent it (escaped)."""

    command: str
    text: str
    user_id: str
    channel_id: str
    trigger_id: str | None
    response_url: str | None


def parse_button(body: Mapping[str, Any]) -> ButtonClick:
    """A ``block_actions`` payload of a click on ``countersign:<action>``.

    The button's ``value`` is the review id, never text. The message to
    update comes from ``container`` (falling back to ``channel``/``message``).
    """
    body, clicked = _click(body)
    action = _decision(
        _str(clicked, "action_id", "actions[0]"), ACTION_PREFIX, ACTIONS, "action_id"
    )
    return ButtonClick(action=action, **_on_review(body, clicked))


def _on_review(body: Mapping[str, Any], clicked: Mapping[str, Any]) -> dict[str, Any]:
    """What every click on a review's button says: the review (the button's value), who
    clicked, and the message clicked in."""
    channel_id, message_ts = _clicked_message(body)
    return {
        "review_id": _id(clicked, "value", "actions[0]"),
        "user_id": _user(body),
        "channel_id": channel_id,
        "message_ts": message_ts,
        "trigger_id": _optional_id(body, "trigger_id", "payload"),
        "thread_ts": _first_id(
            (_optional_mapping(body, "container"), "thread_ts"),
            (_optional_mapping(body, "message"), "thread_ts"),
        ),
    }


def parse_revise_click(body: Mapping[str, Any]) -> ReviseClick:
    """A ``block_actions`` payload of a click on ``countersign:revise``.

    Unlike a review's buttons, this one belongs to the run: its ``value`` is the run id.
    """
    body, clicked = _click(body)
    _suffix(_str(clicked, "action_id", "actions[0]"), ACTION_PREFIX, (REVISE,), "action_id")
    channel_id, message_ts = _clicked_message(body)
    return ReviseClick(
        run_id=_id(clicked, "value", "actions[0]"),
        user_id=_user(body),
        channel_id=channel_id,
        message_ts=message_ts,
        trigger_id=_optional_id(body, "trigger_id", "payload"),
    )


def parse_submission(body: Mapping[str, Any]) -> ModalSubmission:
    """A ``view_submission`` of a review modal (``callback_id`` ``countersign:modal:<action>``).

    The modal carries no channel of its own, so the review id and the message to update
    travel in ``private_metadata`` as JSON; the text is ``state.values.text.value.value``.
    A tool call's edit modal has ``arg:<name>`` inputs instead, read into ``fields``.
    """
    body, view, meta = _view(body)
    action = _decision(
        _str(view, "callback_id", "view"), MODAL_PREFIX, MODAL_ACTIONS, "callback_id"
    )
    values = _state_values(view)
    joins = long_text.joins_of(meta.get("joins", {}))
    if joins is None:
        raise PayloadError("view.private_metadata.joins must map inputs to lists of strings")
    texts = {
        key: _input_text(values, key, f"value{key[4:]}" if key.startswith("text") else key)
        for key in values
        if isinstance(key, str) and (key.startswith(ARG_PREFIX) or key.startswith("text"))
    }
    fields = {
        key[len(ARG_PREFIX) :]: long_text.read(texts, key, joins)
        for key in texts
        if key.startswith(ARG_PREFIX) and not long_text.is_part(key)
    }
    if any(not 0 < len(name) <= MAX_ARG_NAME for name in fields):
        raise PayloadError("view.state.values has an argument with no name or a too long one")
    text = "" if fields and "text" not in values else long_text.read(texts, "text", joins)
    if "text" not in values and not fields:
        _input_text(values, "text")  # says what is missing
    return ModalSubmission(
        action=action,
        review_id=_id(meta, "review_id", "private_metadata"),
        user_id=_user(body),
        text=text,
        view_id=_id(view, "id", "view"),
        channel_id=_optional_id(meta, "channel_id", "private_metadata"),
        message_ts=_optional_id(meta, "message_ts", "private_metadata"),
        fields=fields,
    )


def parse_revise_submission(body: Mapping[str, Any]) -> ReviseSubmission:
    """A ``view_submission`` of the "Revise an earlier task" modal.

    ``private_metadata`` carries the run id; the chosen task is the option value (its
    index) of ``state.values.task.task``, the feedback ``state.values.text.value``.
    """
    body, view, meta = _view(body)
    _suffix(_str(view, "callback_id", "view"), MODAL_PREFIX, (REVISE,), "callback_id")
    values = _state_values(view)
    chosen = _input_text(values, "task", "task")
    if chosen and not _TASK_INDEX.fullmatch(chosen):
        raise PayloadError(f"the chosen task is not a task index: {_show(chosen)}")
    return ReviseSubmission(
        run_id=_id(meta, "run_id", "private_metadata"),
        user_id=_user(body),
        task_index=int(chosen) if chosen else None,
        feedback=_input_text(values, "text"),
        view_id=_id(view, "id", "view"),
        channel_id=_optional_id(meta, "channel_id", "private_metadata"),
        message_ts=_optional_id(meta, "message_ts", "private_metadata"),
    )


def parse_claim_click(body: Mapping[str, Any]) -> ClaimClick:
    """A click on a review's "Claim" or "Reassign" button, whose ``value`` is the review id."""
    body, clicked = _click(body)
    action = _suffix(
        _str(clicked, "action_id", "actions[0]"), ACTION_PREFIX, (CLAIM, REASSIGN), "action_id"
    )
    return ClaimClick(reassign=action == REASSIGN, **_on_review(body, clicked))


def parse_approve_all(body: Mapping[str, Any]) -> ClaimClick:
    """A click on a review's "Approve all … calls" button, whose ``value`` is the review id
    (read like a claim: ``reassign`` is False)."""
    body, clicked = _click(body)
    _suffix(_str(clicked, "action_id", "actions[0]"), ACTION_PREFIX, (APPROVE_ALL,), "action_id")
    return ClaimClick(reassign=False, **_on_review(body, clicked))


def parse_revoke_click(body: Mapping[str, Any]) -> RevokeClick:
    """A click on a standing approval's "Revoke" button, whose ``value`` is its id."""
    body, clicked = _click(body)
    _suffix(_str(clicked, "action_id", "actions[0]"), ACTION_PREFIX, (REVOKE,), "action_id")
    channel_id, message_ts = _clicked_message(body)
    return RevokeClick(
        standing_id=_id(clicked, "value", "actions[0]"),
        user_id=_user(body),
        channel_id=channel_id,
        message_ts=message_ts,
    )


def parse_reassign_submission(body: Mapping[str, Any]) -> ReassignSubmission:
    """A ``view_submission`` of the "Reassign" modal: the review id in ``private_metadata``,
    the chosen person in ``state.values.to.to.selected_user`` (the input is required, so
    Slack sends none without it)."""
    body, view, meta = _view(body)
    _suffix(_str(view, "callback_id", "view"), MODAL_PREFIX, (REASSIGN,), "callback_id")
    values = _state_values(view)
    where = "view.state.values.to.to"
    entry = _mapping(_mapping(values.get("to"), "view.state.values.to").get("to"), where)
    return ReassignSubmission(
        review_id=_id(meta, "review_id", "private_metadata"),
        user_id=_user(body),
        to=_id(entry, "selected_user", where),
        view_id=_id(view, "id", "view"),
    )


def parse_message_event(body: Mapping[str, Any]) -> ThreadMessage:
    """The ``message``/``app_mention`` event inside an ``event_callback`` envelope.

    ``user_id``, ``bot_id`` and ``subtype`` are reported, not judged: the listener
    ignores bots and edits, and dedupes on ``event_id`` and ``(channel, ts)``.
    """
    body = _mapping(body, "envelope")
    _expect(body, "type", "event_callback")
    event = _mapping(body.get("event"), "event")
    kind = event.get("type")
    if not isinstance(kind, str) or kind not in _MESSAGE_EVENTS:
        raise PayloadError(f"event.type must be message or app_mention, not {_show(kind)}")
    text = event.get("text")
    if text is not None and not isinstance(text, str):
        raise PayloadError("event.text must be a string")
    return ThreadMessage(
        event_id=_optional_id(body, "event_id", "envelope"),
        channel_id=_id(event, "channel", "event"),
        ts=_id(event, "ts", "event"),
        thread_ts=_optional_id(event, "thread_ts", "event"),
        user_id=_optional_id(event, "user", "event"),
        bot_id=_optional_id(event, "bot_id", "event"),
        subtype=_optional_id(event, "subtype", "event"),
        text=text or "",
    )


def parse_slash(body: Mapping[str, Any]) -> SlashCommand:
    """A slash command's fields (form body over HTTP, a dict in Socket Mode).

    A missing ``text`` reads as ``""`` (the command typed alone).
    """
    body = _mapping(body, "command")
    command = _str(body, "command", "command")
    if not _COMMAND.fullmatch(command):
        raise PayloadError(f"command must look like /name, not {_show(command)}")
    text = body.get("text", "")
    if not isinstance(text, str):
        raise PayloadError("command.text must be a string")
    response_url = body.get("response_url")
    if response_url is not None and (
        not isinstance(response_url, str) or not _URL.fullmatch(response_url)
    ):
        raise PayloadError("command.response_url must be an http(s) URL")
    return SlashCommand(
        command=command,
        text=text,
        user_id=_id(body, "user_id", "command"),
        channel_id=_id(body, "channel_id", "command"),
        trigger_id=_optional_id(body, "trigger_id", "command"),
        response_url=response_url,
    )


# --- checked access ---------------------------------------------------------------------------


def _show(value: Any) -> str:
    """A value for an error message: short, and never a huge or hostile repr."""
    shown = repr(value) if isinstance(value, str | int | float | bool | None) else type(value)
    return str(shown)[:80]


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise PayloadError(f"{where} must be an object")
    return value


def _optional_mapping(body: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    value = body.get(key)
    if value is None:
        return None
    return _mapping(value, key)


def _expect(body: Mapping[str, Any], key: str, wanted: str) -> None:
    if body.get(key) != wanted:
        raise PayloadError(f"{key} must be {wanted!r}, not {_show(body.get(key))}")


def _str(body: Mapping[str, Any], key: str, where: str) -> str:
    value = body.get(key)
    if not isinstance(value, str):
        raise PayloadError(f"{where}.{key} must be a string")
    return value


def _id(body: Mapping[str, Any], key: str, where: str) -> str:
    value = _str(body, key, where)
    if not _ID.fullmatch(value):
        raise PayloadError(f"{where}.{key} is not a valid id: {_show(value)}")
    return value


def _optional_id(body: Mapping[str, Any], key: str, where: str) -> str | None:
    if body.get(key) is None:
        return None
    return _id(body, key, where)


def _first_id(*places: tuple[Mapping[str, Any] | None, str]) -> str | None:
    for mapping, key in places:
        if mapping is not None and mapping.get(key) is not None:
            return _id(mapping, key, key)
    return None


def _user(body: Mapping[str, Any]) -> str:
    return _id(_mapping(body.get("user"), "user"), "id", "user")


def _suffix(value: str, prefix: str, allowed: tuple[str, ...], what: str) -> str:
    action = value[len(prefix) :] if value.startswith(prefix) else None
    if action is None or action not in allowed:
        raise PayloadError(f"{what} {_show(value)} is not one of ours")
    return action


def _decision(
    value: str, prefix: str, allowed: tuple[DecisionKind, ...], what: str
) -> DecisionKind:
    return DecisionKind(_suffix(value, prefix, allowed, what))


def _click(body: Mapping[str, Any]) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """The ``block_actions`` payload and the element that was clicked."""
    body = _mapping(body, "payload")
    _expect(body, "type", "block_actions")
    actions = body.get("actions")
    if not isinstance(actions, list) or not actions:
        raise PayloadError("block_actions: 'actions' must be a non-empty list")
    return body, _mapping(actions[0], "actions[0]")


def _clicked_message(body: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """The channel and ts of the message clicked in, from ``container`` or the older keys."""
    container = _optional_mapping(body, "container")
    channel = _optional_mapping(body, "channel")
    message = _optional_mapping(body, "message")
    return (
        _first_id((container, "channel_id"), (channel, "id")),
        _first_id((container, "message_ts"), (message, "ts")),
    )


def _view(
    body: Mapping[str, Any],
) -> tuple[Mapping[str, Any], Mapping[str, Any], Mapping[str, Any]]:
    """A ``view_submission`` payload, its view and its decoded ``private_metadata``."""
    body = _mapping(body, "payload")
    _expect(body, "type", "view_submission")
    view = _mapping(body.get("view"), "view")
    raw = _str(view, "private_metadata", "view")
    if len(raw) > _MAX_METADATA:
        raise PayloadError("view.private_metadata is longer than Slack allows")
    try:
        decoded = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise PayloadError("view.private_metadata is not JSON") from exc
    return body, view, _mapping(decoded, "view.private_metadata")


def _state_values(view: Mapping[str, Any]) -> Mapping[str, Any]:
    state = _mapping(view.get("state"), "view.state")
    return _mapping(state.get("values"), "view.state.values")


def _input_text(values: Mapping[str, Any], block_id: str, action: str = "value") -> str:
    """What a person entered in the input ``block_id``'s element ``action``; ``""`` if nothing.

    A text input's ``value``, or a menu's chosen option value.
    """
    block = f"view.state.values.{block_id[:80]}"
    where = f"{block}.{action[:80]}"
    entry = _mapping(_mapping(values.get(block_id), block).get(action), where)
    if "selected_option" in entry:
        option = entry["selected_option"]
        return "" if option is None else _str(_mapping(option, where), "value", where)
    text = entry.get("value")
    if text is not None and not isinstance(text, str):
        raise PayloadError(f"{where}.value must be a string")
    return text or ""
