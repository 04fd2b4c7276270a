"""The action digest: what a decision is bound to.

Every gated tool call and every reviewed draft gets a digest when it is proposed: SHA-256
over the RFC 8785 canonical JSON (``rfc8785``) of what would be done. For a call, the tool's
name, the arguments as they would be executed, the run and the call's place (its stream,
``task{n}:{role}``, and its number there); for a draft, its text and its typed output (the
JSON of a typed task's model, else null), the run and the review round's place. The digest
is stored with the review; the decision carries the digest it approved (an edit's is that of
the edited call or draft, made by :func:`approved_digest`), and before a gated call runs the
worker computes the digest of what it is about to run and compares (``tool_journal``); a
resumed run does the same for the draft it goes on with (``review``).

A question (``ask_human``) does nothing by itself, so it has no digest.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import rfc8785

from storage import (
    FlowFeedbackDetails,
    NewReview,
    Review,
    ReviewKind,
    TaskReviewDetails,
    ToolApprovalDetails,
)

DIGEST_RE = re.compile(r"[0-9a-fA-F]{8,64}")
"""What a decision may name as the digest it saw: the whole digest, or its first 8 or more."""

SHORT = 12
"""How many hex digits of a digest people are shown (the Slack card, the Home tab)."""


_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _digest(action: dict[str, Any]) -> str:
    # A value JSON cannot hold (a date a tool was handed) is its text, as the journal keeps it.
    plain = json.loads(json.dumps(action, default=str), object_hook=_utf8)
    return hashlib.sha256(rfc8785.dumps(plain)).hexdigest()


def _utf8(value: dict[str, Any]) -> dict[str, Any]:
    """``value`` with each lone surrogate of its strings (half of a UTF-16 pair, which RFC 8785
    refuses, and no database stores either: such a review fails its run) written as its JSON
    escape, so that its digest can be made and the run fail where it would without one."""
    return {_escaped(key): _escaped(item) for key, item in value.items()}


def _escaped(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", value)
    if isinstance(value, list):
        return [_escaped(item) for item in value]
    return value


def call_digest(run_id: str, stream: str, seq: int, tool: str, args: dict[str, Any]) -> str:
    """The digest of calling ``tool`` with ``args`` at ``(stream, seq)`` of the run."""
    return _digest(
        {
            "action": "tool_call",
            "run": run_id,
            "task": stream,
            "seq": seq,
            "tool": tool,
            "args": args,
        }
    )


def draft_digest(run_id: str, stream: str, seq: int, text: str, typed: bool) -> str:
    """The digest of a draft ``text`` at ``(stream, seq)``; a ``typed`` draft's output is its
    JSON (null where it is not JSON: the model refuses it anyway)."""
    output: Any = None
    if typed:
        try:
            output = json.loads(text)
        except ValueError:
            output = None
    return _digest(
        {
            "action": "draft",
            "run": run_id,
            "task": stream,
            "seq": seq,
            "text": text,
            "output": output,
        }
    )


def proposed_digest(run_id: str, review: NewReview) -> str | None:
    """The digest of what ``review`` proposes (None for a question)."""
    details = review.details
    if isinstance(details, ToolApprovalDetails):
        return call_digest(run_id, review.stream, review.seq, details.tool, details.args or {})
    if review.kind is ReviewKind.TASK_REVIEW:
        typed = isinstance(details, TaskReviewDetails) and details.output_model is not None
        return draft_digest(run_id, review.stream, review.seq, review.prompt, typed)
    return None


def approved_digest(review: Review, edited: str | None) -> str | None:
    """The digest an approval of ``review`` covers: the review's own, or, for an edit
    (``edited``: the compact JSON of a call's new arguments, or the new draft), that of the
    edited call or draft. None where the review has no digest (a question, an older row)."""
    if review.digest is None or edited is None:
        return review.digest
    details = review.details
    if isinstance(details, ToolApprovalDetails):
        return call_digest(
            review.run_id, review.stream, review.seq, details.tool, json.loads(edited)
        )
    typed = isinstance(details, TaskReviewDetails) and details.output_model is not None
    if isinstance(details, TaskReviewDetails | FlowFeedbackDetails):
        return draft_digest(review.run_id, review.stream, review.seq, edited, typed)
    return review.digest


def matches(digest: str | None, expected: str) -> bool:
    """Whether ``expected`` (the whole digest, or at least its first 8 hex digits, as a card
    shows it) names ``digest``."""
    wanted = expected.strip().lower()
    return digest is not None and len(wanted) >= 8 and digest.startswith(wanted)


def short(digest: str | None) -> str | None:
    """The digest as people are shown it: its first :data:`SHORT` hex digits."""
    return None if digest is None else digest[:SHORT]
