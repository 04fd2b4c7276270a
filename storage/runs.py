"""The Store's runs and their leases: create, claim, renew, release, suspend, settle, cancel.

A claim's lease token fences every write of its execution (``storage.fencing``).
"""

from __future__ import annotations

import secrets
from collections.abc import Collection, Mapping, Sequence
from datetime import timedelta

from sqlalchemy import Connection, delete, func, insert, select
from sqlalchemy.exc import IntegrityError

from storage import leases
from storage.base import StoreBase, new_id
from storage.details import details_to_json
from storage.errors import AlreadyFinal, LeaseLost
from storage.fencing import NO_LEASE
from storage.journal import append_entry, next_pos
from storage.records import FlowPause, NewEntry, NewReview, Review, Run, Snapshot
from storage.rows import load_review, load_run, to_run
from storage.schema import flow_pending, reviews, runs, snapshots
from storage.status import FINAL_RUN_STATUSES, OutboxKind, ReviewStatus, RunStatus
from storage.tallies import add as add_tallies
from storage.tallies import reviews_opened
from storage.transitions import move_reviews, move_run, moved_run
from storage.wakeups import RUNS, notify
from storage.webhooks import WebhookEventType, record_event

# A run whose worker died this many times is failed instead of being retried forever.
MAX_RECOVERIES = 3


