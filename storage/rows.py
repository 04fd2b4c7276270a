"""Rows read back as the records of ``storage.records``: a run, a review with its decision,
an outbox message, a standing approval."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, Row, select

from storage.details import details_from_json
from storage.errors import ReviewNotFound, RunNotFound, StandingNotFound
from storage.records import (
    Approval,
    Decision,
    OutboxMessage,
    Raised,
    Review,
    Run,
    StandingApproval,
)
from storage.schema import approvals, decisions, reviews, runs, standing_approvals
from storage.status import DecisionKind, ReviewKind, ReviewStatus, RunStatus


def load_run(conn: Connection, run_id: str, *, lock: bool = False) -> Run:
    """The run ``run_id``; with ``lock``, its row locked for the transaction."""
    query = select(runs).where(runs.c.id == run_id)
    if lock:
        query = query.with_for_update()
    row = conn.execute(query).first()
    if row is None:
        raise RunNotFound(run_id)
    return to_run(row)


def load_review(conn: Connection, review_id: str, *, lock: bool = False) -> Review:
    """The review ``review_id`` with its decision and approvals; with ``lock``, its row
    locked."""
    query = select(reviews).where(reviews.c.id == review_id)
    if lock:
        query = query.with_for_update()
    row = conn.execute(query).first()
    if row is None:
        raise ReviewNotFound(review_id)
    decision = decisions_by_review(conn, [review_id]).get(review_id)
    return to_review(row, decision, approvals_by_review(conn, [review_id]).get(review_id, ()))


def approvals_by_review(conn: Connection, review_ids: list[str]) -> dict[str, tuple[Approval, ...]]:
    """Each review's approvals, in the order they were given."""
    found: dict[str, list[Approval]] = {}
    for start in range(0, len(review_ids), _IDS_PER_QUERY):
        rows = conn.execute(
            select(approvals)
            .where(approvals.c.review_id.in_(review_ids[start : start + _IDS_PER_QUERY]))
            .order_by(approvals.c.created_at, approvals.c.id)
        )
        for row in rows:
            found.setdefault(row.review_id, []).append(
                Approval(
                    review_id=row.review_id,
                    decided_by=row.decided_by,
                    details=row.details,
                    created_at=row.created_at,
                    request_key=row.request_key,
                    stage=row.stage,
                )
            )
    return {review_id: tuple(given) for review_id, given in found.items()}


# Ids per query: PostgreSQL's protocol takes at most 65,535 parameters a statement, and a
# listing of every pending review of a big deployment has more.
_IDS_PER_QUERY = 5_000


def decisions_by_review(conn: Connection, review_ids: list[str]) -> dict[str, Decision]:
    found: dict[str, Decision] = {}
    for start in range(0, len(review_ids), _IDS_PER_QUERY):
        chunk = review_ids[start : start + _IDS_PER_QUERY]
        found.update(_decisions(conn, chunk))
    return found


def _decisions(conn: Connection, review_ids: list[str]) -> dict[str, Decision]:
    rows = conn.execute(select(decisions).where(decisions.c.review_id.in_(review_ids)))
    return {
        row.review_id: Decision(
            review_id=row.review_id,
            run_id=row.run_id,
            kind=DecisionKind(row.kind),
            text=row.text,
            original=row.original,
            details=row.details,
            decided_by=row.decided_by,
            created_at=row.created_at,
            request_key=row.request_key,
        )
        for row in rows
    }


def to_run(row: Row[Any]) -> Run:
    return Run(
        id=row.id,
        crew=row.crew,
        inputs=row.inputs,
        status=RunStatus(row.status),
        output=row.output,
        error=row.error,
        divergence=row.divergence,
        started_by=row.started_by,
        channel=row.channel,
        thread_ts=row.thread_ts,
        attempts=row.attempts,
        lease_owner=row.lease_owner,
        lease_token=row.lease_token,
        lease_expires=row.lease_expires,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def to_reviews(conn: Connection, rows: Sequence[Row[Any]]) -> list[Review]:
    """The reviews of ``rows``, in their order, each with its decision and approvals."""
    ids = [row.id for row in rows]
    found = decisions_by_review(conn, ids)
    given = approvals_by_review(conn, ids)
    return [to_review(row, found.get(row.id), given.get(row.id, ())) for row in rows]


def to_review(
    row: Row[Any], decision: Decision | None, approved: tuple[Approval, ...] = ()
) -> Review:
    kind = ReviewKind(row.kind)
    return Review(
        id=row.id,
        run_id=row.run_id,
        kind=kind,
        status=ReviewStatus(row.status),
        stream=row.stream,
        seq=row.seq,
        prompt=row.prompt,
        details=details_from_json(kind, row.details),
        journal_pos=row.journal_pos,
        channel=row.channel,
        message_ts=row.message_ts,
        created_at=row.created_at,
        decided_at=row.decided_at,
        remind_at=row.remind_at,
        escalate_at=row.escalate_at,
        expires_at=row.expires_at,
        decision=decision,
        approvals=approved,
        claimed_by=row.claimed_by,
        claimed_at=row.claimed_at,
        stage=row.stage,
        digest=row.digest,
        raised=Raised.from_json(row.reviewers),
    )


def to_outbox_message(row: Row[Any]) -> OutboxMessage:
    return OutboxMessage(
        id=row.id,
        run_id=row.run_id,
        review_id=row.review_id,
        kind=row.kind,
        payload=row.payload,
        attempts=row.attempts,
        created_at=row.created_at,
        progress=row.progress,
    )


def load_standing(conn: Connection, standing_id: str) -> StandingApproval:
    row = conn.execute(
        select(standing_approvals).where(standing_approvals.c.id == standing_id)
    ).first()
    if row is None:
        raise StandingNotFound(standing_id)
    return to_standing(row)


def to_standing(row: Row[Any]) -> StandingApproval:
    return StandingApproval(
        id=row.id,
        run_id=row.run_id,
        review_id=row.review_id,
        tool=row.tool,
        match=dict(row.match),
        granted_by=row.granted_by,
        created_at=row.created_at,
        revoked_by=row.revoked_by,
        revoked_at=row.revoked_at,
        channel=row.channel,
        message_ts=row.message_ts,
    )
