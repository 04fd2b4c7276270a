"""The Web API methods the bot uses, answered from and applied to the workspace.

Why here and not in the server: each method is a function of (workspace, decoded params)
that returns Slack's response body or raises ``SlackApiFailure`` with Slack's error code.
The HTTP layer (auth, fault injection, recording) stays in ``server.py``, so the rules of
each method can be read in one place and called from tests without a socket.

Methods: auth.test, chat.postMessage, chat.update, chat.delete, chat.postEphemeral,
chat.getPermalink, conversations.info, conversations.members, conversations.open (a DM with
one person, as Slack's ``users=U…``), conversations.history,
conversations.replies, users.info, usergroups.users.list, views.open, views.update,
views.push, views.publish (a person's Home tab), files.getUploadURLExternal,
files.completeUploadExternal, files.info, apps.connections.open.

Message metadata (``metadata={"event_type": ..., "event_payload": {...}}``) is kept with the
message, and listed by conversations.history and conversations.replies only when asked
with ``include_all_metadata``, as Slack does. Like Slack, metadata whose ``event_type`` is
not letters, digits, ``_`` and ``-``, or whose ``event_payload`` is not an object, is
dropped with an ``invalid_metadata_schema`` warning while the message is posted; metadata
that is not a JSON object at all fails the call with ``invalid_metadata_format``.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from sandbox.blockkit import Problem, validate_blocks, validate_view
from sandbox.errors import SlackApiFailure
from sandbox.scopes import BY_KIND, Grants
from sandbox.workspace import Channel, Ephemeral, StoredFile, Workspace, ensure_ids

__all__ = ["APP_TOKEN_METHODS", "METHODS", "WebApi"]

Json = dict[str, Any]

MAX_POST_TEXT = 40_000  # chat.postMessage text (the brief: reject with msg_too_long)
MAX_UPDATE_TEXT = 4_000  # chat.update: "text cannot exceed 4,000 characters"
MAX_PUSHED_VIEWS = 3  # views.push: push_limit_reached beyond a stack of three
MAX_HISTORY_LIMIT = 999  # conversations.history: "maximum of 999"
MAX_REPLIES_LIMIT = 1000
EVENT_TYPE = re.compile(r"[A-Za-z0-9_-]+")  # "letters, numbers, underscores, and hyphens"
APP_TOKEN_METHODS = frozenset({"apps.connections.open"})


def fail_on(problems: list[Problem]) -> None:
    """Raise Slack's error for the first problem's code, listing every problem."""
    if problems:
        raise SlackApiFailure(problems[0].code, [p.slack_line() for p in problems])


def decoded(params: Mapping[str, Any], key: str) -> Any:
    """A structured argument: a list/dict from JSON bodies, a JSON string from form bodies."""
    value = params.get(key)
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            code = "invalid_blocks_format" if key == "blocks" else "invalid_arguments"
            raise SlackApiFailure(code, [f"[ERROR] {key} is not valid JSON"]) from None
    return value


def flag(params: Mapping[str, Any], key: str) -> bool:
    return params.get(key) in (True, "1", "true", 1)


class WebApi:
    """Applies Web API calls to a workspace.

    Args:
        workspace: the state the calls read and change.
        base_url: the stand-in's root URL (``http://127.0.0.1:PORT/``), for upload URLs.
        socket_url: builds a fresh Socket Mode URL for ``apps.connections.open``.
        grants: the scopes the app was installed with (``sandbox.scopes``): a method
            called without the one it needs is answered ``missing_scope``.
    """

    def __init__(
        self,
        workspace: Workspace,
        base_url: Callable[[], str],
        socket_url: Callable[[], str],
        grants: Grants | None = None,
    ) -> None:
        self.ws = workspace
        self.base_url = base_url
        self.socket_url = socket_url
        self.grants = grants or Grants.everything()

    def call(self, method: str, params: Mapping[str, Any]) -> Json:
        handler = METHODS.get(method)
        if handler is None:
            raise SlackApiFailure("unknown_method")
        needed = self.grants.missing(method, self._kind(method, params))
        if needed is not None:
            raise SlackApiFailure("missing_scope", needed=needed, provided=self.grants.provided())
        return {"ok": True, **handler(self, params)}

    def _kind(self, method: str, params: Mapping[str, Any]) -> str | None:
        """The kind of conversation a method whose scope depends on it names (None for
        another method, or one that names no conversation: its own error says so)."""
        if method not in BY_KIND:
            return None
        try:
            channel = self.ws.channel(params.get("channel"))
        except SlackApiFailure:
            return None
        return "im" if channel.is_im else "group" if channel.is_private else "channel"

    # -- messages --------------------------------------------------------------------------

    def _message_fields(self, params: Mapping[str, Any], max_text: int) -> Json:
        text, blocks = params.get("text"), decoded(params, "blocks")
        markdown = params.get("markdown_text")
        if markdown is not None and (text or blocks):
            raise SlackApiFailure("markdown_text_conflict")
        if not text and not blocks and not markdown and not params.get("attachments"):
            raise SlackApiFailure("no_text")
        if isinstance(text, str) and len(text) > max_text:
            raise SlackApiFailure("msg_too_long")
        fields: Json = {"text": text or markdown or ""}
        if blocks is not None:
            fail_on(validate_blocks(blocks))
            fields["blocks"] = ensure_ids(blocks)
        return fields

    def _metadata(self, params: Mapping[str, Any]) -> tuple[Json | None, Json]:
        """The message metadata to store, and the warning fields of the answer, if any."""
        raw = params.get("metadata")
        if raw is None or raw == "":
            return None, {}
        try:
            metadata = json.loads(raw) if isinstance(raw, str) else raw
        except ValueError:
            metadata = None
        if not isinstance(metadata, dict):
            raise SlackApiFailure("invalid_metadata_format")
        event_type, payload = metadata.get("event_type"), metadata.get("event_payload")
        if (
            not isinstance(event_type, str)
            or not EVENT_TYPE.fullmatch(event_type)
            or not isinstance(payload, dict)
        ):
            warning = "invalid_metadata_schema"
            return None, {"warning": warning, "response_metadata": {"warnings": [warning]}}
        return {"event_type": event_type, "event_payload": payload}, {}

    def post_message(self, params: Mapping[str, Any]) -> Json:
        channel = self._postable(params.get("channel"))
        fields = self._message_fields(params, MAX_POST_TEXT)
        metadata, warned = self._metadata(params)
        if metadata is not None:
            fields["metadata"] = metadata
        thread_ts = params.get("thread_ts") or None
        message = self.ws.post(channel, self.ws.bot_user_id, fields, thread_ts=thread_ts)
        if thread_ts and flag(params, "reply_broadcast"):
            message["subtype"] = "thread_broadcast"
        return {"channel": channel.id, "ts": message["ts"], "message": message, **warned}

    def _postable(self, channel_id: Any) -> Channel:
        """The channel a post names, if the bot may post there: Slack says
        ``channel_not_found``, ``is_archived`` or ``not_in_channel`` if not."""
        channel = self.ws.channel(channel_id)
        if channel.is_archived:
            raise SlackApiFailure("is_archived")
        if self.ws.bot_user_id not in channel.members:
            raise SlackApiFailure("not_in_channel")
        return channel

    def update(self, params: Mapping[str, Any]) -> Json:
        channel = self.ws.channel(params.get("channel"))
        if channel.is_archived:
            raise SlackApiFailure("is_archived")
        self.ws.message(channel.id, params.get("ts"))
        fields = self._message_fields(params, MAX_UPDATE_TEXT)
        metadata, warned = self._metadata(params)
        if metadata is not None:
            fields["metadata"] = metadata
        message = self.ws.update(channel.id, params.get("ts"), fields)
        return {
            "channel": channel.id,
            "ts": message["ts"],
            "text": message["text"],
            "message": message,
            **warned,
        }

    def delete(self, params: Mapping[str, Any]) -> Json:
        channel = self.ws.channel(params.get("channel"))
        message = self.ws.message(channel.id, params.get("ts"))
        if message.get("user") != self.ws.bot_user_id:
            raise SlackApiFailure("cant_delete_message")
        del self.ws.messages[channel.id][message["ts"]]
        return {"channel": channel.id, "ts": message["ts"]}

    def post_ephemeral(self, params: Mapping[str, Any]) -> Json:
        channel = self.ws.channel(params.get("channel"))
        user = self.ws.user(params.get("user")).id
        if user not in channel.members:
            raise SlackApiFailure("user_not_in_channel")
        fields = self._message_fields(params, MAX_POST_TEXT)
        ts = self.ws.next_ts()
        thread_ts = params.get("thread_ts") or None
        self.ws.ephemerals.append(
            Ephemeral(user, channel.id, ts, fields["text"], fields.get("blocks", []), thread_ts)
        )
        return {"message_ts": ts}

    def permalink(self, params: Mapping[str, Any]) -> Json:
        channel = self.ws.channel(params.get("channel"))
        message = self.ws.message(channel.id, params.get("message_ts"))
        link = f"https://sandbox.slack.com/archives/{channel.id}/p{message['ts'].replace('.', '')}"
        if message.get("thread_ts") not in (None, message["ts"]):
            link += f"?thread_ts={message['thread_ts']}&cid={channel.id}"
        return {"channel": channel.id, "permalink": link}

    # -- conversations, people -------------------------------------------------------------

    def conversation_info(self, params: Mapping[str, Any]) -> Json:
        channel = self.ws.channel(params.get("channel"))
        info: Json = {
            "id": channel.id,
            "name": channel.name,
            "is_channel": not channel.is_im and not channel.is_private,
            "is_group": channel.is_private,
            "is_im": channel.is_im,
            "is_private": channel.is_private or channel.is_im,
            "is_archived": channel.is_archived,
            "is_member": self.ws.bot_user_id in channel.members,
            "num_members": len(channel.members),
        }
        return {"channel": info}

    def conversation_open(self, params: Mapping[str, Any]) -> Json:
        """The DM with the one person ``users`` names, the same one each time. A group DM
        (several users) is not something the bot opens: refused as Slack refuses bad
        arguments, not made."""
        users = params.get("users")
        if params.get("channel") or not isinstance(users, str) or not users.strip():
            raise SlackApiFailure("users_list_not_supplied")
        ids = [u.strip() for u in users.split(",")]
        if len(ids) != 1:
            raise SlackApiFailure("invalid_arguments", ["the sandbox opens one person's DM"])
        person = self.ws.user(ids[0])
        if person.id == self.ws.bot_user_id:
            raise SlackApiFailure("cannot_dm_bot")
        dm = self.ws.channel(person.id)
        return {"channel": {"id": dm.id, "is_im": True, "user": person.id}}

    def conversation_members(self, params: Mapping[str, Any]) -> Json:
        channel = self.ws.channel(params.get("channel"))
        return {"members": sorted(channel.members), "response_metadata": {"next_cursor": ""}}

    def replies(self, params: Mapping[str, Any]) -> Json:
        """A thread, oldest first: the parent, then the replies in ``oldest``..``latest``."""
        channel = self._readable(params)
        parent = self.ws.message(channel.id, params.get("ts"))
        thread = self.ws.thread(channel.id, str(parent.get("thread_ts", parent["ts"])))
        head, replies = thread[:1], _between(thread[1:], params)
        return self._page([*head, *replies], params, MAX_REPLIES_LIMIT, MAX_REPLIES_LIMIT)

    def history(self, params: Mapping[str, Any]) -> Json:
        """A channel's messages, newest first: thread replies only if broadcast."""
        channel = self._readable(params)
        listed = [
            m
            for m in self.ws.messages.get(channel.id, {}).values()
            if m.get("thread_ts") in (None, m["ts"]) or m.get("subtype") == "thread_broadcast"
        ]
        newest_first = sorted(_between(listed, params), key=lambda m: float(m["ts"]), reverse=True)
        return self._page(newest_first, params, 100, MAX_HISTORY_LIMIT)

    def _readable(self, params: Mapping[str, Any]) -> Channel:
        channel = self.ws.channel(params.get("channel"))
        if self.ws.bot_user_id not in channel.members:
            raise SlackApiFailure("not_in_channel")
        return channel

    def _page(
        self, messages: list[Json], params: Mapping[str, Any], default: int, most: int
    ) -> Json:
        """One page of ``messages`` (``limit``, ``cursor``), metadata only if asked for."""
        limit = params.get("limit") or default
        if not str(limit).isdigit():
            raise SlackApiFailure("invalid_limit")
        limit = min(max(int(limit), 1), most)
        start = _cursor_offset(params.get("cursor"), len(messages))
        shown = messages[start : start + limit]
        more = start + limit < len(messages)
        if not flag(params, "include_all_metadata"):
            shown = [{k: v for k, v in m.items() if k != "metadata"} for m in shown]
        cursor = _cursor(start + limit) if more else ""
        return {"messages": shown, "has_more": more, "response_metadata": {"next_cursor": cursor}}

    def user_info(self, params: Mapping[str, Any]) -> Json:
        user = self.ws.user(params.get("user"))
        profile = {"display_name": user.name, "real_name": user.real_name}
        return {
            "user": {
                "id": user.id,
                "team_id": self.ws.team_id,
                "name": user.name,
                "real_name": user.real_name,
                "tz": user.tz,
                "is_bot": user.is_bot,
                "deleted": user.deleted,
                "profile": profile,
            }
        }

    def usergroup_users(self, params: Mapping[str, Any]) -> Json:
        group = params.get("usergroup")
        if not isinstance(group, str) or group not in self.ws.usergroups:
            raise SlackApiFailure("no_such_subteam")
        return {"users": list(self.ws.usergroups[group])}

    # -- views -----------------------------------------------------------------------------

    def views_open(self, params: Mapping[str, Any]) -> Json:
        view = decoded(params, "view")
        fail_on(validate_view(view))
        user = self.ws.consume_trigger(params.get("trigger_id"))
        return {"view": self.ws.open_view(user, view).view}

    def views_update(self, params: Mapping[str, Any]) -> Json:
        if not params.get("view_id") and not params.get("external_id"):
            raise SlackApiFailure("invalid_arguments", ["[ERROR] view_id or external_id required"])
        stored = self.ws.view(params.get("view_id"), params.get("external_id"))
        if not stored.is_open:
            raise SlackApiFailure("view_not_found")
        if params.get("hash") and params["hash"] != stored.view["hash"]:
            raise SlackApiFailure("hash_conflict")
        view = decoded(params, "view")
        fail_on(validate_view(view))
        return {"view": self.ws.replace_view(stored, view).view}

    def views_push(self, params: Mapping[str, Any]) -> Json:
        view = decoded(params, "view")
        fail_on(validate_view(view))
        user = self.ws.consume_trigger(params.get("trigger_id"))
        stack = [v for v in self.ws.views.values() if v.user == user and v.is_open]
        if not stack:
            raise SlackApiFailure("view_not_found")
        top = stack[-1]
        if len([v for v in stack if v.view["root_view_id"] == top.view["root_view_id"]]) >= (
            MAX_PUSHED_VIEWS
        ):
            raise SlackApiFailure("push_limit_reached")
        return {"view": self.ws.open_view(user, view, previous=top).view}

    def views_publish(self, params: Mapping[str, Any]) -> Json:
        """A person's Home tab, as Slack takes it: a view of type ``home`` (validated like
        any view: 100 blocks, text limits), to a user who exists, replacing the one there
        (same id, new hash) unless ``hash`` names another state (``hash_conflict``)."""
        user = self.ws.user(params.get("user_id")).id
        view = decoded(params, "view")
        if isinstance(view, Mapping) and view.get("type") != "home":
            raise SlackApiFailure("invalid_arguments", ["[ERROR] must be a view of type home"])
        fail_on(validate_view(view))
        stored = self.ws.home_view(user)
        if stored is None:
            return {"view": self.ws.open_view(user, view).view}
        if params.get("hash") and params["hash"] != stored.view["hash"]:
            raise SlackApiFailure("hash_conflict")
        return {"view": self.ws.replace_view(stored, view).view}

    # -- files -----------------------------------------------------------------------------

    def upload_url(self, params: Mapping[str, Any]) -> Json:
        filename, length = params.get("filename"), params.get("length")
        if not filename or length is None or not str(length).isdigit():
            raise SlackApiFailure("invalid_arguments", ["[ERROR] filename and length required"])
        file_id = self.ws.new_id("F")
        self.ws.files[file_id] = StoredFile(file_id, str(filename), int(length))
        return {"upload_url": f"{self.base_url()}upload/{file_id}", "file_id": file_id}

    def complete_upload(self, params: Mapping[str, Any]) -> Json:
        items = decoded(params, "files")
        if not isinstance(items, list) or not items:
            raise SlackApiFailure("invalid_arguments", ["[ERROR] files must be a non-empty array"])
        stored: list[StoredFile] = []
        for item in items:
            found = self.ws.files.get(str(item.get("id"))) if isinstance(item, dict) else None
            if found is None or found.content is None:
                raise SlackApiFailure("file_not_found")
            found.title = item.get("title") or found.filename
            stored.append(found)
        channel_ids = [c for c in str(params.get("channels") or "").split(",") if c]
        if params.get("channel_id"):
            channel_ids.append(str(params["channel_id"]))
        for channel_id in channel_ids:
            channel = self._postable(channel_id)
            fields = {
                "text": params.get("initial_comment") or "",
                "upload": True,
                "files": [self.file_json(f) for f in stored],
            }
            message = self.ws.post(
                channel, self.ws.bot_user_id, fields, thread_ts=params.get("thread_ts") or None
            )
            for f in stored:
                f.shared_in.append((channel.id, message["ts"]))
        return {"files": [self.file_json(f) for f in stored]}

    def file_info(self, params: Mapping[str, Any]) -> Json:
        """A file and where it is shared (``shares``), once its content was uploaded."""
        found = self.ws.files.get(str(params.get("file")))
        if found is None or found.content is None:
            raise SlackApiFailure("file_not_found")
        shares: dict[str, dict[str, list[Json]]] = {}
        lists: dict[str, list[str]] = {"channels": [], "groups": [], "ims": []}
        for channel_id, ts in found.shared_in:
            channel = self.ws.channels[channel_id]
            kind = "ims" if channel.is_im else "groups" if channel.is_private else "channels"
            if channel_id not in lists[kind]:
                lists[kind].append(channel_id)
            share: Json = {"ts": ts, "channel_name": channel.name}
            thread_ts = self.ws.messages.get(channel_id, {}).get(ts, {}).get("thread_ts")
            if thread_ts is not None:
                share["thread_ts"] = thread_ts
            scope = "public" if kind == "channels" else "private"
            shares.setdefault(scope, {}).setdefault(channel_id, []).append(share)
        return {"file": {**self.file_json(found), **lists, "shares": shares}}

    def file_json(self, f: StoredFile) -> Json:
        return {
            "id": f.id,
            "name": f.filename,
            "title": f.title or f.filename,
            "size": len(f.content or b""),
            "user": self.ws.bot_user_id,
            "url_private": f"{self.base_url()}files/{f.id}",
        }

    def connections_open(self, params: Mapping[str, Any]) -> Json:
        return {"url": self.socket_url()}

    def auth_test(self, params: Mapping[str, Any]) -> Json:
        return {
            "url": "https://sandbox.slack.com/",
            "team": "Sandbox",
            "user": "bot",
            "team_id": self.ws.team_id,
            "user_id": self.ws.bot_user_id,
            "bot_id": self.ws.bot_id,
            "is_enterprise_install": False,
        }