class RunStore(StoreBase):
    """Runs from their creation to their end, and the leases of the workers executing them."""

    def create_run(
        self,
        crew: str,
        inputs: dict[str, str],
        *,
        started_by: str | None = None,
        channel: str | None = None,
        request_key: str | None = None,
    ) -> Run:
        """Queue a new run and announce it (the run's root message) in the same transaction.

        With ``request_key``, the run a request already started is returned instead of a
        second one: a replayed ``/crew run`` starts nothing new.
        """
        now = self.clock()
        run_id = new_id("run")
        try:
            with self._tx() as conn:
                if request_key is not None:
                    earlier = _run_of_request(conn, request_key)
                    if earlier is not None:
                        return earlier
                conn.execute(
                    insert(runs).values(
                        id=run_id,
                        crew=crew,
                        inputs=dict(inputs),
                        status=RunStatus.QUEUED,
                        started_by=started_by,
                        request_key=request_key,
                        channel=channel,
                        attempts=0,
                        created_at=now,
                        updated_at=now,
                    )
                )
                add_tallies(conn, [(crew, RunStatus.QUEUED, 1)])
                self._enqueue(conn, run_id, OutboxKind.RUN_STARTED)
                notify(conn, RUNS)
                return load_run(conn, run_id)
        except IntegrityError:
            if request_key is None:
                raise
            # Two handlers of one request raced (PostgreSQL); the other one's run stands.
            with self.engine.connect() as conn:
                found = _run_of_request(conn, request_key)
            if found is None:
                raise
            return found

    def get_run(self, run_id: str) -> Run:
        with self.engine.connect() as conn:
            return load_run(conn, run_id)

    def list_runs(
        self, *, status: RunStatus | None = None, crew: str | None = None, limit: int = 100
    ) -> list[Run]:
        query = select(runs).order_by(runs.c.created_at.desc(), runs.c.id).limit(limit)
        if status is not None:
            query = query.where(runs.c.status == status)
        if crew is not None:
            query = query.where(runs.c.crew == crew)
        with self.engine.connect() as conn:
            return [to_run(row) for row in conn.execute(query)]

    def count_runs(self, status: RunStatus) -> int:
        with self.engine.connect() as conn:
            query = select(func.count()).select_from(runs).where(runs.c.status == status)
            return int(conn.execute(query).scalar_one())

    def find_run_by_thread(self, channel: str, thread_ts: str) -> Run | None:
        """The run whose root message is ``thread_ts`` in ``channel``."""
        with self.engine.connect() as conn:
            row = conn.execute(
                select(runs).where(runs.c.channel == channel, runs.c.thread_ts == thread_ts)
            ).first()
            return None if row is None else to_run(row)

    def claim_run(
        self, worker_id: str, lease: timedelta, *, exclude: Collection[str] = ()
    ) -> Run | None:
        """Take the oldest runnable run: queued, or running under an expired lease.

        The claim gets a fencing token of its own (``Run.lease_token``); the execution
        passes it to every write, and a later claim of the same run, by any worker,
        fences it off. ``exclude`` names runs the caller is executing: a worker that
        stalled past its lease must renew it, not start a second execution beside the first.

        On PostgreSQL the candidate row is locked with ``FOR UPDATE SKIP LOCKED`` so
        concurrent workers pick different runs; SQLite serialises writers anyway.
        """
        now = self.clock()
        runnable = (runs.c.status == RunStatus.QUEUED) | (
            (runs.c.status == RunStatus.RUNNING) & leases.RUNS.expired(now)
        )
        if exclude:
            runnable = runnable & runs.c.id.not_in(list(exclude))
        with self._tx() as conn:
            while True:
                row = conn.execute(
                    select(runs.c.id, runs.c.status, runs.c.attempts)
                    .where(runnable)
                    .order_by(runs.c.updated_at, runs.c.id)
                    .limit(1)
                    .with_for_update(skip_locked=True)
                ).first()
                if row is None:
                    return None
                recovering = row.status == RunStatus.RUNNING
                attempts = row.attempts + (1 if recovering else 0)
                if recovering and attempts > MAX_RECOVERIES:
                    move_run(
                        conn,
                        row.id,
                        RunStatus.RUNNING,
                        RunStatus.FAILED,
                        error=f"gave up: the worker running it stopped {attempts} times",
                        **NO_LEASE,
                        updated_at=now,
                    )
                    self._enqueue(conn, row.id, OutboxKind.RUN_FINISHED)
                    record_event(conn, now, WebhookEventType.RUN_FINISHED, row.id)
                    continue
                claimed = moved_run(
                    conn,
                    row.id,
                    RunStatus(row.status),
                    RunStatus.RUNNING,
                    lease_owner=worker_id,
                    lease_token=secrets.token_hex(16),
                    lease_expires=now + lease,
                    attempts=attempts,
                    updated_at=now,
                )
                if claimed is not None:
                    return to_run(claimed)

    def extend_lease(self, run_id: str, token: str, lease: timedelta) -> bool:
        """Renew the lease of the claim ``token`` if it still holds the run.

        The worker's heartbeat, and the check an execution makes before each live call.
        Renewing an expired lease is safe: the token still matching means nobody claimed
        the run meanwhile. False means the run was cancelled, finished or claimed again:
        stop working on it.
        """
        with self._tx() as conn:
            return leases.RUNS.renew(conn, run_id, token, self.clock() + lease)

    def extend_leases(self, claims: Mapping[str, str], lease: timedelta) -> set[str]:
        """Renew, in one statement, the lease of each claim (run id -> token) that still
        holds its run: the heartbeat of a worker executing many runs at once (one write, not
        one per run). Returns the runs renewed; a run left out was cancelled, finished or
        claimed again."""
        if not claims:
            return set()
        with self._tx() as conn:
            return leases.RUNS.renew_all(conn, claims, self.clock() + lease)

    def release_run(self, run_id: str, token: str) -> None:
        """Give a running run back to the queue (a worker shutting down)."""
        with self._tx() as conn:
            move_run(
                conn,
                run_id,
                RunStatus.RUNNING,
                RunStatus.QUEUED,
                leases.RUNS.claimed_by(token),
                **NO_LEASE,
                updated_at=self.clock(),
            )

    def finish_run(
        self,
        run_id: str,
        token: str,
        status: RunStatus,
        *,
        output: str | None = None,
        error: str | None = None,
    ) -> Run:
        """running → succeeded/failed/rejected, only for the claim ``token``."""
        if status not in FINAL_RUN_STATUSES:
            raise ValueError(f"{status} is not a final status")
        with self._tx() as conn:
            finished = moved_run(
                conn,
                run_id,
                RunStatus.RUNNING,
                status,
                leases.RUNS.claimed_by(token),
                output=output,
                error=error,
                **NO_LEASE,
                updated_at=self.clock(),
            )
            if finished is None:
                raise LeaseLost(run_id, token)
            # Nothing resumes a finished run from where it paused (a revise cuts the journal).
            conn.execute(delete(snapshots).where(snapshots.c.run_id == run_id))
            self._enqueue(conn, run_id, OutboxKind.RUN_FINISHED)
            record_event(
                conn, self.clock(), WebhookEventType.RUN_FINISHED, run_id, crew=finished.crew
            )
            return to_run(finished)

    def cancel_run(self, run_id: str, by: str, *, why: str | None = None) -> Run:
        """Cancel a run in any non-final state; its pending reviews are cancelled with it.
        Its error says who cancelled it, and ``why`` if given."""
        now = self.clock()
        with self._tx() as conn:
            run = load_run(conn, run_id, lock=True)
            if run.status in FINAL_RUN_STATUSES:
                raise AlreadyFinal(run_id, run.status)
            move_run(
                conn,
                run_id,
                run.status,
                RunStatus.CANCELLED,
                error=f"cancelled by {by}" + ("" if why is None else f": {why}"),
                **NO_LEASE,
                updated_at=now,
            )
            move_reviews(
                conn,
                ReviewStatus.PENDING,
                ReviewStatus.CANCELLED,
                reviews.c.run_id == run_id,
                decided_at=now,
            )
            conn.execute(delete(snapshots).where(snapshots.c.run_id == run_id))
            self._enqueue(conn, run_id, OutboxKind.RUN_FINISHED)
            record_event(conn, now, WebhookEventType.RUN_FINISHED, run_id)
            return load_run(conn, run_id)

    def suspend_run(
        self,
        run_id: str,
        token: str,
        asks: Sequence[NewReview],
        *,
        entries: Sequence[NewEntry] = (),
        flow: FlowPause | None = None,
        snapshot: Snapshot | None = None,
    ) -> list[Review]:
        """running → waiting with the reviews that must be answered, and their announcements
        (an outbox row each, and one ``run.waiting`` webhook event).

        ``entries`` (journal entries the pause itself makes), a flow's pending feedback
        ``flow`` and where the run stands (``snapshot``, replacing the previous one; without
        one the previous is dropped) are written in the same transaction: an execution that
        stops before it commits leaves the run as the last suspension left it, to be
        replayed to this pause.
        """
        now = self.clock()
        with self._tx() as conn:
            suspended = move_run(
                conn,
                run_id,
                RunStatus.RUNNING,
                RunStatus.WAITING,
                leases.RUNS.claimed_by(token),
                **NO_LEASE,
                updated_at=now,
            )
            if not suspended:
                raise LeaseLost(run_id, token)
            for entry in entries:
                append_entry(
                    conn,
                    run_id,
                    entry.stream,
                    entry.kind,
                    entry.seq,
                    entry.payload,
                    now=self.clock(),
                )
            if flow is not None:
                conn.execute(delete(flow_pending).where(flow_pending.c.flow_uuid == flow.flow_uuid))
                conn.execute(
                    insert(flow_pending).values(
                        flow_uuid=flow.flow_uuid,
                        context=flow.context,
                        state=flow.state,
                        created_at=now,
                    )
                )
            conn.execute(delete(snapshots).where(snapshots.c.run_id == run_id))
            if snapshot is not None:
                conn.execute(
                    insert(snapshots).values(
                        run_id=run_id,
                        pos=snapshot.pos,
                        payload=snapshot.payload,
                        created_at=now,
                    )
                )
            pos = next_pos(conn, run_id)
            ids = []
            for ask in asks:
                review_id = new_id("rev")
                conn.execute(
                    insert(reviews).values(
                        id=review_id,
                        run_id=run_id,
                        kind=ask.kind,
                        status=ReviewStatus.PENDING,
                        stream=ask.stream,
                        seq=ask.seq,
                        prompt=ask.prompt,
                        details={} if ask.details is None else details_to_json(ask.details),
                        journal_pos=pos,
                        created_at=now,
                        remind_at=ask.remind_at,
                        escalate_at=ask.escalate_at,
                        expires_at=ask.expires_at,
                        on_expire=ask.on_expire if ask.expires_at else None,
                        digest=ask.digest,
                        reviewers=None if ask.raised is None else ask.raised.to_json(),
                    )
                )
                self._enqueue(conn, run_id, OutboxKind.REVIEW_OPENED, review_id)
                ids.append(review_id)
            reviews_opened(conn, run_id, len(ids))
            record_event(conn, now, WebhookEventType.RUN_WAITING, run_id, payload={"reviews": ids})
            return [load_review(conn, review_id) for review_id in ids]


def _run_of_request(conn: Connection, request_key: str) -> Run | None:
    row = conn.execute(select(runs).where(runs.c.request_key == request_key)).first()
    return None if row is None else to_run(row)
