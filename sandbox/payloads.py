"""The payloads Slack sends to an app, built from the workspace's state.

Why from state and not hand-written JSON: a ``block_actions`` click is built from the
message the bot actually posted (its blocks, ts, thread), and a ``view_submission`` from
the modal the bot actually opened, so a test of "click Approve" fails when the bot never
posted that button. Shapes follow Slack's reference pages.

Pure functions over read-only state; nothing here sends anything.
"""

from __future__ import annotations

import copy
import re
import secrets
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

from sandbox.errors import MessageChanged, PersonActionRefused
from sandbox.workspace import Channel, Workspace

__all__ = [
    "escape_command",
    "event_callback",
    "find_element",
    "human_message",
    "interaction_base",
    "message_event",
    "slash_command",
    "view_state",
]

Json = dict[str, Any]

VALUE_ELEMENTS = frozenset(
    {"plain_text_input", "email_text_input", "url_text_input", "number_input"}
)
SINGLE_KEYS = {
    "users_select": "selected_user",
    "conversations_select": "selected_conversation",
    "channels_select": "selected_channel",
    "datepicker": "selected_date",
    "timepicker": "selected_time",
    "datetimepicker": "selected_date_time",
}
MULTI_KEYS = {
    "multi_users_select": "selected_users",
    "multi_conversations_select": "selected_conversations",
    "multi_channels_select": "selected_channels",
}


# What Slack recognises in a command's text: @handle, #channel, a link.
_TYPED_MARKUP = re.compile(r"(?<![\w@#/])([@#])([a-z0-9._-]+)|\bhttps?://[^\s<>|\"']+")
_SPECIAL = frozenset({"here", "channel", "everyone"})


def escape_command(ws: Workspace, text: str, *, should_escape: bool) -> str:
    """A slash command's text as Slack sends it: ``&``, ``<`` and ``>`` always as entities;
    with the manifest's ``should_escape``, also a workspace user's ``@handle`` as
    ``<@U…|handle>``, a channel's ``#name`` as ``<#C…|name>``, ``@here`` as ``<!here>`` and
    a link as ``<https://…>``. Handles and names the workspace does not know stay text."""

    def entities(part: str) -> str:
        return part.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")

    if not should_escape:
        return entities(text)
    out: list[str] = []
    pos = 0
    for found in _TYPED_MARKUP.finditer(text):
        sigil, name = found[1], found[2]
        if sigil is None:
            markup = f"<{entities(found[0])}>"
        elif sigil == "@" and name in _SPECIAL:
            markup = f"<!{name}>"
        elif sigil == "@":
            users = [u for u in ws.users.values() if u.name == name]
            markup = f"<@{users[0].id}|{name}>" if users else entities(found[0])
        else:
            channels = [c for c in ws.channels.values() if c.name == name and not c.is_im]
            markup = f"<#{channels[0].id}|{name}>" if channels else entities(found[0])
        out += [entities(text[pos : found.start()]), markup]
        pos = found.end()
    out.append(entities(text[pos:]))
    return "".join(out)


def _user(ws: Workspace, user_id: str) -> Json:
    user = ws.user(user_id)
    return {"id": user.id, "username": user.name, "name": user.name, "team_id": ws.team_id}


def channel_type(channel: Channel) -> str:
    return "im" if channel.is_im else "group" if channel.is_private else "channel"


def slash_command(
    ws: Workspace,
    *,
    user: str,
    channel: Channel,
    command: str,
    text: str,
    response_url: str,
    trigger_id: str,
) -> dict[str, str]:
    """The form fields of a slash command (no ``payload=`` wrapper)."""
    return {
        "token": "legacy-verification-token",
        "team_id": ws.team_id,
        "team_domain": "sandbox",
        "channel_id": channel.id,
        "channel_name": channel.name,
        "user_id": user,
        "user_name": ws.user(user).name,
        "command": command,
        "text": text,
        "api_app_id": ws.app_id,
        "is_enterprise_install": "false",
        "response_url": response_url,
        "trigger_id": trigger_id,
    }


