"""What the sandbox page shows one person: a JSON snapshot of one channel of the workspace.

Why a pure function apart from the routes: the page re-reads the whole snapshot after
every change (it is small: one channel), so the snapshot must say everything the page
draws, in the shape the page draws it (replies grouped under their parent, only this
person's ephemerals and modals), and that shape is testable without a server.
"""

from __future__ import annotations

import copy
from typing import Any

from sandbox.workspace import Ephemeral, StoredFile, Workspace

__all__ = ["SLACKBOT", "snapshot"]

Json = dict[str, Any]

SLACKBOT = "USLACKBOT"  # the author Slack gives its own notes


def snapshot(ws: Workspace, *, user: str, channel: str, version: int, title: str) -> Json:
    """The state of ``channel`` as ``user`` sees it.

    Keys: ``version`` (the stand-in's change counter), ``workspace`` ``{name, team_id}``,
    ``me`` ``{id, name}``, ``bot_user_id``, ``channel`` ``{id, name}``, ``channels`` and
    ``users`` (id to name, for mentions), ``messages`` (top-level, oldest first, each with
    ``replies`` and ``reply_count``), ``ephemerals`` (this person's, with ``thread_ts``
    when shown in a thread), ``views`` (this person's open modals, the top one last) and
    ``files`` (shared in the channel, with ``url`` the stand-in's ``/files/<id>``).

    Raises:
        SlackApiFailure: ``user`` or ``channel`` is not in the workspace.
    """
    me = ws.user(user)
    where = ws.channel(channel)
    stored = ws.messages.get(where.id, {})
    replies: dict[str, list[Json]] = {}
    top: list[Json] = []
    for ts, message in stored.items():
        parent = message.get("thread_ts")
        if parent and parent != ts:
            replies.setdefault(parent, []).append(_message(message, ws))
        else:
            top.append(message)
    messages = []
    for message in top:
        shown = _message(message, ws)
        shown["replies"] = replies.get(message["ts"], [])
        shown["reply_count"] = len(shown["replies"])
        messages.append(shown)
    users = {u.id: u.real_name or u.name for u in ws.users.values()}
    return {
        "version": version,
        "workspace": {"name": title, "team_id": ws.team_id},
        "me": {"id": me.id, "name": me.real_name or me.name},
        "bot_user_id": ws.bot_user_id,
        "channel": {"id": where.id, "name": where.name},
        "channels": {c.id: c.name for c in ws.channels.values() if not c.is_im},
        "users": {**users, SLACKBOT: "Slackbot"},
        "messages": messages,
        "ephemerals": [
            _ephemeral(e, ws) for e in ws.ephemerals if e.user == user and e.channel == where.id
        ],
        "views": [
            copy.deepcopy(v.view)
            for v in ws.views.values()
            if v.is_open and v.user == user and v.view.get("type") != "home"
        ],
        "home": copy.deepcopy(home.view) if (home := ws.home_view(user)) is not None else None,
        "files": [
            {**_file(f), "ts": ts}
            for f in ws.files.values()
            for shared_channel, ts in f.shared_in
            if shared_channel == where.id
        ],
    }


def _message(message: Json, ws: Workspace) -> Json:
    files = [
        _file(ws.files[f["id"]])
        for f in message.get("files", [])
        if isinstance(f, dict) and f.get("id") in ws.files
    ]
    shown: Json = {
        "ts": message["ts"],
        "user": message.get("user"),
        "text": message.get("text", ""),
        "blocks": copy.deepcopy(message.get("blocks") or []),
        "files": files,
        "edited": "edited" in message,
        "is_bot": "bot_id" in message,
        "ephemeral": False,
    }
    if message.get("thread_ts"):
        shown["thread_ts"] = message["thread_ts"]
    return shown


def _ephemeral(note: Ephemeral, ws: Workspace) -> Json:
    return {
        "ts": note.ts,
        "user": SLACKBOT if note.from_slack else ws.bot_user_id,
        "text": note.text,
        "blocks": copy.deepcopy(note.blocks),
        "files": [],
        "edited": False,
        "is_bot": True,
        "ephemeral": True,
        "thread_ts": note.thread_ts,
    }


def _file(stored: StoredFile) -> Json:
    return {
        "id": stored.id,
        "name": stored.filename,
        "title": stored.title or stored.filename,
        "size": len(stored.content or b""),
        "url": f"/files/{stored.id}",
    }
