"""Slack's payloads turned into small typed values, or a ``PayloadError``.

Why: a listener should not dig through nested dicts, and it must never crash on what
arrives over the network. Every field a listener uses is checked here once, the way
bolt's ``request/payload_utils.py`` reads payloads without I/O. Shapes follow
notes/slack-platform.md §3.

Ids (users, channels, timestamps, trigger ids, review ids) must be 1-64 characters of
``[A-Za-z0-9_.:-]``: every real one is, and anything else is refused before it reaches
storage, a log line or a message. Optional fields may be absent or ``null``; when present
they are checked like required ones.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ACTIONS",
    "ACTION_PREFIX",
    "MODAL_ACTIONS",
    "MODAL_PREFIX",
    "ButtonClick",
    "ModalSubmission",
    "PayloadError",
    "SlashCommand",
    "ThreadMessage",
    "action_id",
    "callback_id",
    "parse_button",
    "parse_message_event",
    "parse_slash",
    "parse_submission",
]

ACTIONS = ("approve", "edit", "changes", "reject", "answer")
"""The buttons on a review; the same words as ``DecisionKind`` values."""

MODAL_ACTIONS = ("edit", "changes", "reject", "answer")
"""The buttons that open a modal (approving needs no words)."""

ACTION_PREFIX = "countersign:"
MODAL_PREFIX = "countersign:modal:"

_ID = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
_COMMAND = re.compile(r"/[^\s/]{1,31}")
_URL = re.compile(r"https?://[^\s]{1,2000}")
_MESSAGE_EVENTS = frozenset({"message", "app_mention"})
# Slack caps private_metadata at 3000 chars; longer cannot be ours.
_MAX_METADATA = 3000


class PayloadError(ValueError):
    """A payload this bot does not understand or does not trust; the message says why."""


def action_id(action: str) -> str:
    """The ``action_id`` of a review button, e.g. ``countersign:approve``."""
    return ACTION_PREFIX + action


def callback_id(action: str) -> str:
    """The ``callback_id`` of a review modal, e.g. ``countersign:modal:changes``."""
    return MODAL_PREFIX + action


@dataclass(frozen=True)
class ButtonClick:
    """A click on one of a review's buttons (``block_actions``)."""

    action: str
    review_id: str
    user_id: str
    channel_id: str | None
    message_ts: str | None
    trigger_id: str | None


@dataclass(frozen=True)
class ModalSubmission:
    """A submitted review modal (``view_submission``); ``text`` is ``""`` when left empty."""

    action: str
    review_id: str
    user_id: str
    text: str
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

    The button's ``value`` is the review id, never text (notes §0.4). The message to
    update comes from ``container`` (falling back to ``channel``/``message``).
    """
    body = _mapping(body, "payload")
    _expect(body, "type", "block_actions")
    actions = body.get("actions")
    if not isinstance(actions, list) or not actions:
        raise PayloadError("block_actions: 'actions' must be a non-empty list")
    clicked = _mapping(actions[0], "actions[0]")
    clicked_id = _str(clicked, "action_id", "actions[0]")
    action = _suffix(clicked_id, ACTION_PREFIX, ACTIONS, "action_id")
    container = _optional_mapping(body, "container")
    channel = _optional_mapping(body, "channel")
    message = _optional_mapping(body, "message")
    return ButtonClick(
        action=action,
        review_id=_id(clicked, "value", "actions[0]"),
        user_id=_user(body),
        channel_id=_first_id((container, "channel_id"), (channel, "id")),
        message_ts=_first_id((container, "message_ts"), (message, "ts")),
        trigger_id=_optional_id(body, "trigger_id", "payload"),
    )


def parse_submission(body: Mapping[str, Any]) -> ModalSubmission:
    """A ``view_submission`` of a review modal (``callback_id`` ``countersign:modal:<action>``).

    The modal carries no channel of its own, so the review id and the message to update
    travel in ``private_metadata`` as JSON; the text is ``state.values.text.value.value``.
    """
    body = _mapping(body, "payload")
    _expect(body, "type", "view_submission")
    view = _mapping(body.get("view"), "view")
    action = _suffix(_str(view, "callback_id", "view"), MODAL_PREFIX, MODAL_ACTIONS, "callback_id")
    raw = _str(view, "private_metadata", "view")
    if len(raw) > _MAX_METADATA:
        raise PayloadError("view.private_metadata is longer than Slack allows")
    try:
        decoded = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise PayloadError("view.private_metadata is not JSON") from exc
    meta = _mapping(decoded, "view.private_metadata")
    state = _mapping(view.get("state"), "view.state")
    values = _mapping(state.get("values"), "view.state.values")
    entry = _mapping(
        _mapping(values.get("text"), "view.state.values.text").get("value"),
        "view.state.values.text.value",
    )
    text = entry.get("value")
    if text is not None and not isinstance(text, str):
        raise PayloadError("view.state.values.text.value.value must be a string")
    return ModalSubmission(
        action=action,
        review_id=_id(meta, "review_id", "private_metadata"),
        user_id=_user(body),
        text=text or "",
        view_id=_id(view, "id", "view"),
        channel_id=_optional_id(meta, "channel_id", "private_metadata"),
        message_ts=_optional_id(meta, "message_ts", "private_metadata"),
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
