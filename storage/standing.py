"""The Store's standing approvals: granted with the approval of a gated tool's call (in the
transaction of :meth:`ReviewStore.decide`), found when a later call of the tool would ask,
revoked by a compare-and-set. Granting and revoking each write a ``review_events`` row for
the audit trail (it outlives the run, as claims do) and an outbox row for the run's thread,
in the same transaction."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, insert, select, update

from storage.base import StoreBase, enqueue, new_id
from storage.errors import AlreadyRevoked
from storage.records import Review, Run, StandingApproval
from storage.rows import load_run, load_standing, to_standing
from storage.schema import review_events, standing_approvals
from storage.status import OutboxKind, ReviewEventKind, ReviewKind


class StandingStore(StoreBase):
    """Standing approvals of a run's gated tools."""

    def standing_approvals(self, run_id: str) -> list[StandingApproval]:
        """The run's standing approvals, revoked ones included, oldest first."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(standing_approvals)
                .where(standing_approvals.c.run_id == run_id)
                .order_by(standing_approvals.c.created_at, standing_approvals.c.id)
            ).all()
        return [to_standing(row) for row in rows]

    def get_standing(self, standing_id: str) -> StandingApproval:
        """Raises: StandingNotFound."""
        with self.engine.connect() as conn:
            return load_standing(conn, standing_id)

    def standing_for(
        self, run_id: str, tool: str, args: Mapping[str, Any]
    ) -> StandingApproval | None:
        """The oldest standing approval of the run, not revoked, that covers a call of
        ``tool`` with ``args``; None when there is none (the call is reviewed)."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(standing_approvals)
                .where(
                    standing_approvals.c.run_id == run_id,
                    standing_approvals.c.tool == tool,
                    standing_approvals.c.revoked_at.is_(None),
                )
                .order_by(standing_approvals.c.created_at, standing_approvals.c.id)
            ).all()
        found = (to_standing(row) for row in rows)
        return next((s for s in found if s.covers(tool, args)), None)

    def revoke_standing(self, standing_id: str, *, by: str) -> StandingApproval:
        """Revoke a standing approval exactly once: later calls of its tool are reviewed.
        The run's thread is told (its message about the standing approval is edited).

        Raises:
            StandingNotFound: no such standing approval.
            AlreadyRevoked: somebody revoked it first; the exception says who and when.
        """
        now = self.clock()
        with self._tx() as conn:
            moved = conn.execute(
                update(standing_approvals)
                .where(
                    standing_approvals.c.id == standing_id,
                    standing_approvals.c.revoked_at.is_(None),
                )
                .values(revoked_by=by, revoked_at=now)
            ).rowcount
            standing = load_standing(conn, standing_id)
            if moved != 1:
                assert standing.revoked_by is not None and standing.revoked_at is not None
                raise AlreadyRevoked(standing_id, standing.revoked_by, standing.revoked_at)
            run = load_run(conn, standing.run_id)
            _event(conn, run, standing, ReviewEventKind.STANDING_REVOKED, by, now)
            said = {"standing": standing_id}
            self._enqueue(conn, run.id, OutboxKind.STANDING_REVOKED, standing.review_id, said)
            return standing

    def place_standing(self, standing_id: str, channel: str, ts: str) -> None:
        """Remember where the standing approval's thread message is (to edit it later)."""
        with self._tx() as conn:
            conn.execute(
                update(standing_approvals)
                .where(standing_approvals.c.id == standing_id)
                .values(channel=channel, message_ts=ts)
            )


def _event(
    conn: Connection,
    run: Run,
    standing: StandingApproval,
    kind: ReviewEventKind,
    by: str,
    now: datetime,
) -> None:
    """The audit trail's record of a standing approval granted or revoked."""
    conn.execute(
        insert(review_events).values(
            review_id=standing.review_id,
            run_id=run.id,
            crew=run.crew,
            review_kind=ReviewKind.TOOL_APPROVAL,
            kind=kind,
            by=by,
            to=by,
            at=now,
            channel=run.channel,
            thread_ts=run.thread_ts,
            details={"standing": standing.id, "tool": standing.tool, "match": standing.match},
        )
    )


def grant_standing(
    conn: Connection, review: Review, tool: str, match: Mapping[str, Any], by: str, now: datetime
) -> None:
    """Record, in the caller's transaction (the approval's), ``by``'s standing approval of
    ``tool`` in ``review``'s run for calls whose arguments named in ``match`` have its values;
    its audit record and its thread message with it."""
    standing = StandingApproval(
        id=new_id("std"),
        run_id=review.run_id,
        review_id=review.id,
        tool=tool,
        match=dict(match),
        granted_by=by,
        created_at=now,
    )
    conn.execute(
        insert(standing_approvals).values(
            id=standing.id,
            run_id=standing.run_id,
            review_id=standing.review_id,
            tool=tool,
            match=standing.match,
            granted_by=by,
            created_at=now,
        )
    )
    run = load_run(conn, review.run_id)
    _event(conn, run, standing, ReviewEventKind.STANDING, by, now)
    said = {"standing": standing.id}
    enqueue(conn, now, run.id, OutboxKind.STANDING_GRANTED, review.id, said)
