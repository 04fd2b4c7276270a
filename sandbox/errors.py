"""Exceptions of the Slack stand-in.

Hierarchy::

    SandboxError                 base of everything the stand-in raises
    ├── SlackApiFailure          a Web API call Slack would answer with ``ok: false``;
    │                            the server turns it into that JSON (HTTP 200), never a crash
    └── PersonActionRefused      a simulated person tried something Slack's client would not
        │                        let a person do (click a button that is not there, submit a
        │                        closed modal, reply to a thread that does not exist); raised
        │                        to the test, because the test itself is wrong or the bot
        │                        never posted what the test expected
        └── MessageChanged       a click on a message that no longer has that element, or
                                 is gone: what a page showing an old copy of it (a stale
                                 tab) can do, and the page is told so in a person's words

Why two kinds: the first is the bot's fault and the bot must see Slack's answer; the second
is a failed expectation of the test and must stop it loudly.
"""

from __future__ import annotations

__all__ = ["MessageChanged", "PersonActionRefused", "SandboxError", "SlackApiFailure"]


class SandboxError(Exception):
    """Base class of the stand-in's exceptions."""


class SlackApiFailure(SandboxError):
    """A Web API error with Slack's error code, the lines of ``response_metadata``, and
    any other fields of Slack's answer (``needed`` and ``provided`` of ``missing_scope``)."""

    def __init__(self, code: str, messages: list[str] | None = None, **fields: str) -> None:
        super().__init__(code if not messages else f"{code}: {'; '.join(messages)}")
        self.code = code
        self.messages = messages or []
        self.fields = fields


class PersonActionRefused(SandboxError):
    """A person-side action that Slack's own client would not allow."""


class MessageChanged(PersonActionRefused):
    """A click on an element its message no longer has (updated since), or on a message
    that is gone."""
