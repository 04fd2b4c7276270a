"""The Store: every read and compare-and-set transition of Countersign's state.

One synchronous API: workers call it directly, the async bot through one
``asyncio.to_thread`` boundary. Each public method is one transaction.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Engine,
    Row,
    delete,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.exc import DataError, IntegrityError

from storage import migrate
from storage.details import details_from_json, details_to_json
from storage.engine import checkpoint as engine_checkpoint
from storage.engine import make_engine, write_transaction
from storage.errors import (
    AlreadyDecided,
    AlreadyFinal,
    DecisionNotAllowed,
    LeaseLost,
    NotWaiting,
    OutboxClaimLost,
    ReviewNotFound,
    RunNotFound,
    TransitionRejected,
    UnstorableValue,
)
from storage.records import (
    JSON,
    Decision,
    FlowPause,
    JournalEntry,
    NewDecision,
    NewEntry,
    NewReview,
    OutboxMessage,
    Review,
    Run,
)
from storage.schema import decisions, flow_pending, journal, outbox, reviews, runs
from storage.status import (
    ALLOWED_DECISIONS,
    FINAL_RUN_STATUSES,
    DecisionKind,
    OutboxKind,
    ReviewKind,
    ReviewStatus,
    RunNote,
    RunStatus,
)
from storage.transitions import move_reviews, move_run

Clock = Callable[[], datetime]

# What a run that no worker holds has for a lease.
_NO_LEASE: dict[str, None] = {"lease_owner": None, "lease_token": None, "lease_expires": None}

# The reviews a dropped part of the journal takes with it: those asked and those answered.
_REPLAYABLE = (ReviewStatus.PENDING, ReviewStatus.DECIDED)

# A run whose worker died this many times is failed instead of being retried forever.
MAX_RECOVERIES = 3


def utc_now() -> datetime:
    """Naive UTC, the form every time column holds."""
    return datetime.now(UTC).replace(tzinfo=None)


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(6)}"


class Store:
    """Durable state of Countersign. Build one per process with :meth:`open`."""

    def __init__(self, engine: Engine, clock: Clock = utc_now) -> None:
        self.engine = engine
        self.clock = clock

    @classmethod
    def open(cls, url: str, *, clock: Clock = utc_now, upgrade: bool = True) -> Store:
        """Connect to ``url`` and, unless told not to, bring the schema up to date."""
        store = cls(make_engine(url), clock)
        if upgrade:
            store.upgrade()
        return store

    def upgrade(self) -> None:
        migrate.upgrade(self.engine)

    def checkpoint(self) -> None:
        """On SQLite, fold the write-ahead log into the database. Commits never do it
        themselves (it costs a commit ~100 ms): a long-lived process calls this every few
        seconds, off the paths where a person waits."""
        engine_checkpoint(self.engine)

    def close(self) -> None:
        self.engine.dispose()

    @contextmanager
    def _tx(self) -> Iterator[Connection]:
        """One write transaction; a value the database refuses becomes :class:`UnstorableValue`.

        The database's refusal (``DataError``), or the driver's, which cannot encode a
        lone surrogate, will repeat; a lost connection (``OperationalError``) may not,
        and is left as it is.
        """
        try:
            with write_transaction(self.engine) as conn:
                yield conn
        except DataError as exc:
            raise UnstorableValue(_first_line(exc.orig or exc)) from exc
        except UnicodeEncodeError as exc:
            raise UnstorableValue(_first_line(exc)) from exc

    # ------------------------------------------------------------------ runs

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
                    earlier = self._run_of_request(conn, request_key)
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
                self._enqueue(conn, run_id, OutboxKind.RUN_STARTED)
                return self._get_run(conn, run_id)
        except IntegrityError:
            if request_key is None:
                raise
            # Two handlers of one request raced (PostgreSQL); the other one's run stands.
            with self.engine.connect() as conn:
                found = self._run_of_request(conn, request_key)
            if found is None:
                raise
            return found

    @staticmethod
    def _run_of_request(conn: Connection, request_key: str) -> Run | None:
        row = conn.execute(select(runs).where(runs.c.request_key == request_key)).first()
        return None if row is None else _run(row)

    def get_run(self, run_id: str) -> Run:
        with self.engine.connect() as conn:
            return self._get_run(conn, run_id)

    def list_runs(
        self, *, status: RunStatus | None = None, crew: str | None = None, limit: int = 100
    ) -> list[Run]:
        query = select(runs).order_by(runs.c.created_at.desc(), runs.c.id).limit(limit)
        if status is not None:
            query = query.where(runs.c.status == status)
        if crew is not None:
            query = query.where(runs.c.crew == crew)
        with self.engine.connect() as conn:
            return [_run(row) for row in conn.execute(query)]

    def count_runs(self, status: RunStatus) -> int:
        with self.engine.connect() as conn:
            query = select(func.count()).select_from(runs).where(runs.c.status == status)
            return int(conn.execute(query).scalar_one())

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
            (runs.c.status == RunStatus.RUNNING) & (runs.c.lease_expires < now)
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
                        **_NO_LEASE,
                        updated_at=now,
                    )
                    self._enqueue(conn, row.id, OutboxKind.RUN_FINISHED)
                    continue
                claimed = move_run(
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
                if claimed:
                    return self._get_run(conn, row.id)

    def extend_lease(self, run_id: str, token: str, lease: timedelta) -> bool:
        """Renew the lease of the claim ``token`` if it still holds the run.

        The worker's heartbeat, and the check an execution makes before each live call.
        Renewing an expired lease is safe: the token still matching means nobody claimed
        the run meanwhile. False means the run was cancelled, finished or claimed again:
        stop working on it.
        """
        with self._tx() as conn:
            return (
                conn.execute(
                    update(runs)
                    .where(*_held(run_id, token))
                    .values(lease_expires=self.clock() + lease)
                ).rowcount
                == 1
            )

    def release_run(self, run_id: str, token: str) -> None:
        """Give a running run back to the queue (a worker shutting down)."""
        with self._tx() as conn:
            move_run(
                conn,
                run_id,
                RunStatus.RUNNING,
                RunStatus.QUEUED,
                _claimed_by(token),
                **_NO_LEASE,
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
            finished = move_run(
                conn,
                run_id,
                RunStatus.RUNNING,
                status,
                _claimed_by(token),
                output=output,
                error=error,
                **_NO_LEASE,
                updated_at=self.clock(),
            )
            if not finished:
                raise LeaseLost(run_id, token)
            self._enqueue(conn, run_id, OutboxKind.RUN_FINISHED)
            return self._get_run(conn, run_id)

    def cancel_run(self, run_id: str, by: str) -> Run:
        """Cancel a run in any non-final state; its pending reviews are cancelled with it."""
        now = self.clock()
        with self._tx() as conn:
            run = self._get_run(conn, run_id, lock=True)
            if run.status in FINAL_RUN_STATUSES:
                raise AlreadyFinal(run_id, run.status)
            move_run(
                conn,
                run_id,
                run.status,
                RunStatus.CANCELLED,
                error=f"cancelled by {by}",
                **_NO_LEASE,
                updated_at=now,
            )
            move_reviews(
                conn,
                ReviewStatus.PENDING,
                ReviewStatus.CANCELLED,
                reviews.c.run_id == run_id,
                decided_at=now,
            )
            self._enqueue(conn, run_id, OutboxKind.RUN_FINISHED)
            return self._get_run(conn, run_id)

    def suspend_run(
        self,
        run_id: str,
        token: str,
        asks: Sequence[NewReview],
        *,
        entries: Sequence[NewEntry] = (),
        flow: FlowPause | None = None,
    ) -> list[Review]:
        """running → waiting with the reviews that must be answered, and their announcements.

        ``entries`` (journal entries the pause itself makes) and a flow's pending feedback
        ``flow`` are written in the same transaction: an execution that stops before it
        commits leaves the run as the last suspension left it, to be replayed to this pause.
        """
        now = self.clock()
        with self._tx() as conn:
            suspended = move_run(
                conn,
                run_id,
                RunStatus.RUNNING,
                RunStatus.WAITING,
                _claimed_by(token),
                **_NO_LEASE,
                updated_at=now,
            )
            if not suspended:
                raise LeaseLost(run_id, token)
            for entry in entries:
                self._append(conn, run_id, entry.stream, entry.kind, entry.seq, entry.payload)
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
            pos = self._next_pos(conn, run_id)
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
                    )
                )
                self._enqueue(conn, run_id, OutboxKind.REVIEW_OPENED, review_id)
                ids.append(review_id)
            return [self._get_review(conn, review_id) for review_id in ids]

    # --------------------------------------------------------------- reviews

    def get_review(self, review_id: str) -> Review:
        with self.engine.connect() as conn:
            return self._get_review(conn, review_id)

    def list_reviews(
        self, *, status: ReviewStatus | None = ReviewStatus.PENDING, run_id: str | None = None
    ) -> list[Review]:
        query = select(reviews).order_by(reviews.c.created_at, reviews.c.id)
        if status is not None:
            query = query.where(reviews.c.status == status)
        if run_id is not None:
            query = query.where(reviews.c.run_id == run_id)
        with self.engine.connect() as conn:
            rows = conn.execute(query).all()
            found = _decisions_by_review(conn, [row.id for row in rows])
            return [_review(row, found.get(row.id)) for row in rows]

    def decide(self, review_id: str, decision: NewDecision) -> Review:
        """Record a decision exactly once: pending → decided, and the run back in the queue.

        Raises:
            ReviewNotFound: no such review.
            AlreadyDecided: somebody decided first (or the run was cancelled);
                the exception says who and how.
            DecisionNotAllowed: the decision does not fit the review's kind.
        """
        now = self.clock()
        try:
            with self._tx() as conn:
                review = self._get_review(conn, review_id, lock=True)
                if _made_by(review, decision.request_key):
                    return review  # the same request, replayed: it was recorded the first time
                if review.status != ReviewStatus.PENDING:
                    raise _already_decided(review)
                allowed = ALLOWED_DECISIONS[review.kind]
                if decision.kind not in allowed:
                    people = sorted(k.value for k in allowed if k != DecisionKind.EXPIRE)
                    raise DecisionNotAllowed(
                        review_id, review.kind.value, decision.kind.value, people
                    )
                changed = move_reviews(
                    conn,
                    ReviewStatus.PENDING,
                    ReviewStatus.DECIDED,
                    reviews.c.id == review_id,
                    decided_at=now,
                )
                if changed != 1:
                    raise _already_decided(self._get_review(conn, review_id))
                conn.execute(
                    insert(decisions).values(
                        review_id=review_id,
                        run_id=review.run_id,
                        kind=decision.kind,
                        text=decision.text,
                        original=review.prompt if decision.kind == DecisionKind.EDIT else None,
                        details=decision.details,
                        decided_by=decision.decided_by,
                        request_key=decision.request_key,
                        created_at=now,
                    )
                )
                still_pending = conn.execute(
                    select(func.count())
                    .select_from(reviews)
                    .where(
                        reviews.c.run_id == review.run_id,
                        reviews.c.status == ReviewStatus.PENDING,
                    )
                ).scalar_one()
                if still_pending == 0:
                    move_run(
                        conn, review.run_id, RunStatus.WAITING, RunStatus.QUEUED, updated_at=now
                    )
                self._enqueue(conn, review.run_id, OutboxKind.REVIEW_DECIDED, review_id)
                return self._get_review(conn, review_id)
        except IntegrityError:
            # The UNIQUE on decisions.review_id caught a race the status check missed.
            review = self.get_review(review_id)
            if _made_by(review, decision.request_key):
                return review
            raise _already_decided(review) from None

    def sweep_reviews(self, *, expired_by: str = "countersign") -> dict[str, int]:
        """Act on what is due: remind, escalate, expire. Safe to run twice or on two replicas.

        Each due time is cleared with a compare-and-set on its old value before it is
        announced, and expiry is a decision like any other (first one wins).
        """
        now = self.clock()
        counts = {"reminded": 0, "escalated": 0, "expired": 0}
        for column, kind, name in (
            (reviews.c.remind_at, OutboxKind.REVIEW_REMINDED, "reminded"),
            (reviews.c.escalate_at, OutboxKind.REVIEW_ESCALATED, "escalated"),
        ):
            with self._tx() as conn:
                due = conn.execute(
                    select(reviews.c.id, reviews.c.run_id, column).where(
                        reviews.c.status == ReviewStatus.PENDING, column <= now
                    )
                ).all()
                for review_id, run_id, at in due:
                    cleared = conn.execute(
                        update(reviews)
                        .where(reviews.c.id == review_id, column == at)
                        .values({column.key: None})
                    ).rowcount
                    if cleared == 1:
                        self._enqueue(conn, run_id, kind, review_id)
                        counts[name] += 1
        with self.engine.connect() as conn:
            expiring = conn.execute(
                select(reviews.c.id).where(
                    reviews.c.status == ReviewStatus.PENDING, reviews.c.expires_at <= now
                )
            ).scalars()
            expiring_ids = list(expiring)
        for review_id in expiring_ids:
            try:
                self.decide(review_id, NewDecision(DecisionKind.EXPIRE, expired_by))
                counts["expired"] += 1
            except AlreadyDecided:
                pass
        return counts

    def reopen_review(self, review_id: str, decision: NewDecision) -> Review:
        """Decide an earlier, already decided review again, and rewind the run to it.

        The old review is superseded (it keeps its decision: the audit trail loses
        nothing), a new decided review takes its place at the same pause point, the
        journal recorded after that point is dropped and the reviews opened after it
        are superseded. The run must be waiting; it is queued again.

        Raises:
            ReviewNotFound: no such review.
            NotWaiting: the run is not waiting for a review.
            TransitionRejected: the review is not a decided one.
        """
        now = self.clock()
        with self._tx() as conn:
            old = self._get_review(conn, review_id, lock=True)
            run = self._get_run(conn, old.run_id, lock=True)
            if run.status != RunStatus.WAITING:
                raise NotWaiting(run.id, run.status)
            if old.status != ReviewStatus.DECIDED:
                raise TransitionRejected(f"review {review_id} is {old.status}, not decided")
            point = old.journal_pos
            move_reviews(
                conn,
                _REPLAYABLE,
                ReviewStatus.SUPERSEDED,
                reviews.c.run_id == run.id,
                (reviews.c.id == old.id) | (reviews.c.journal_pos > point),
            )
            conn.execute(delete(journal).where(journal.c.run_id == run.id, journal.c.pos >= point))
            new_review_id = new_id("rev")
            conn.execute(
                insert(reviews).values(
                    id=new_review_id,
                    run_id=run.id,
                    kind=old.kind,
                    status=ReviewStatus.DECIDED,
                    stream=old.stream,
                    seq=old.seq,
                    prompt=old.prompt,
                    details=details_to_json(old.details),
                    journal_pos=point,
                    channel=old.channel,
                    created_at=now,
                    decided_at=now,
                )
            )
            conn.execute(
                insert(decisions).values(
                    review_id=new_review_id,
                    run_id=run.id,
                    kind=decision.kind,
                    text=decision.text,
                    original=None,
                    details={**decision.details, "replaces": old.id},
                    decided_by=decision.decided_by,
                    created_at=now,
                )
            )
            move_run(conn, run.id, RunStatus.WAITING, RunStatus.QUEUED, updated_at=now)
            self._enqueue(conn, run.id, OutboxKind.TASK_REOPENED, new_review_id)
            return self._get_review(conn, new_review_id)

    # --------------------------------------------------------------- journal

    def load_journal(self, run_id: str) -> list[JournalEntry]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(journal).where(journal.c.run_id == run_id).order_by(journal.c.pos)
            )
            return [
                JournalEntry(
                    pos=row.pos,
                    stream=row.stream,
                    kind=row.kind,
                    seq=row.seq,
                    payload=row.payload,
                    prompt_hash=row.prompt_hash,
                )
                for row in rows
            ]

    def append_journal(
        self,
        run_id: str,
        token: str,
        *,
        stream: str,
        kind: str,
        seq: int,
        payload: JSON,
        prompt_hash: str | None = None,
    ) -> int:
        """Append one turn, fenced by the claim: an execution that lost the run cannot write.

        Idempotent: asked again for a turn it holds (a retry after a commit whose answer
        the connection lost), it returns that turn's position and writes nothing.
        """
        with self._tx() as conn:
            self._fence(conn, run_id, token)
            return self._append(conn, run_id, stream, kind, seq, payload, prompt_hash)

    def _append(
        self,
        conn: Connection,
        run_id: str,
        stream: str,
        kind: str,
        seq: int,
        payload: JSON,
        prompt_hash: str | None = None,
    ) -> int:
        """The position of the turn ``(stream, kind, seq)``, appended unless it is there."""
        earlier = conn.execute(
            select(journal.c.pos).where(
                journal.c.run_id == run_id,
                journal.c.stream == stream,
                journal.c.kind == kind,
                journal.c.seq == seq,
            )
        ).scalar_one_or_none()
        if earlier is not None:
            return int(earlier)
        pos = self._next_pos(conn, run_id)
        conn.execute(
            insert(journal).values(
                run_id=run_id,
                pos=pos,
                stream=stream,
                kind=kind,
                seq=seq,
                payload=payload,
                prompt_hash=prompt_hash,
                created_at=self.clock(),
            )
        )
        return pos

    def record_divergence(self, run_id: str, token: str, from_pos: int, note: str) -> None:
        """Drop the journal from ``from_pos`` on and supersede the reviews opened after it.

        The run then continues live from that point; the note is kept on the run
        and announced in its thread. Decisions stay in the audit trail.
        """
        with self._tx() as conn:
            self._fence(conn, run_id, token)
            conn.execute(
                delete(journal).where(journal.c.run_id == run_id, journal.c.pos >= from_pos)
            )
            move_reviews(
                conn,
                _REPLAYABLE,
                ReviewStatus.SUPERSEDED,
                reviews.c.run_id == run_id,
                reviews.c.journal_pos > from_pos,
            )
            conn.execute(update(runs).where(runs.c.id == run_id).values(divergence=note))
            self._enqueue(conn, run_id, OutboxKind.RUN_DIVERGED, payload={"note": note})

    def note_run(self, run_id: str, token: str, note: RunNote) -> bool:
        """Announce ``note`` in the run's thread, at most once per run and note.

        Fenced by the claim like the journal: the run's row is locked while the outbox is
        checked, so two executions (a resume, a takeover) cannot both enqueue it.

        Returns:
            True if the note was enqueued now, False if it had been already.

        Raises:
            LeaseLost: the claim ``token`` no longer holds the run.
        """
        with self._tx() as conn:
            self._fence(conn, run_id, token)
            earlier = conn.execute(
                select(outbox.c.payload).where(
                    outbox.c.run_id == run_id, outbox.c.kind == OutboxKind.RUN_NOTE
                )
            ).scalars()
            if any(payload.get("note") == note for payload in earlier):
                return False
            self._enqueue(conn, run_id, OutboxKind.RUN_NOTE, payload={"note": note.value})
            return True

    def find_run_by_thread(self, channel: str, thread_ts: str) -> Run | None:
        """The run whose root message is ``thread_ts`` in ``channel``."""
        with self.engine.connect() as conn:
            row = conn.execute(
                select(runs).where(runs.c.channel == channel, runs.c.thread_ts == thread_ts)
            ).first()
            return None if row is None else _run(row)

    # ---------------------------------------------------------------- outbox

    def due_outbox(self, limit: int = 50) -> list[OutboxMessage]:
        """Unsent announcements that may go out now, oldest first.

        A row is due when its next attempt is due and no dispatcher holds it, and the
        same holds for every earlier unsent row of its run: a run's rows go out in order,
        so one that keeps failing holds back the rows after it.
        """
        now = self.clock()
        earlier = outbox.alias("earlier")
        held_back = (
            select(earlier.c.id)
            .where(
                earlier.c.run_id == outbox.c.run_id,
                earlier.c.sent_at.is_(None),
                earlier.c.id < outbox.c.id,
                (earlier.c.next_attempt_at > now) | (earlier.c.claimed_until > now),
            )
            .exists()
        )
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(outbox)
                .where(*_outbox_free(now), ~held_back)
                .order_by(outbox.c.id)
                .limit(limit)
            )
            return [_outbox_message(row) for row in rows]

    def claim_outbox(self, message_id: int, claim: str, hold: timedelta) -> OutboxMessage | None:
        """Hold an unsent row for one dispatcher for ``hold``, before it calls Slack.

        Compare-and-set: the row must be due, unheld (or held past its time, by a
        dispatcher that died) and the first unsent row of its run.

        Returns:
            The row with the steps already done, or None if it cannot be had now.
        """
        now = self.clock()
        first = outbox.alias("first")
        first_unsent = (
            select(func.min(first.c.id))
            .where(first.c.run_id == outbox.c.run_id, first.c.sent_at.is_(None))
            .scalar_subquery()
        )
        with self._tx() as conn:
            claimed = conn.execute(
                update(outbox)
                .where(outbox.c.id == message_id, *_outbox_free(now), outbox.c.id == first_unsent)
                .values(claim=claim, claimed_until=now + hold)
            ).rowcount
            if claimed != 1:
                return None
            row = conn.execute(select(outbox).where(outbox.c.id == message_id)).one()
            return _outbox_message(row)

    def renew_outbox_claim(self, message_id: int, claim: str, hold: timedelta) -> bool:
        """Hold the row ``hold`` longer; False if ``claim`` no longer holds it."""
        with self._tx() as conn:
            return (
                conn.execute(
                    update(outbox)
                    .where(*_outbox_held(message_id, claim))
                    .values(claimed_until=self.clock() + hold)
                ).rowcount
                == 1
            )

    def save_outbox_progress(self, message_id: int, claim: str, progress: JSON) -> None:
        """Record the steps of a delivery done so far (and the one under way).

        Raises:
            OutboxClaimLost: ``claim`` no longer holds the row: stop delivering it.
        """
        with self._tx() as conn:
            saved = conn.execute(
                update(outbox).where(*_outbox_held(message_id, claim)).values(progress=progress)
            ).rowcount
            if saved != 1:
                raise OutboxClaimLost(message_id)

    def mark_sent(
        self,
        message_id: int,
        claim: str,
        *,
        thread: tuple[str, str, str] | None = None,
        review_message: tuple[str, str, str] | None = None,
    ) -> bool:
        """Compare-and-set held by ``claim`` and unsent → sent; False if it was not.

        In the same transaction, remember where Slack put what was posted:
        ``thread=(run_id, channel, ts)`` for a run's root message,
        ``review_message=(review_id, channel, ts)`` for a review's message.
        """
        with self._tx() as conn:
            sent = conn.execute(
                update(outbox)
                .where(*_outbox_held(message_id, claim))
                .values(sent_at=self.clock(), claim=None, claimed_until=None)
            ).rowcount
            if sent != 1:
                return False
            if thread is not None:
                run_id, channel, ts = thread
                conn.execute(
                    update(runs)
                    .where(runs.c.id == run_id, runs.c.thread_ts.is_(None))
                    .values(channel=channel, thread_ts=ts)
                )
            if review_message is not None:
                review_id, channel, ts = review_message
                conn.execute(
                    update(reviews)
                    .where(reviews.c.id == review_id)
                    .values(channel=channel, message_ts=ts)
                )
            return True

    def mark_failed(self, message_id: int, claim: str, error: str, retry_in: timedelta) -> None:
        """Let the row go with its error, to be tried again (from its first step not done)
        in ``retry_in``; a no-op if ``claim`` no longer holds it."""
        with self._tx() as conn:
            conn.execute(
                update(outbox)
                .where(*_outbox_held(message_id, claim))
                .values(
                    attempts=outbox.c.attempts + 1,
                    last_error=error[:2000],
                    next_attempt_at=self.clock() + retry_in,
                    claim=None,
                    claimed_until=None,
                )
            )

    # --------------------------------------------------------------- helpers

    def _enqueue(
        self,
        conn: Connection,
        run_id: str,
        kind: OutboxKind,
        review_id: str | None = None,
        payload: JSON | None = None,
    ) -> None:
        now = self.clock()
        conn.execute(
            insert(outbox).values(
                run_id=run_id,
                review_id=review_id,
                kind=kind,
                payload=payload or {},
                created_at=now,
                next_attempt_at=now,
                attempts=0,
            )
        )

    @staticmethod
    def _fence(conn: Connection, run_id: str, token: str) -> None:
        """Lock the run's row for this transaction, if the claim ``token`` still holds it.

        Raises:
            LeaseLost: it does not (cancelled, finished, or claimed again).
        """
        held = conn.execute(
            select(runs.c.id).where(*_held(run_id, token)).with_for_update()
        ).first()
        if held is None:
            raise LeaseLost(run_id, token)

    @staticmethod
    def _next_pos(conn: Connection, run_id: str) -> int:
        last = conn.execute(
            select(func.max(journal.c.pos)).where(journal.c.run_id == run_id)
        ).scalar_one()
        return 0 if last is None else int(last) + 1

    @staticmethod
    def _get_run(conn: Connection, run_id: str, *, lock: bool = False) -> Run:
        query = select(runs).where(runs.c.id == run_id)
        if lock:
            query = query.with_for_update()
        row = conn.execute(query).first()
        if row is None:
            raise RunNotFound(run_id)
        return _run(row)

    @staticmethod
    def _get_review(conn: Connection, review_id: str, *, lock: bool = False) -> Review:
        query = select(reviews).where(reviews.c.id == review_id)
        if lock:
            query = query.with_for_update()
        row = conn.execute(query).first()
        if row is None:
            raise ReviewNotFound(review_id)
        return _review(row, _decisions_by_review(conn, [review_id]).get(review_id))


def _first_line(exc: BaseException) -> str:
    """What a driver says, without the SQL and parameters SQLAlchemy appends."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def _held(run_id: str, token: str) -> tuple[ColumnElement[bool], ...]:
    """The compare-and-set condition that the claim ``token`` still holds a run."""
    return runs.c.id == run_id, runs.c.status == RunStatus.RUNNING, _claimed_by(token)


