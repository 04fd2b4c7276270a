"""Runs and reviews made in memory, for the block builders and the policy (no database)."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st

from storage import DecisionKind, Review, ReviewKind, ReviewStatus, Run, RunStatus
from storage.details import TaskReviewDetails, details_from_json
from storage.records import Decision

EMAIL = {
    "to": "ana@example.com",
    "subject": "A note on <otters> & co",
    "body": "Hi,\n\nA few notes.\n\nBest regards",
}


HOSTILE = "<!channel> hi <@U123> <https://evil.example|click to approve> a&b <!here>"


NOW = datetime(2026, 1, 2, 3, 4, 5)


def assert_safe(payload: Any) -> None:
    for shown in texts(payload):
        assert not LIVE.search(shown), shown
        leftover = OURS.sub("", shown)
        assert "<" not in leftover and ">" not in leftover.replace("\n>", "\n"), shown


def decided(review: Review, kind: DecisionKind, text: str | None = None) -> Review:
    decision = Decision(
        review_id=review.id,
        run_id=review.run_id,
        kind=kind,
        text=text,
        original=None,
        details={},
        decided_by="U0BOB",
        created_at=NOW + timedelta(minutes=5),
    )
    return make_review(
        review.prompt,
        review.kind,
        details=review.details,
        status=ReviewStatus.DECIDED,
        decision=decision,
    )


def email_review() -> Review:
    prompt = f"send_email({json.dumps(EMAIL)})"  # the call on one line, as the runtime asks
    details = {"tool": "send_email", "description": "Send an e-mail.", "args": EMAIL}
    return make_review(prompt, ReviewKind.TOOL_APPROVAL, details=details)


def make_review(
    prompt: str = "A short draft.", kind: ReviewKind = ReviewKind.TASK_REVIEW, **fields: Any
) -> Review:
    values: dict[str, Any] = {
        "id": "rev_0a1b2c3d4e5f",
        "run_id": "run_0a1b2c3d4e5f",
        "kind": kind,
        "status": ReviewStatus.PENDING,
        "stream": "0:writer",
        "seq": 0,
        "prompt": prompt,
        "details": TaskReviewDetails(task="write_post", agent="Writer"),
        "journal_pos": 3,
        "channel": "C0DRAFTS",
        "message_ts": "1700000250.000400",
        "created_at": NOW,
        "decided_at": None,
        "remind_at": None,
        "escalate_at": None,
        "expires_at": None,
    }
    values |= fields
    if isinstance(values["details"], dict):  # as stored: read as a row of the kind is
        values["details"] = details_from_json(kind, values["details"])
    return Review(**values)


def make_run(**fields: Any) -> Run:
    values: dict[str, Any] = {
        "id": "run_0a1b2c3d4e5f",
        "crew": "blog",
        "inputs": {"topic": "durable agents"},
        "status": RunStatus.WAITING,
        "output": None,
        "error": None,
        "divergence": None,
        "started_by": "U0ALICE",
        "channel": "C0DRAFTS",
        "thread_ts": "1700000000.000100",
        "attempts": 1,
        "lease_owner": None,
        "lease_token": None,
        "lease_expires": None,
        "created_at": NOW,
        "updated_at": NOW,
    }
    return Run(**(values | fields))


def texts(value: Any) -> list[str]:
    """Every ``text`` string in a payload (text objects, markdown blocks, fallbacks)."""
    found: list[str] = []
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "text" and isinstance(inner, str):
                found.append(inner)
            else:
                found += texts(inner)
    elif isinstance(value, list):
        for inner in value:
            found += texts(inner)
    return found


def typed_review(prompt: str, **details: Any) -> Review:
    return make_review(
        prompt,
        details={"task": "t", "agent": "Writer", "round": 1, "output_model": "Outline"}
        | {"output_schema": OUTLINE_SCHEMA}
        | details,
    )


def tool_review(args: dict[str, Any], schema: dict[str, Any] | None = None) -> Review:
    details = {"tool": "pay", "description": "Pays <!channel>", "args": args}
    details["schema"] = PAY_SCHEMA if schema is None else schema
    return make_review("pay", ReviewKind.TOOL_APPROVAL, details=details)


FAST = settings(deadline=None, max_examples=150)


SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
JSONISH = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


def review(kind: ReviewKind = ReviewKind.TASK_REVIEW) -> Review:
    return Review(
        id="rev_0a1b2c3d4e5f",
        run_id="run_0a1b2c3d4e5f",
        kind=kind,
        status=ReviewStatus.PENDING,
        stream="0:writer",
        seq=0,
        prompt="A draft",
        details=details_from_json(kind, {"agent": "writer"}),
        journal_pos=3,
        channel="C0DRAFTS",
        message_ts="1700000250.000400",
        created_at=NOW,
        decided_at=None,
        remind_at=None,
        escalate_at=None,
        expires_at=None,
    )


def run() -> Run:
    return Run(
        id="run_0a1b2c3d4e5f",
        crew="blog",
        inputs={},
        status=RunStatus.WAITING,
        output=None,
        error=None,
        divergence=None,
        started_by="U0ALICE",
        channel="C0DRAFTS",
        thread_ts="1700000000.000100",
        attempts=1,
        lease_owner=None,
        lease_token=None,
        lease_expires=None,
        created_at=NOW,
        updated_at=NOW,
    )


LIVE = re.compile(r"<!(channel|here|everyone|subteam)|<@U123|<https?:")


# What our own code may put in mrkdwn: mentions, channel links, dates.
OURS = re.compile(r"<@U0[A-Z]+>|<#C[A-Z0-9]+>|<!date\^\d+\^\{date_short_pretty\} \{time\}\|[^<>]*>")


OUTLINE_SCHEMA = {
    "title": "Outline",
    "type": "object",
    "properties": {"headline": {"type": "string"}, "sections": {"type": "integer"}},
    "required": ["headline", "sections"],
}


PAY_SCHEMA = {
    "properties": {
        "amount": {"title": "Amount", "type": "integer", "description": "In cents"},
        "to": {"title": "To", "type": "string"},
        "urgent": {"title": "Urgent", "type": "boolean", "default": False},
        "tags": {"title": "Tags", "type": "array", "items": {"type": "string"}},
        "memo": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
    },
    "required": ["amount", "to"],
    "title": "PayInput",
    "type": "object",
}
