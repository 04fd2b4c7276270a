"""The scopes Slack asks of each Web API method, and the events an app is sent: the
stand-in's permission model, read from the app's own ``manifest.yml``.

Why: a method called without its scope works in a stand-in that grants everything and
fails in a real workspace (``missing_scope``), and an event the manifest does not subscribe
to is never sent by Slack. So the stand-in grants what the manifest asks for, no more,
answers ``missing_scope`` with ``needed`` and ``provided`` as Slack does, and delivers
only the subscribed events; ``tests/house/test_manifest.py`` checks every method the bot calls
against the same table.

The scopes are those of Slack's method reference for bot tokens. A method that reads a
conversation needs the scope of its kind (``conversations.members`` of a DM needs
``im:read``, of a public channel ``channels:read``); a message event is subscribed to by
the kind of its conversation (``message.im``, ``message.channels``, ...).

The manifest is read without a YAML library (it is a dev dependency only): the two lists
this needs, ``oauth_config.scopes.bot`` and ``settings.event_subscriptions.bot_events``,
are plain block sequences (``tests/house/test_manifest.py`` checks the reading against PyYAML's).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "BY_KIND",
    "FIXED",
    "KINDS",
    "MANIFEST",
    "Grants",
    "event_subscription",
    "read_manifest",
    "scope_needed",
]

log = logging.getLogger("countersign.sandbox")

MANIFEST = Path(__file__).resolve().parents[1] / "manifest.yml"
KINDS = ("channel", "group", "im", "mpim")  # the kinds of conversation, as channel_type says

# Methods that need one scope whatever they name (None: no scope at all).
FIXED: dict[str, str | None] = {
    "auth.test": None,
    "chat.postMessage": "chat:write",
    "chat.update": "chat:write",
    "chat.delete": "chat:write",
    "chat.postEphemeral": "chat:write",
    "chat.getPermalink": None,
    "conversations.open": "im:write",
    "users.info": "users:read",
    "usergroups.users.list": "usergroups:read",
    "views.open": None,
    "views.update": None,
    "views.push": None,
    "views.publish": None,
    "files.getUploadURLExternal": "files:write",
    "files.completeUploadExternal": "files:write",
    "files.info": "files:read",
    "apps.connections.open": None,  # the app-level token's connections:write
}
_READ = dict(zip(KINDS, ("channels:read", "groups:read", "im:read", "mpim:read"), strict=True))
_HISTORY = dict(
    zip(KINDS, ("channels:history", "groups:history", "im:history", "mpim:history"), strict=True)
)
# Methods whose scope is that of the kind of conversation their ``channel`` names.
BY_KIND: dict[str, dict[str, str]] = {
    "conversations.info": _READ,
    "conversations.members": _READ,
    "conversations.history": _HISTORY,
    "conversations.replies": _HISTORY,
}
_MESSAGE_EVENTS = dict(zip(KINDS, ("channels", "groups", "im", "mpim"), strict=True))


@dataclass(frozen=True)
class Grants:
    """What an installed app may do: its bot scopes, and the bot events it subscribes to."""

    scopes: frozenset[str]
    events: frozenset[str]

    @classmethod
    def everything(cls) -> Grants:
        every = {s for s in FIXED.values() if s} | {s for m in BY_KIND.values() for s in m.values()}
        kinds = {f"message.{k}" for k in _MESSAGE_EVENTS.values()}
        return cls(frozenset(every), frozenset({"app_mention", "app_home_opened", *kinds}))

    def missing(self, method: str, kind: str | None) -> str | None:
        """The scope ``method`` needs and this app lacks (on a conversation of ``kind``)."""
        needed = scope_needed(method, kind)
        return needed if needed is not None and needed not in self.scopes else None

    def provided(self) -> str:
        return ",".join(sorted(self.scopes))


def scope_needed(method: str, kind: str | None) -> str | None:
    """The bot scope Slack asks of ``method`` (on a conversation of ``kind``), if any."""
    if method in BY_KIND:
        return None if kind is None else BY_KIND[method][kind]
    return FIXED.get(method)


def event_subscription(event: Mapping[str, Any]) -> str:
    """The bot event an app subscribes to in order to be sent ``event``."""
    kind = str(event.get("type"))
    if kind == "message":
        return f"message.{_MESSAGE_EVENTS.get(str(event.get('channel_type')), 'channels')}"
    return kind


def read_manifest(path: Path = MANIFEST) -> Grants:
    """The bot scopes and events ``path`` asks for; everything if there is no manifest
    (the stand-in of an installed package, which has no ``manifest.yml`` beside it)."""
    try:
        text = path.read_text()
    except OSError:
        log.warning("no manifest at %s: the stand-in grants every scope and event", path)
        return Grants.everything()
    return Grants(_block_list(text, "bot"), _block_list(text, "bot_events"))


def _block_list(text: str, key: str) -> frozenset[str]:
    """The items of the block sequence under the first ``key:`` line of ``text``."""
    lines = text.splitlines()
    for number, line in enumerate(lines):
        if re.fullmatch(rf"(\s*){re.escape(key)}:\s*(#.*)?", line):
            items: set[str] = set()
            for item in lines[number + 1 :]:
                stripped = item.split("#", 1)[0].rstrip()
                if not stripped:
                    continue
                entry = re.fullmatch(r"\s*-\s+(\S+)", stripped)
                if entry is None:
                    break
                items.add(entry.group(1))
            return frozenset(items)
    return frozenset()
