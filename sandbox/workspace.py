"""The state of the fake workspace: channels, people, messages, threads, views, files.

Why a separate, synchronous module with no I/O: both sides of the stand-in change the same
state (the bot through the Web API, simulated people through their actions), and tests
assert on it. Keeping it a plain object mutated on one event loop means no locks, and the
rules Slack applies to state (ts uniqueness, thread bookkeeping, single-use trigger ids
that expire after 3 s) are testable with a fake clock.

Messages are stored as the JSON dicts Slack would return, so payloads built from them
(``block_actions`` carries the whole message) look like Slack's.

The state converts to and from JSON (``to_json``, ``restore_json``) so that the offline demo
keeps its channel across restarts, as Slack keeps it while the bot restarts.
"""

from __future__ import annotations

import base64
import copy
import json
import secrets
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

from sandbox.errors import SlackApiFailure

__all__ = ["Channel", "Ephemeral", "ResponseUrl", "StoredFile", "StoredView", "User", "Workspace"]

Json = dict[str, Any]

TRIGGER_TTL = 3.0  # seconds; "Pass a valid trigger_id within 3 seconds of receiving it"
RESPONSE_URL_USES = 5  # Slack: a response_url takes "up to 5 times within 30 minutes"
RESPONSE_URL_TTL = 30 * 60.0
STATE_FORMAT = "countersign-sandbox-workspace"
STATE_VERSION = 1  # bump when to_json changes shape; restore_json refuses other versions


@dataclass
class Channel:
    """A conversation; ``is_im`` for the DM Slack opens when the bot posts to a user id;
    an archived one takes no message (``is_archived``)."""

    id: str
    name: str
    members: set[str]
    is_im: bool = False
    is_private: bool = False
    is_archived: bool = False


@dataclass
class User:
    """A person (or the bot) as ``users.info`` returns it."""

    id: str
    name: str
    real_name: str
    is_bot: bool = False
    tz: str = "UTC"
    deleted: bool = False  # deactivated: users.info still answers, with "deleted": true


@dataclass
class Ephemeral:
    """A message only ``user`` sees; Slack gives it a ``message_ts`` but never a thread entry.

    ``from_slack`` marks Slack's own notes (Slackbot's), e.g. a slash command that failed.
    """

    user: str
    channel: str
    ts: str
    text: str
    blocks: list[Json]
    thread_ts: str | None = None
    from_slack: bool = False


@dataclass
class StoredView:
    """An open (or closed) modal, with the stack it belongs to."""

    view: Json
    user: str
    is_open: bool = True

    @property
    def id(self) -> str:
        return str(self.view["id"])


@dataclass
class StoredFile:
    """A file between ``files.getUploadURLExternal`` and ``files.completeUploadExternal``."""

    id: str
    filename: str
    length: int
    content: bytes | None = None
    title: str | None = None
    shared_in: list[tuple[str, str]] = field(default_factory=list)  # (channel, message ts)


@dataclass
class ResponseUrl:
    """Where an interaction's ``response_url`` posts land."""

    id: str
    user: str
    channel: str
    issued_at: float
    thread_ts: str | None = None
    message_ts: str | None = None  # the message an action came from, for replace_original
    is_ephemeral: bool = False
    uses: int = 0


@dataclass
class _Trigger:
    user: str
    issued_at: float
    used: bool = False