METHODS: dict[str, Callable[[WebApi, Mapping[str, Any]], Json]] = {
    "auth.test": WebApi.auth_test,
    "chat.postMessage": WebApi.post_message,
    "chat.update": WebApi.update,
    "chat.delete": WebApi.delete,
    "chat.postEphemeral": WebApi.post_ephemeral,
    "chat.getPermalink": WebApi.permalink,
    "conversations.info": WebApi.conversation_info,
    "conversations.members": WebApi.conversation_members,
    "conversations.open": WebApi.conversation_open,
    "conversations.history": WebApi.history,
    "conversations.replies": WebApi.replies,
    "users.info": WebApi.user_info,
    "usergroups.users.list": WebApi.usergroup_users,
    "views.open": WebApi.views_open,
    "views.update": WebApi.views_update,
    "views.push": WebApi.views_push,
    "views.publish": WebApi.views_publish,
    "files.getUploadURLExternal": WebApi.upload_url,
    "files.completeUploadExternal": WebApi.complete_upload,
    "files.info": WebApi.file_info,
    "apps.connections.open": WebApi.connections_open,
}


def _between(messages: list[Json], params: Mapping[str, Any]) -> list[Json]:
    """The messages within ``oldest`` and ``latest`` (exclusive unless ``inclusive``)."""
    try:
        oldest = float(params.get("oldest") or 0)
        latest = float(params.get("latest") or "inf")
    except ValueError:
        raise SlackApiFailure("invalid_ts_oldest") from None
    inclusive = flag(params, "inclusive")

    def within(ts: float) -> bool:
        if inclusive:
            return oldest <= ts <= latest
        return oldest < ts < latest

    return [m for m in messages if within(float(m["ts"]))]


def _cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"next:{offset}".encode()).decode("ascii")


def _cursor_offset(cursor: Any, size: int) -> int:
    """Where the page a ``cursor`` names begins; 0 without one."""
    if not cursor:
        return 0
    try:
        text = base64.urlsafe_b64decode(str(cursor).encode("ascii")).decode("ascii")
    except (binascii.Error, UnicodeError, ValueError):
        raise SlackApiFailure("invalid_cursor") from None
    label, _, number = text.partition(":")
    if label != "next" or not number.isdigit() or int(number) > size:
        raise SlackApiFailure("invalid_cursor")
    return int(number)
