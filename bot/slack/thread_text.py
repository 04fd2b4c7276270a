"""The words of what the bot posts in a run's thread beside the reviews: a run's live
progress (``bot.slack.progress_blocks``), what changed between two rounds of a draft
(``bot.slack.diff_blocks``) and standing approvals (``bot.slack.standing_blocks``).

As in ``bot.slack.block_text``, text from a person, an LLM or the configuration is escaped
wherever it goes into mrkdwn. Nothing here does I/O.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from datetime import datetime
from typing import Any

from bot.slack.block_text import RUN_STATUS, run_status
from bot.slack.mrkdwn import (
    ELLIPSIS,
    code,
    mention,
    slack_date,
    truncate,
    user_ref,
)
from storage.status import ReviewKind, RunStatus

# --- standing approvals -------------------------------------------------------------------

REVOKE_BUTTON = "Revoke"
_VALUE_CHARS = 24  # of one argument's value in the button's label


def approve_all_label(tool: str, match: Mapping[str, Any]) -> str:
    """The button approving a gated call and the tool's later calls (with ``match``'s
    values): plain text, cut to Slack's 75 characters by the button."""
    values = ", ".join(f"{name} = {_value(v, _VALUE_CHARS)}" for name, v in match.items())
    return f"Approve all {tool} calls" + (f" ({values})" if values else "")


def standing_note(tool: str, match: Mapping[str, Any], by: str) -> str:
    """What a standing approval approves, and who granted it (mrkdwn, escaped)."""
    raw = ", ".join(f"{name} = {json_value(v)}" for name, v in match.items())
    values = truncate(raw, 500) if raw else ""
    return (
        f"Standing approval of {code(tool)}"
        + (f" ({values})" if values else "")
        + (f" by {user_ref(by)}")
    )


def standing_granted(tool: str, match: Mapping[str, Any], by: str) -> str:
    later = "later calls with these values" if match else "later calls of it"
    return f"{standing_note(tool, match, by)} — {later} in this run run without review."


def standing_revoked(
    tool: str, match: Mapping[str, Any], by: str, revoked_by: str, at: datetime
) -> str:
    return (
        f"{standing_note(tool, match, by)} — revoked by {user_ref(revoked_by)} "
        f"{slack_date(at)}: later calls of {code(tool)} are reviewed again."
    )


def standing_ref(standing_id: str) -> str:
    return f"Standing approval {code(standing_id)}"


def json_value(value: Any) -> str:
    """An argument's value as the audit trail and the CLI show it: JSON."""
    return json.dumps(value, ensure_ascii=False, default=str)


def _value(value: Any, limit: int) -> str:
    """A value in a plain-text label: text as it is, anything else as JSON; cut to ``limit``."""
    shown = value if isinstance(value, str) else json_value(value)
    return shown if len(shown) <= limit else shown[: limit - 1] + ELLIPSIS


# --- what changed between rounds ------------------------------------------------------------


def changes_title(round_number: int) -> str:
    """Above a revised draft's changes: since which round (the previous one, from 1)."""
    return f"*What changed since round {round_number}*"


def changes_fallback(round_number: int) -> str:
    return f"What changed since round {round_number}"


def _words(count: int) -> str:
    return f"{count:,} word{'' if count == 1 else 's'}"


def changes_count(removed: int, added: int) -> str:
    """``1 word removed, 3 added``: the counts that are not zero, and how they are marked."""
    said = [f"{_words(removed)} removed"] if removed else []
    if added:
        said.append(f"{added:,} added" if said else f"{_words(added)} added")
    return f"{', '.join(said)} · ~struck out~ removed, *bold* added"


CHANGES_TOO_LONG = "Its first change is too long to show here: the whole revised draft follows."


def changes_not_shown(count: int) -> str:
    more = "1 more change" if count == 1 else f"{count:,} more changes"
    return f"…and {more}: the whole revised draft follows."


# --- a run's progress -------------------------------------------------------------------------

PROGRESS_TASK = {"started": "⚙️", "finished": "✅"}


def progress_title(status: RunStatus, waiting_on: Collection[ReviewKind] = ()) -> str:
    return f"*Progress* · {run_status(status, waiting_on)}"


def progress_task(mark: str, name: str, agent: str) -> str:
    """One task's line: ``⚙️ *Outline otters* · Writer`` (escaped, cut, on one line)."""
    by = f" · {truncate(agent, 100)}" if agent else ""
    return f"{PROGRESS_TASK.get(mark, '•')} *{truncate(' '.join(name.split()), 150)}*{by}"


def progress_tool(name: str, agent: str, count: int) -> str:
    by = f" ({truncate(agent, 100)})" if agent else ""
    calls = "1 tool call" if count == 1 else f"{count:,} tool calls"
    return f"🔧 Last tool: {code(name)}{by} · {calls}"


def progress_waiting(people: Collection[str]) -> str:
    """Whom a waiting run waits for: the people (and groups) still expected, or anyone."""
    if not people:
        return "👀 Waiting for anyone in the channel"
    return "👀 Waiting for " + ", ".join(mention(p) for p in people)


def progress_fallback(status: RunStatus) -> str:
    return f"Progress: {RUN_STATUS[status]}"