class Workspace:
    """One team's state, identified the way Slack identifies things.

    Args:
        team_id: the team every payload names.
        bot_user_id: the bot's user id (``auth.test`` ``user_id``).
        clock: seconds since the epoch; injected so trigger expiry is testable.
    """

    def __init__(
        self,
        *,
        team_id: str,
        bot_user_id: str,
        bot_id: str,
        app_id: str,
        clock: Callable[[], float],
    ) -> None:
        self.team_id = team_id
        self.bot_user_id = bot_user_id
        self.bot_id = bot_id
        self.app_id = app_id
        self.clock = clock
        self.channels: dict[str, Channel] = {}
        self.users: dict[str, User] = {bot_user_id: User(bot_user_id, "bot", "bot", True)}
        self.usergroups: dict[str, list[str]] = {}
        self.messages: dict[str, dict[str, Json]] = {}  # channel -> ts -> message
        self.ephemerals: list[Ephemeral] = []
        self.views: dict[str, StoredView] = {}
        self.files: dict[str, StoredFile] = {}
        self.response_urls: dict[str, ResponseUrl] = {}
        self._triggers: dict[str, _Trigger] = {}
        self._last_ts = 0
        self._last_number = 0  # of ids and trigger ids

    # -- ids -------------------------------------------------------------------------------

    def next_ts(self) -> str:
        """A message ts: ``"<seconds>.<6 digits>"``, unique and increasing like Slack's."""
        micros = max(int(self.clock() * 1_000_000), self._last_ts + 100)
        self._last_ts = micros
        return f"{micros // 1_000_000}.{micros % 1_000_000:06d}"

    def new_id(self, prefix: str) -> str:
        """An id in Slack's style, e.g. ``V0000000003`` for a view."""
        return f"{prefix}{self._next_number():010d}"

    def _next_number(self) -> int:
        self._last_number += 1
        return self._last_number

    def issue_trigger(self, user: str) -> str:
        """A trigger_id for an interaction of ``user``; single use, valid for 3 s."""
        trigger_id = f"{self._next_number()}.{secrets.randbelow(10**9)}.{secrets.token_hex(16)}"
        self._triggers[trigger_id] = _Trigger(user, self.clock())
        return trigger_id

    def consume_trigger(self, trigger_id: Any) -> str:
        """Use a trigger_id; returns its user, or fails with Slack's error code."""
        trigger = self._triggers.get(trigger_id) if isinstance(trigger_id, str) else None
        if trigger is None:
            raise SlackApiFailure("invalid_trigger_id")
        if trigger.used:
            raise SlackApiFailure("exchanged_trigger_id")
        if self.clock() - trigger.issued_at > TRIGGER_TTL:
            raise SlackApiFailure("expired_trigger_id")
        trigger.used = True
        return trigger.user

    def issue_response_url(self, base: str, record: ResponseUrl) -> str:
        self.response_urls[record.id] = record
        return f"{base}response/{record.id}"

    def use_response_url(self, url_id: str) -> ResponseUrl:
        record = self.response_urls.get(url_id)
        if record is None:
            raise SlackApiFailure("invalid_url")
        if record.uses >= RESPONSE_URL_USES or self.clock() - record.issued_at > RESPONSE_URL_TTL:
            raise SlackApiFailure("used_url")
        record.uses += 1
        return record

    # -- seeding ---------------------------------------------------------------------------

    def add_channel(self, channel_id: str, name: str, members: list[str]) -> Channel:
        channel = Channel(channel_id, name, set(members), is_private=channel_id.startswith("G"))
        self.channels[channel_id] = channel
        self.messages.setdefault(channel_id, {})
        return channel

    def add_user(
        self,
        user_id: str,
        name: str,
        real_name: str | None = None,
        *,
        is_bot: bool = False,
        deleted: bool = False,
    ) -> User:
        user = User(user_id, name, real_name or name, is_bot=is_bot, deleted=deleted)
        self.users[user_id] = user
        return user

    # -- lookups ---------------------------------------------------------------------------

    def channel(self, channel_id: Any) -> Channel:
        """The channel an API call names; a user id means the DM with that user."""
        if isinstance(channel_id, str) and channel_id in self.channels:
            return self.channels[channel_id]
        if isinstance(channel_id, str) and channel_id in self.users:
            dm_id = "D" + channel_id[1:]
            if dm_id not in self.channels:
                dm = self.add_channel(dm_id, dm_id, [channel_id, self.bot_user_id])
                dm.is_im = True
            return self.channels[dm_id]
        raise SlackApiFailure("channel_not_found")

    def user(self, user_id: Any) -> User:
        if not isinstance(user_id, str) or user_id not in self.users:
            raise SlackApiFailure("user_not_found")
        return self.users[user_id]

    def message(self, channel_id: str, ts: Any) -> Json:
        message = self.messages.get(channel_id, {}).get(ts) if isinstance(ts, str) else None
        if message is None:
            raise SlackApiFailure("message_not_found")
        return message

    def thread(self, channel_id: str, thread_ts: str) -> list[Json]:
        """The parent and its replies, oldest first (what ``conversations.replies`` returns)."""
        channel = self.messages.get(channel_id, {})
        return [
            m for ts, m in channel.items() if ts == thread_ts or m.get("thread_ts") == thread_ts
        ]

    def view(self, view_id: Any = None, external_id: Any = None) -> StoredView:
        for stored in self.views.values():
            if (view_id and stored.id == view_id) or (
                external_id and stored.view.get("external_id") == external_id
            ):
                return stored
        raise SlackApiFailure("view_not_found")

    # -- changes ---------------------------------------------------------------------------

    def post(
        self, channel: Channel, author: str, fields: Json, thread_ts: str | None = None
    ) -> Json:
        """Store a new message by ``author`` and keep the thread's bookkeeping like Slack."""
        ts = self.next_ts()
        message: Json = {"type": "message", "user": author, "ts": ts, "team": self.team_id}
        if author == self.bot_user_id:
            message.update(bot_id=self.bot_id, app_id=self.app_id)
        message.update(fields)
        if thread_ts is not None:
            parent = self._thread_parent(channel.id, thread_ts)
            message["thread_ts"] = parent["ts"]
            message["parent_user_id"] = parent.get("user")
            parent["thread_ts"] = parent["ts"]
            parent["reply_count"] = int(parent.get("reply_count", 0)) + 1
            parent["reply_users"] = sorted({*parent.get("reply_users", []), author})
            parent["reply_users_count"] = len(parent["reply_users"])
            parent["latest_reply"] = ts
        self.messages.setdefault(channel.id, {})[ts] = message
        return message

    def _thread_parent(self, channel_id: str, thread_ts: str) -> Json:
        # Stricter than Slack, which answers ok and hides a reply to a missing parent
        # (python-slack-sdk#840): a test should fail at the bad call, not later.
        try:
            message = self.message(channel_id, thread_ts)
        except SlackApiFailure:
            raise SlackApiFailure("thread_not_found") from None
        parent_ts = message.get("thread_ts", message["ts"])
        return self.message(channel_id, parent_ts)

    def update(self, channel_id: str, ts: Any, fields: Json) -> Json:
        message = self.message(channel_id, ts)
        if message.get("user") != self.bot_user_id:
            raise SlackApiFailure("cant_update_message")
        message.update(fields)
        message["edited"] = {"user": self.bot_user_id, "ts": self.next_ts()}
        return message

    def home_view(self, user: str) -> StoredView | None:
        """The Home tab ``views.publish`` last gave ``user``, if any."""
        for stored in self.views.values():
            if stored.user == user and stored.view.get("type") == "home":
                return stored
        return None

    def open_view(self, user: str, view: Json, previous: StoredView | None = None) -> StoredView:
        """Store a view the way Slack echoes it back: ids, hash, empty state."""
        view_id = self.new_id("V")
        stored_view = self._render_view(view, view_id, previous)
        stored = StoredView(stored_view, user)
        self.views[view_id] = stored
        return stored

    def replace_view(self, stored: StoredView, view: Json) -> StoredView:
        previous_id = stored.view.get("previous_view_id")
        previous = self.views.get(previous_id) if isinstance(previous_id, str) else None
        stored.view = self._render_view(view, stored.id, previous, root=stored.view["root_view_id"])
        return stored

    def close_view(self, stored: StoredView, *, whole_stack: bool = False) -> None:
        stored.is_open = False
        if whole_stack:
            for other in self.views.values():
                if other.view.get("root_view_id") == stored.view.get("root_view_id"):
                    other.is_open = False

    def _render_view(
        self, view: Json, view_id: str, previous: StoredView | None, root: str | None = None
    ) -> Json:
        rendered = copy.deepcopy(view)
        rendered.setdefault("private_metadata", "")
        rendered.setdefault("callback_id", "")
        rendered.setdefault("external_id", "")
        rendered.setdefault("clear_on_close", False)
        rendered.setdefault("notify_on_close", False)
        ensure_ids(rendered.get("blocks", []))
        rendered.update(
            id=view_id,
            team_id=self.team_id,
            state={"values": {}},
            hash=f"{int(self.clock())}.{secrets.token_hex(4)}",
            root_view_id=root or (previous.view["root_view_id"] if previous else view_id),
            previous_view_id=previous.id if previous else None,
            app_id=self.app_id,
            bot_id=self.bot_id,
            app_installed_team_id=self.team_id,
        )
        return rendered

    # -- persistence -----------------------------------------------------------------------

    def to_json(self) -> str:
        """The whole state as JSON text, for :meth:`restore_json` in a later process.

        Trigger ids are left out: they expire 3 s after the interaction that issued them, so
        none would still be valid. The id and ts counters are kept, so that a restored
        workspace never hands out an id or a ts twice. File contents are base64.
        """
        state: Json = {
            "format": STATE_FORMAT,
            "version": STATE_VERSION,
            "team_id": self.team_id,
            "bot_user_id": self.bot_user_id,
            "last_ts": self._last_ts,
            "last_number": self._last_number,
            "channels": [
                {**asdict(c), "members": sorted(c.members)} for c in self.channels.values()
            ],
            "users": [asdict(u) for u in self.users.values()],
            "usergroups": self.usergroups,
            "messages": {c: list(by_ts.values()) for c, by_ts in self.messages.items()},
            "ephemerals": [asdict(e) for e in self.ephemerals],
            "views": [asdict(v) for v in self.views.values()],
            "files": [_file_state(f) for f in self.files.values()],
            "response_urls": [asdict(r) for r in self.response_urls.values()],
        }
        return json.dumps(state, separators=(",", ":"))

    def restore_json(self, text: str) -> None:
        """Replace the state with one :meth:`to_json` wrote, or change nothing and raise.

        Raises:
            ValueError: ``text`` is not such a state: not JSON, another format or version,
                another team or bot user, or a malformed part.
        """
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("format") != STATE_FORMAT:
            raise ValueError("not a sandbox workspace state")
        if data.get("version") != STATE_VERSION:
            raise ValueError(f"state version {data.get('version')!r}, expected {STATE_VERSION}")
        if (data.get("team_id"), data.get("bot_user_id")) != (self.team_id, self.bot_user_id):
            raise ValueError("the state of another team or bot user")
        try:
            state = _parse_state(data)
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise ValueError(f"malformed sandbox workspace state: {exc!r}") from exc
        self._triggers = {}
        self._last_ts, self._last_number = state.last_ts, state.last_number
        self.channels, self.users, self.usergroups = state.channels, state.users, state.usergroups
        self.messages, self.ephemerals, self.views = state.messages, state.ephemerals, state.views
        self.files, self.response_urls = state.files, state.response_urls