def interaction_base(ws: Workspace, kind: str, user: str, trigger_id: str) -> Json:
    """The fields every interactivity payload has."""
    return {
        "type": kind,
        "user": _user(ws, user),
        "api_app_id": ws.app_id,
        "token": "legacy-verification-token",
        "trigger_id": trigger_id,
        "team": {"id": ws.team_id, "domain": "sandbox"},
        "enterprise": None,
        "is_enterprise_install": False,
    }


def _elements(blocks: Any) -> Iterator[tuple[Json, Json]]:
    for block in blocks if isinstance(blocks, list) else []:
        found = list(block.get("elements", [])) if block.get("type") == "actions" else []
        found += [block[k] for k in ("accessory", "element") if isinstance(block.get(k), dict)]
        for element in found:
            yield block, element


def find_element(blocks: Any, action_id: str, block_id: str | None = None) -> tuple[Json, Json]:
    """The (block, element) with ``action_id``; refused when it is not there."""
    for block, element in _elements(blocks):
        if element.get("action_id") == action_id and block_id in (None, block.get("block_id")):
            return block, element
    raise MessageChanged(f"no element with action_id {action_id!r} in these blocks")


def action(block: Json, element: Json, action_ts: str, selected: str | None) -> Json:
    """One entry of ``actions`` in a ``block_actions`` payload."""
    entry: Json = {
        "action_id": element["action_id"],
        "block_id": block["block_id"],
        "type": element["type"],
        "action_ts": action_ts,
    }
    if element["type"] == "button":
        for key in ("text", "value", "style", "url"):
            if key in element:
                entry[key] = copy.deepcopy(element[key])
    elif element["type"] in ("static_select", "overflow", "radio_buttons"):
        if selected is None:
            raise PersonActionRefused("choosing from a menu needs the option's value")
        entry["selected_option"] = _option(element, selected)
    else:
        raise PersonActionRefused(f"clicking a {element['type']} is not supported")
    return entry


def _options(element: Mapping[str, Any]) -> list[Json]:
    options = list(element.get("options") or [])
    for group in element.get("option_groups") or []:
        options += group.get("options", [])
    return options


def _option(element: Mapping[str, Any], value: str) -> Json:
    for option in _options(element):
        if option.get("value") == value:
            return copy.deepcopy(option)
    raise PersonActionRefused(f"{element.get('action_id')!r} has no option {value!r}")


def _state_entry(element: Json, given: Any) -> tuple[Json, bool]:
    """``state.values[block][action]`` for what a person entered; and whether it is empty."""
    kind = element["type"]
    entry: Json = {"type": kind}
    if kind in VALUE_ELEMENTS:
        value = given if given is not None else element.get("initial_value")
        bounds = (element.get("min_length", 0), element.get("max_length", 3000))
        if value and kind == "plain_text_input" and not bounds[0] <= len(str(value)) <= bounds[1]:
            raise PersonActionRefused(f"{element['action_id']!r}: length out of bounds")
        entry["value"] = None if value in (None, "") else str(value)
        return entry, entry["value"] is None
    if kind in ("static_select", "radio_buttons", "external_select"):
        if given is None:
            option = element.get("initial_option")
        else:
            option = _option(element, given) if kind != "external_select" else given
        entry["selected_option"] = option
        return entry, option is None
    if kind in ("multi_static_select", "checkboxes"):
        chosen = (
            [_option(element, v) for v in given]
            if given is not None
            else element.get("initial_options", [])
        )
        entry["selected_options"] = chosen
        return entry, not chosen
    if kind in SINGLE_KEYS:
        key = SINGLE_KEYS[kind]
        entry[key] = given if given is not None else element.get(f"initial_{key[9:]}")
        return entry, entry[key] is None
    if kind in MULTI_KEYS:
        key = MULTI_KEYS[kind]
        entry[key] = list(given) if given is not None else element.get(f"initial_{key[9:]}", [])
        return entry, not entry[key]
    if kind == "rich_text_input":
        text = given if given is not None else ""
        section = {"type": "rich_text_section", "elements": [{"type": "text", "text": text}]}
        entry["rich_text_value"] = {"type": "rich_text", "elements": [section] if text else []}
        return entry, not text
    raise PersonActionRefused(f"entering a value in a {kind} is not supported")


