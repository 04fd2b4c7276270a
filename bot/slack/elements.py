"""Block Kit's pieces, shared by the messages (``bot.slack.blocks``) and the modals
(``bot.slack.modals``): plain text, mrkdwn sections and contexts, a review's typed
details, a proposed value as a person reads it, and text cut to fit a section.

A mrkdwn piece takes text already escaped (``bot.slack.mrkdwn``) and is ``verbatim``, so
Slack adds no links or mentions of its own.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from itertools import accumulate
from typing import Any

from bot.slack.mrkdwn import ELLIPSIS, escape
from storage.details import TaskReviewDetails, ToolApprovalDetails
from storage.records import Review
from storage.status import DecisionKind

Block = dict[str, Any]

SECTION_LIMIT = 3000  # section text, Slack's limit


def plain(text: str, limit: int = SECTION_LIMIT) -> dict[str, Any]:
    cut = text if len(text) <= limit else text[: limit - 1] + ELLIPSIS
    return {"type": "plain_text", "text": cut or " ", "emoji": True}


def section(mrkdwn: str) -> Block:
    """A section of already-escaped mrkdwn; verbatim, so Slack adds no links or mentions."""
    return {"type": "section", "text": {"type": "mrkdwn", "text": mrkdwn, "verbatim": True}}


def context(mrkdwn: str) -> Block:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": mrkdwn, "verbatim": True}]}


def draft_details(review: Review) -> TaskReviewDetails:
    """A task's draft's details (a typed output, a refused edit); defaults for other reviews."""
    details = review.details
    return details if isinstance(details, TaskReviewDetails) else TaskReviewDetails()


def proposed(review: Review) -> dict[str, Any] | None:
    """A tool call's proposed arguments; None for other reviews (and tool calls recorded
    without them)."""
    details = review.details
    return details.args if isinstance(details, ToolApprovalDetails) else None


def ran_args(review: Review) -> dict[str, Any] | None:
    """A tool call's arguments as it runs: a reviewer's edit (all of them, the text of the
    decision) once approved with edits, else the proposed ones; None for other reviews."""
    args = proposed(review)
    decision = review.decision
    if args is None or decision is None or decision.kind is not DecisionKind.EDIT:
        return args
    try:
        edited = json.loads(decision.text or "")
    except ValueError:
        return args
    return edited if isinstance(edited, dict) else args


def changed_args(review: Review) -> list[str]:
    """The names of the arguments a reviewer's edit changed (added or dropped), in order."""
    before, after = proposed(review) or {}, ran_args(review) or {}
    names = [*after, *(name for name in before if name not in after)]
    return [n for n in names if before.get(n, _MISSING) != after.get(n, _MISSING)]


_MISSING = object()


def args_line(args: dict[str, Any]) -> str:
    """Arguments on one line, as a person reads them: ``to: ana@example.com · subject: Hi``
    (unescaped; whoever shows it escapes and cuts it)."""
    return " · ".join(
        f"{name}: {' '.join(arg_text(value).split())}" for name, value in args.items()
    )


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def arg_text(value: Any) -> str:
    """A proposed value as a person edits it: text as is, anything else as JSON."""
    if isinstance(value, str):
        return value
    indent = 2 if isinstance(value, list | dict) and value else None
    return json.dumps(value, indent=indent, ensure_ascii=False, default=str)


def _cost(char: str) -> int:
    return len(escape(char))


def split_text(raw: str, limit: int) -> list[str]:
    """Cut ``raw`` into pieces whose *escaped* length is at most ``limit``.

    Cuts after a blank line, else after a newline, else after a space, as long as that
    keeps a piece at least half full; otherwise mid-word. Never inside an entity, since it
    cuts the raw text. ``"".join(split_text(raw, n)) == raw``.
    """
    if limit < len(escape("&")):
        raise ValueError("limit must hold any one escaped character")
    if not raw:
        return []
    sums = [0, *accumulate(_cost(c) for c in raw)]
    pieces: list[str] = []
    start = 0
    while start < len(raw):
        end = bisect_right(sums, sums[start] + limit) - 1
        if end < len(raw):
            floor = start + (end - start) // 2
            for sep in ("\n\n", "\n", " "):
                at = raw.rfind(sep, floor, end)
                if at != -1:
                    end = at + len(sep)
                    break
        pieces.append(raw[start:end])
        start = end
    return pieces