class _State(NamedTuple):
    last_ts: int
    last_number: int
    channels: dict[str, Channel]
    users: dict[str, User]
    usergroups: dict[str, list[str]]
    messages: dict[str, dict[str, Json]]
    ephemerals: list[Ephemeral]
    views: dict[str, StoredView]
    files: dict[str, StoredFile]
    response_urls: dict[str, ResponseUrl]


def _file_state(stored: StoredFile) -> Json:
    content = stored.content
    return {
        **asdict(stored),
        "content": None if content is None else base64.b64encode(content).decode("ascii"),
    }


def _parse_state(data: Json) -> _State:
    """What :meth:`Workspace.to_json` wrote, as the workspace keeps it.

    The dataclasses refuse missing and unknown fields and the containers are checked
    (``TypeError``, ``KeyError`` or ``ValueError`` otherwise), so a damaged file fails here,
    at start, and not at some later click.
    """
    files: dict[str, StoredFile] = {}
    for f in data["files"]:
        content = f["content"]
        stored = StoredFile(
            **{
                **f,
                "content": None if content is None else base64.b64decode(content, validate=True),
                "shared_in": [(str(c), str(ts)) for c, ts in f["shared_in"]],
            }
        )
        files[stored.id] = stored
    return _State(
        last_ts=int(data["last_ts"]),
        last_number=int(data["last_number"]),
        channels={
            c["id"]: Channel(**{**c, "members": set(_strings(c["members"]))})
            for c in data["channels"]
        },
        users={u["id"]: User(**u) for u in data["users"]},
        usergroups={str(g): _strings(ids) for g, ids in dict(data["usergroups"]).items()},
        messages={
            str(channel): {str(m["ts"]): dict(m) for m in listed}
            for channel, listed in dict(data["messages"]).items()
        },
        ephemerals=[Ephemeral(**e) for e in data["ephemerals"]],
        views={
            str(v["view"]["id"]): StoredView(**{**v, "view": dict(v["view"])})
            for v in data["views"]
        },
        files=files,
        response_urls={r["id"]: ResponseUrl(**r) for r in data["response_urls"]},
    )


def _strings(items: Any) -> list[str]:
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise TypeError(f"expected a list of strings, got {items!r}")
    return items


def ensure_ids(blocks: Any) -> Any:
    """Give every block a ``block_id`` and every element an ``action_id``, as Slack does.

    Slack fills missing ids with random strings; payloads and stored messages then carry
    them, so a test can click a button whose ``block_id`` the bot never chose.
    """
    if not isinstance(blocks, list):
        return blocks
    for block in blocks:
        if not isinstance(block, dict):
            continue
        block.setdefault("block_id", secrets.token_urlsafe(4))
        elements = list(block.get("elements", [])) if block.get("type") == "actions" else []
        for key in ("accessory", "element"):
            if isinstance(block.get(key), dict):
                elements.append(block[key])
        for element in elements:
            if isinstance(element, dict) and element.get("type") not in ("image", None):
                element.setdefault("action_id", secrets.token_urlsafe(4))
    return blocks