def view_state(view: Json, inputs: Mapping[str, Any]) -> Json:
    """``view.state`` after a person filled the modal's inputs.

    Args:
        view: the view as stored (with block_ids and action_ids).
        inputs: what the person entered, keyed by ``block_id`` (or by ``action_id``): a
            string for text inputs, an option value for menus and radio buttons, a list of
            values for multi-selects and checkboxes, an id for user/channel selects.

    Raises:
        PersonActionRefused: an unknown key, an option that is not offered, a required
            input left empty, or a text outside min/max length, which Slack's client
            would not let a person submit.
    """
    values: Json = {}
    used: set[str] = set()
    for block, element in _elements(view.get("blocks")):
        if block.get("type") != "input" and element.get("type") in ("button", "overflow"):
            continue
        keys = [block["block_id"], element.get("action_id", "")]
        key = next((k for k in keys if k in inputs), None)
        if key is None and block.get("type") != "input":
            continue
        entry, empty = _state_entry(element, inputs[key] if key else None)
        if key:
            used.add(key)
        if empty and block.get("type") == "input" and not block.get("optional", False):
            raise PersonActionRefused(f"input {block['block_id']!r} is required")
        values.setdefault(block["block_id"], {})[element["action_id"]] = entry
    unknown = set(inputs) - used
    if unknown:
        raise PersonActionRefused(f"the modal has no input {sorted(unknown)!r}")
    return {"values": values}


def human_message(ws: Workspace, text: str) -> Json:
    """The fields of a message typed by a person in Slack's client."""
    section = {"type": "rich_text_section", "elements": [{"type": "text", "text": text}]}
    return {
        "text": text,
        "client_msg_id": str(uuid.uuid4()),
        "blocks": [
            {"type": "rich_text", "block_id": secrets.token_urlsafe(4), "elements": [section]}
        ],
    }


def message_event(channel: Channel, message: Json, kind: str = "message") -> Json:
    """A ``message`` (or ``app_mention``) event for a stored message."""
    event = {
        k: copy.deepcopy(v)
        for k, v in message.items()
        if k not in ("reply_count", "reply_users", "reply_users_count", "latest_reply")
    }
    event.update(type=kind, channel=channel.id, event_ts=message["ts"])
    if kind == "message":
        event["channel_type"] = channel_type(channel)
    return event


def app_home_opened(ws: Workspace, user: str, tab: str) -> Json:
    """The ``app_home_opened`` event of ``user`` opening the app's ``tab`` ("home" or
    "messages"): the DM's channel, and the Home view last published to them, if any."""
    event: Json = {
        "type": "app_home_opened",
        "user": user,
        "channel": ws.channel(user).id,
        "tab": tab,
        "event_ts": ws.next_ts(),
    }
    published = ws.home_view(user)
    if tab == "home" and published is not None:
        event["view"] = copy.deepcopy(published.view)
    return event


def event_callback(ws: Workspace, event: Json, event_id: str, event_time: int) -> Json:
    """The Events API envelope Slack posts for ``event``."""
    return {
        "token": "legacy-verification-token",
        "team_id": ws.team_id,
        "api_app_id": ws.app_id,
        "event": event,
        "type": "event_callback",
        "event_id": event_id,
        "event_time": event_time,
        "authorizations": [
            {
                "enterprise_id": None,
                "team_id": ws.team_id,
                "user_id": ws.bot_user_id,
                "is_bot": True,
                "is_enterprise_install": False,
            }
        ],
        "is_ext_shared_channel": False,
        "event_context": "4-" + secrets.token_urlsafe(12),
    }