def _claimed_by(token: str) -> ColumnElement[bool]:
    """With the run ``running``: it is still under the claim ``token``.

    By token, not by worker: every claim gets a new one, so two executions of one run in
    the same worker (one stalled past its lease, one claimed after) are told apart.
    """
    return runs.c.lease_token == token


def _made_by(review: Review, request_key: str | None) -> bool:
    """Whether ``review`` was decided by the request ``request_key`` (None: no request)."""
    decision = review.decision
    return request_key is not None and decision is not None and decision.request_key == request_key


def _already_decided(review: Review) -> AlreadyDecided:
    decision = review.decision
    return AlreadyDecided(
        review.id,
        review.status,
        by=decision.decided_by if decision else None,
        kind=decision.kind if decision else None,
        at=decision.created_at if decision else None,
    )


def _decisions_by_review(conn: Connection, review_ids: list[str]) -> dict[str, Decision]:
    if not review_ids:
        return {}
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


def _run(row: Row[Any]) -> Run:
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


def _review(row: Row[Any], decision: Decision | None) -> Review:
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
    )


def _outbox_free(now: datetime) -> tuple[Any, ...]:
    """An unsent outbox row that is due and that no live dispatcher holds."""
    return (
        outbox.c.sent_at.is_(None),
        outbox.c.next_attempt_at <= now,
        outbox.c.claimed_until.is_(None) | (outbox.c.claimed_until <= now),
    )


def _outbox_held(message_id: int, claim: str) -> tuple[Any, ...]:
    """The compare-and-set condition that a dispatcher still holds an unsent row."""
    return (outbox.c.id == message_id, outbox.c.sent_at.is_(None), outbox.c.claim == claim)


def _outbox_message(row: Row[Any]) -> OutboxMessage:
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
