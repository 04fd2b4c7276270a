"""Slack's mrkdwn, written safely: escaping, cutting, and the references our code builds.

Text that came from a person, an LLM or the configuration goes through :func:`escape` before
it lands in mrkdwn, so ``<!channel>`` in a draft or a command argument never pings anyone
(Slack's "Escaping text"). Mentions, channel links and dates are built here, by our code,
after escaping. The words themselves are in ``bot.slack.text`` (answers to a person) and
``bot.slack.block_text`` (messages and modals). Nothing here does I/O; times from storage
are naive UTC.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

_USER_ID = re.compile(r"[UW][A-Z0-9]{2,20}")
_CHANNEL_ID = re.compile(r"[CGD][A-Z0-9]{2,20}")
ELLIPSIS = "…"


def escape(text: str) -> str:
    """Neutralise Slack's control characters: ``&``, ``<`` and ``>``, and only those.

    Slack decodes exactly these three entities (api.slack.com formatting reference,
    "Escaping text"); anything more would show up literally. ``&`` goes first so the
    entities we add are not escaped again.

    >>> escape("<!channel> a&b")
    '&lt;!channel&gt; a&amp;b'
    """
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def unescape(text: str) -> str:
    """Undo :func:`escape` (Slack sends typed ``&``, ``<``, ``>`` this way); ``&amp;`` last."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def truncate(text: str, limit: int) -> str:
    """``text`` escaped, cut so the escaped result fits ``limit`` chars, with ``…`` if cut.

    Cuts the raw text, never an entity in the middle, so ``&amp;`` cannot become ``&am``.
    """
    escaped = escape(text)
    if len(escaped) <= limit:
        return escaped
    out: list[str] = []
    used = 0
    for char in text:
        piece = escape(char)
        if used + len(piece) > limit - 1:
            break
        out.append(piece)
        used += len(piece)
    return "".join(out) + ELLIPSIS


def code(value: str) -> str:
    """An id or name in inline code; backticks removed so they cannot end the span early."""
    return "`" + escape(value.replace("`", "'")) + "`"


def user_ref(user: str | None) -> str:
    """``<@U123>`` for a Slack user id; anything else (``cli:alice``, ``clock``) as text."""
    if user is None:
        return "someone"
    if _USER_ID.fullmatch(user):
        return f"<@{user}>"
    return escape(user)


def channel_ref(channel: str) -> str:
    """``<#C123>`` for a channel id, else the name as text."""
    if _CHANNEL_ID.fullmatch(channel):
        return f"<#{channel}>"
    return escape(channel if channel.startswith("#") else f"#{channel}")


def mention(ref: str) -> str:
    """A reviewer reference from the config: a user (``<@U…>``) or a user group."""
    if ref.startswith("S"):
        return f"<!subteam^{escape(ref)}>"
    return user_ref(ref)


def slack_date(moment: datetime) -> str:
    """A date Slack shows in each reader's time zone, with a UTC fallback for old clients."""
    aware = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    fallback = aware.strftime("%Y-%m-%d %H:%M UTC")
    return f"<!date^{int(aware.timestamp())}^{{date_short_pretty}} {{time}}|{fallback}>"


def slack_ago(moment: datetime) -> str:
    """How long ago ``moment`` was ("3 hours ago"), kept current by Slack as time passes,
    with a UTC date as the fallback for old clients."""
    aware = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    fallback = aware.strftime("%Y-%m-%d %H:%M UTC")
    return f"<!date^{int(aware.timestamp())}^{{ago}}|{fallback}>"


def link(url: str, label: str) -> str:
    """A link whose label is ours (``label`` must not hold ``|`` or ``>``); ``url`` is
    escaped as Slack asks of a URL in mrkdwn."""
    return f"<{escape(url)}|{label}>"
