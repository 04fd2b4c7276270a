"""The audit trail: one record per decision, whether its run is still here or was pruned.

A live run's records are read from its rows (the decision, its review, the run, and for a
gated tool call the journal's record of the call as it ran); retention copies them into the
``audit`` table in the transaction that deletes those rows (:func:`copy_audit`), so a pruned
run keeps its trail until ``keep_audit`` prunes that too. Deciding writes nothing extra: the
rows a decision already commits are the record. Claims and reassignments of a review are
records too (``decision`` "claim" or "reassign", ``assigned_to`` who has it since), and so are
standing approvals granted and revoked (``decision`` "standing" or "standing_revoked", the
tool and the argument values in ``details``), read from ``review_events``, which outlives its
run without a copy; so are the steps of a run Slack refused for good (``decision``
"slack_refused", by "countersign", the outbox row, Slack's error and words and whether the run
was cancelled in ``details``), written by ``OutboxStore.give_up_outbox``. Delegations while
away are records of no run (``decision`` "away", the delegate in ``assigned_to``, who is away
and until when in ``details``; "back" when one ended early, or was replaced by a new one), read
from ``delegations``.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Select, and_, insert, literal, select, union_all

from storage.base import StoreBase
from storage.schema import audit, decisions, delegations, journal, review_events, reviews, runs
from storage.status import (
    APPROVAL_STAGES,
    APPROVED_BY,
    DIGEST,
    DecisionKind,
    ReviewEventKind,
    ReviewKind,
)
from storage.word_diff import plain, word_diff

# Rows fetched at a time from a server-side cursor: an export holds this many, not all.
_STREAM_BATCH = 1_000
# A delegation's records: begun, and ended early (or replaced by a new one).
_AWAY = "away"
_BACK = "back"


@dataclass(frozen=True)
class AuditRecord:
    """Who decided what, when, on which run; for a gated tool call, its arguments as the
        model proposed them, as the reviewer approved them, and as the tool was called; for a
        review that needed several approvals, who had approved it (``approved_by``), and where it
        had an approval chain, at which stage each did (``approval_stages``: ``{"by", "stage"}``
        in order); for a claim
        or a reassignment (``decision`` "claim" or "reassign"), who has the review since
        (``assigned_to``); for a standing approval granted or revoked (``decision`` "standing" or
        "standing_revoked"), its id, tool and argument values (``details``); for a delegation
        (``decision`` "away" or "back", no run), the delegate (``assigned_to``) and who is away
        and until when (``details``); for a draft edited and approved, what the edit changed, word
        by word (``edit_diff``, as :func:`storage.word_diff.plain` writes it). ``digest`` is the
    action digest the decision covered (an edit's: the edited action's); a gated call a rule
    decided (``decision`` "rule", by ``rule:NAME``) names its ``rule``, and says approve or reject
    and what matched in ``details``; one a standing approval approved is ``decision``
    "standing_used", by who granted it, the standing approval and its values in ``details``;
    a call the worker refused to run because what it was about
    to run was not what was approved is ``decision`` "digest_mismatch" (both digests in
    ``details``)."""

    run_id: str
    crew: str
    review_id: str
    review_kind: str
    decision: str
    decided_by: str
    decided_at: datetime
    feedback: str | None = None
    approved_by: list[str] | None = None
    proposed_args: dict[str, Any] | None = None
    approved_args: dict[str, Any] | None = None
    executed_args: dict[str, Any] | None = None
    channel: str | None = None
    thread_ts: str | None = None
    assigned_to: str | None = None
    details: dict[str, Any] | None = None
    approval_stages: list[dict[str, Any]] | None = None
    edit_diff: str | None = None
    digest: str | None = None
    rule: str | None = None


def _live_query() -> Select[Any]:
    """The records of the decisions still in ``decisions`` and not yet copied to ``audit``."""
    tool_call = and_(
        reviews.c.kind == ReviewKind.TOOL_APPROVAL,
        journal.c.run_id == reviews.c.run_id,
        journal.c.stream == reviews.c.stream,
        journal.c.kind == "tool",
        journal.c.seq == reviews.c.seq,
    )
    copied = select(audit.c.review_id).where(audit.c.review_id == decisions.c.review_id)
    return (
        select(
            runs.c.id.label("run_id"),
            runs.c.crew,
            reviews.c.id.label("review_id"),
            reviews.c.kind.label("review_kind"),
            reviews.c.details.label("review_details"),
            decisions.c.kind.label("decision"),
            decisions.c.decided_by,
            decisions.c.created_at.label("decided_at"),
            decisions.c.text.label("feedback"),
            decisions.c.original,
            decisions.c.details.label("decision_details"),
            journal.c.payload.label("executed"),
            runs.c.channel,
            runs.c.thread_ts,
        )
        .select_from(
            decisions.join(reviews, reviews.c.id == decisions.c.review_id)
            .join(runs, runs.c.id == decisions.c.run_id)
            .outerjoin(journal, tool_call)
        )
        .where(~copied.exists())
    )


def _live_record(row: Any) -> AuditRecord:
    proposed = executed = approved = None
    feedback = row.feedback
    if row.review_kind == ReviewKind.TOOL_APPROVAL:
        details = row.review_details or {}
        proposed = details.get("args") if isinstance(details.get("args"), dict) else None
        if row.decision == DecisionKind.APPROVE:
            approved = proposed
        elif row.decision == DecisionKind.EDIT and row.feedback:
            approved = json.loads(row.feedback)
            feedback = None  # the edit is the approved arguments, not words
        payload = row.executed or {}
        executed = payload.get("args") if isinstance(payload.get("args"), dict) else None
    approvers = (row.decision_details or {}).get(APPROVED_BY)
    digest = (row.decision_details or {}).get(DIGEST)
    stages = (row.decision_details or {}).get(APPROVAL_STAGES)
    edit_diff = None
    if row.decision == DecisionKind.EDIT and row.original is not None and feedback is not None:
        edit_diff = plain(word_diff(row.original, feedback)) or None
    return AuditRecord(
        run_id=row.run_id,
        crew=row.crew,
        review_id=row.review_id,
        review_kind=row.review_kind,
        decision=row.decision,
        decided_by=row.decided_by,
        decided_at=row.decided_at,
        feedback=feedback,
        approved_by=list(approvers) if isinstance(approvers, list) else None,
        proposed_args=proposed,
        approved_args=approved,
        executed_args=executed,
        channel=row.channel,
        thread_ts=row.thread_ts,
        approval_stages=list(stages) if isinstance(stages, list) else None,
        edit_diff=edit_diff,
        digest=digest if isinstance(digest, str) else None,
    )


def _kept_record(row: Any) -> AuditRecord:
    return AuditRecord(**row._mapping)


def _event_record(row: Any) -> AuditRecord:
    handed = row.kind in (ReviewEventKind.CLAIM, ReviewEventKind.REASSIGN)
    details = row.details or {}
    ruled = row.kind == ReviewEventKind.RULE
    auto = ruled or row.kind == ReviewEventKind.STANDING_APPLIED
    args = details.get("args") if auto and isinstance(details.get("args"), dict) else None
    digest = details.get("digest" if auto else "approved")
    return AuditRecord(
        run_id=row.run_id,
        crew=row.crew,
        review_id=row.review_id,
        review_kind=row.review_kind,
        decision=row.kind,
        decided_by=row.by,
        decided_at=row.at,
        channel=row.channel,
        thread_ts=row.thread_ts,
        assigned_to=row.to if handed else None,
        details=row.details,
        proposed_args=args,
        approved_args=args if details.get("decide", "approve") == "approve" else None,
        digest=digest if isinstance(digest, str) else None,
        rule=str(details["rule"]) if ruled and "rule" in details else None,
    )


def _delegation_query(since: datetime, until: datetime) -> Select[Any]:
    """Delegations begun (``away``) and ended early or replaced (``back``) in the range, as
    one stream in time order."""
    columns = (
        delegations.c.id,
        delegations.c.person,
        delegations.c.delegate,
        delegations.c.until,
    )
    away = select(
        *columns,
        literal(_AWAY).label("kind"),
        delegations.c.created_by.label("by"),
        delegations.c.created_at.label("at"),
    ).where(delegations.c.created_at >= since, delegations.c.created_at < until)
    back = select(
        *columns,
        literal(_BACK).label("kind"),
        delegations.c.ended_by.label("by"),
        delegations.c.ended_at.label("at"),
    ).where(delegations.c.ended_at >= since, delegations.c.ended_at < until)
    both = union_all(away, back).subquery()
    return select(both).order_by(both.c.at, both.c.id, both.c.kind)


def _delegation_record(row: Any) -> AuditRecord:
    details = {"person": row.person, "delegate": row.delegate, "until": _iso(row.until)}
    return AuditRecord(
        run_id="",
        crew="",
        review_id="",
        review_kind="",
        decision=row.kind,
        decided_by=row.by,
        decided_at=row.at,
        assigned_to=row.delegate,
        details=details,
    )


def _iso(moment: datetime) -> str:
    return moment.isoformat() + "Z"


def copy_audit(conn: Connection, run_ids: Collection[str], *, since: datetime | None) -> int:
    """Copy the records of ``run_ids``' decisions (made at ``since`` or later; None: all)
    into ``audit``, before their rows are deleted in the same transaction."""
    query = _live_query().where(decisions.c.run_id.in_(list(run_ids)))
    if since is not None:
        query = query.where(decisions.c.created_at >= since)
    records = [_live_record(row) for row in conn.execute(query)]
    if records:
        kept = [column.key for column in audit.c]
        conn.execute(insert(audit), [{k: record.__dict__[k] for k in kept} for record in records])
    return len(records)


class AuditStore(StoreBase):
    """The audit trail, read in time order in constant memory."""

    def audit_records(
        self, *, since: datetime, until: datetime, crew: str | None = None
    ) -> Iterator[AuditRecord]:
        """Every decision, claim, reassignment, standing approval granted or revoked and
        delegation begun or ended made in ``[since, until)``, oldest first; with ``crew``,
        that crew's runs' alone (a delegation belongs to no crew).

        Server-side cursors (the live decisions, the kept records of pruned runs, the review
        events, the delegations) merged by time: memory stays the same whatever the size of
        the range.
        """
        live = _live_query().where(decisions.c.created_at >= since, decisions.c.created_at < until)
        kept = select(audit).where(audit.c.decided_at >= since, audit.c.decided_at < until)
        events = select(review_events).where(
            review_events.c.at >= since, review_events.c.at < until
        )
        if crew is not None:
            live = live.where(runs.c.crew == crew)
            kept = kept.where(audit.c.crew == crew)
            events = events.where(review_events.c.crew == crew)
        live = live.order_by(decisions.c.created_at, decisions.c.review_id)
        kept = kept.order_by(audit.c.decided_at, audit.c.review_id)
        events = events.order_by(review_events.c.at, review_events.c.review_id)
        with (
            self.engine.connect() as live_conn,
            self.engine.connect() as kept_conn,
            self.engine.connect() as events_conn,
            self.engine.connect() as away_conn,
        ):
            streams = [
                (_live_record(row) for row in _streamed(live_conn, live)),
                (_kept_record(row) for row in _streamed(kept_conn, kept)),
                (_event_record(row) for row in _streamed(events_conn, events)),
            ]
            if crew is None:
                away = _delegation_query(since, until)
                streams.append(_delegation_record(row) for row in _streamed(away_conn, away))
            yield from heapq.merge(*streams, key=lambda r: (r.decided_at, r.review_id))


def _streamed(conn: Connection, query: Select[Any]) -> Iterator[Any]:
    result = conn.execution_options(stream_results=True, yield_per=_STREAM_BATCH).execute(query)
    yield from result
