"""Runs and reviews as JSON documents: what ``countersign … --json`` prints and what the HTTP
API (``bot.hosting.api``) answers, one shape for both (the API's OpenAPI document,
``bot.hosting.openapi``, describes these).

Times are ISO 8601 in UTC with a ``Z``: storage holds naive UTC, and a reader should not have
to know that.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from storage import Decision, Delegation, Review, Run, details_to_json

__all__ = ["decision_json", "delegation_json", "iso", "review_json", "run_json"]


def iso(moment: datetime | None) -> str | None:
    """``2026-01-01T12:00:00Z`` for a naive-UTC or aware time; None stays None."""
    if moment is None:
        return None
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment.isoformat(timespec="seconds") + "Z"


def decision_json(decision: Decision | None) -> dict[str, Any] | None:
    if decision is None:
        return None
    return {
        "kind": decision.kind.value,
        "text": decision.text,
        "original": decision.original,
        "by": decision.decided_by,
        "at": iso(decision.created_at),
        "digest": decision.digest,
    }


def delegation_json(delegation: Delegation) -> dict[str, Any]:
    return {
        "person": delegation.person,
        "delegate": delegation.delegate,
        "until": iso(delegation.until),
        "by": delegation.created_by,
        "at": iso(delegation.created_at),
    }


def review_json(review: Review) -> dict[str, Any]:
    return {
        "id": review.id,
        "run_id": review.run_id,
        "kind": review.kind.value,
        "status": review.status.value,
        "prompt": review.prompt,
        "details": details_to_json(review.details),
        "created_at": iso(review.created_at),
        "decision": decision_json(review.decision),
        "approvals": [
            {"by": a.decided_by, "at": iso(a.created_at), "stage": a.stage}
            for a in review.approvals
        ],
        "stage": review.stage,
        "claimed_by": review.claimed_by,
        "claimed_at": iso(review.claimed_at),
        "digest": review.digest,
    }


def run_json(run: Run, reviews: Iterable[Review]) -> dict[str, Any]:
    return {
        "id": run.id,
        "crew": run.crew,
        "status": run.status.value,
        "inputs": dict(run.inputs),
        "output": run.output,
        "error": run.error,
        "started_by": run.started_by,
        "created_at": iso(run.created_at),
        "updated_at": iso(run.updated_at),
        "reviews": [review_json(review) for review in reviews],
    }
