"""The Store's reviews and decisions: decide once, sweep what is due, reopen a decided task."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    and_,
    delete,
    false,
    func,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError

from storage.approvals import (
    ApprovalCounting,
    approved_before,
    check_stage,
    current_stage,
    with_approvers,
)
from storage.base import new_id
from storage.details import ToolApprovalDetails, details_to_json
from storage.errors import (
    AlreadyDecided,
    DecisionNotAllowed,
    NotWaiting,
    TransitionRejected,
)
from storage.journal import REPLAYABLE
from storage.records import NewDecision, PendingReviews, Review, Stage
from storage.rows import (
    load_review,
    load_run,
    to_review,
    to_reviews,
    to_run,
)
from storage.schema import (
    decisions,
    journal,
    reviews,
    runs,
    snapshots,
)
from storage.standing import grant_standing
from storage.status import (
    ALLOWED_DECISIONS,
    DEADLINE,
    DecisionKind,
    OnExpire,
    OutboxKind,
    ReviewKind,
    ReviewStatus,
    RunStatus,
)
from storage.transitions import move_reviews, move_run
from storage.webhooks import WebhookEventType, record_event


class ReviewStore(ApprovalCounting):
    """The reviews a suspended run waits for, and the decisions that answer them."""

    def get_review(self, review_id: str) -> Review:
        with self.engine.connect() as conn:
            return load_review(conn, review_id)

    def list_reviews(
        self,
        *,
        status: ReviewStatus | None = ReviewStatus.PENDING,
        run_id: str | None = None,
        opened_from: int = 0,
    ) -> list[Review]:
        """Reviews by status and run; ``opened_from``: only those opened at that journal
        position or later (what a resume from a snapshot there can meet)."""
        query = select(reviews).order_by(reviews.c.created_at, reviews.c.id)
        if status is not None:
            query = query.where(reviews.c.status == status)
        if run_id is not None:
            query = query.where(reviews.c.run_id == run_id)
        if opened_from:
            query = query.where(reviews.c.journal_pos >= opened_from)
        with self.engine.connect() as conn:
            return to_reviews(conn, conn.execute(query).all())

    def pending_reviews(
        self,
        places: Mapping[str, Collection[str] | None],
        *,
        named: Mapping[str, tuple[str, tuple[str, ...]]] | None = None,
        limit: int = 50,
    ) -> PendingReviews:
        """The pending reviews of the runs in ``places``, oldest first, at most ``limit``.

        ``places`` maps a crew to the channels whose runs count (None: any channel), as who
        may decide says: one person's pending reviews, read by an index however many wait.
        ``named`` maps a crew whose runs each name their reviewer to ``(input, values)``: its
        runs count whose input holds one of those values (the person asking, and whoever
        away left their reviews to them).
        A pending review's run is waiting (suspending makes both; deciding the last one,
        cancelling and reopening end both in one transaction): saying so lets the count
        start from the crew's waiting runs (``ix_runs_crew_status``) and read everything
        from indexes. The page is left to walk the pending reviews oldest first
        (``ix_reviews_pending``) until it has ``limit`` of the places': told of the waiting
        runs too, PostgreSQL misjudges how many there are and reads every pending review.
        """
        where = _in_places(places, named or {})
        with self.engine.connect() as conn:
            total = conn.execute(
                select(func.count())
                .select_from(reviews.join(runs, runs.c.id == reviews.c.run_id))
                .where(
                    reviews.c.status == ReviewStatus.PENDING,
                    runs.c.status == RunStatus.WAITING,
                    where,
                )
            ).scalar_one()
            rows = conn.execute(
                select(reviews)
                .join(runs, runs.c.id == reviews.c.run_id)
                .where(reviews.c.status == ReviewStatus.PENDING, where)
                .order_by(reviews.c.created_at, reviews.c.id)
                .limit(limit)
            ).all()
            run_ids = sorted({row.run_id for row in rows})
            found = {
                row.id: to_run(row)
                for row in conn.execute(select(runs).where(runs.c.id.in_(run_ids)))
            }
            return PendingReviews([to_review(row, None) for row in rows], found, int(total))

    def pending_channels(self, crews: Collection[str]) -> set[tuple[str, str | None]]:
        """The (crew, channel) pairs of ``crews``' runs that wait for a review."""
        with self.engine.connect() as conn:
            pairs = conn.execute(
                select(runs.c.crew, runs.c.channel)
                .distinct()
                .join(reviews, reviews.c.run_id == runs.c.id)
                .where(reviews.c.status == ReviewStatus.PENDING, runs.c.crew.in_(list(crews)))
            ).all()
            return {(crew, channel) for crew, channel in pairs}

    def decide(
        self,
        review_id: str,
        decision: NewDecision,
        *,
        approvals_required: int = 1,
        stages: Sequence[Stage] = (),
        stage: int | None = None,
        standing: Mapping[str, Any] | None = None,
    ) -> Review:
        """Record a decision exactly once: pending → decided, and the run back in the queue.

        With ``standing`` (an approval of a gated tool's call, by one reviewer), the same
        transaction grants a standing approval of the tool's later calls in the run whose
        arguments named in ``standing`` have its values (``storage.standing``).

        With ``approvals_required`` above one, an approval is recorded as the reviewer's own
        row and the review stays pending until that many distinct reviewers approved; the
        approval that reaches the quorum decides it, in the same transaction. Any other
        decision (a rejection, changes, an expiry) decides it at once.

        With ``stages`` (an approval chain), approvals are counted per stage instead: the
        one reaching a stage's quorum moves the review to the next stage, and the last
        stage's decides it. ``stage`` is the stage the decider was allowed at (None: any, as
        a deadline decides); a review that moved on since refuses the decision.

        Raises:
            ReviewNotFound: no such review.
            AlreadyDecided: somebody decided first (or the run was cancelled);
                the exception says who and how.
            AlreadyApproved: this reviewer's approval is counted already.
            StageMoved: the approval chain is no longer at ``stage``.
            DecisionNotAllowed: the decision does not fit the review's kind.
        """
        now = self.clock()
        approving = decision.kind == DecisionKind.APPROVE
        counted = approving and (approvals_required > 1 or bool(stages))
        try:
            with self._tx() as conn:
                review = load_review(conn, review_id, lock=True)
                if review.made_by(decision.request_key):
                    return review  # the same request, replayed: it was recorded the first time
                if review.status != ReviewStatus.PENDING:
                    raise already_decided(review)
                allowed = ALLOWED_DECISIONS[review.kind]
                if decision.kind not in allowed:
                    people = sorted(k.value for k in allowed if k != DecisionKind.EXPIRE)
                    raise DecisionNotAllowed(
                        review_id, review.kind.value, decision.kind.value, people
                    )
                check_stage(review, stages, stage)
                if counted and stages:
                    given = self._approve_at_stage(conn, review, decision, stages, now)
                    if given is None:
                        return load_review(conn, review_id)
                    decision = with_approvers(decision, given)
                elif counted:
                    given = self._approve(conn, review, decision, approvals_required, now)
                    if len(given) < approvals_required:
                        return load_review(conn, review_id)
                    decision = with_approvers(decision, given)
                elif review.approvals:  # rejected or sent back after some approved
                    decision = with_approvers(decision, review.approvals)
                self._record(conn, review, decision, now)
                details = review.details
                if standing is not None and isinstance(details, ToolApprovalDetails):
                    grant_standing(conn, review, details.tool, standing, decision.decided_by, now)
                return load_review(conn, review_id)
        except IntegrityError:
            # A UNIQUE (one decision per review, one approval per reviewer) caught a race
            # the status check missed.
            review = self.get_review(review_id)
            if review.made_by(decision.request_key):
                return review
            if review.status == ReviewStatus.PENDING and counted:
                at = stages[current_stage(review, stages)] if stages else None
                required = approvals_required if at is None else at.required
                raise approved_before(review, decision.decided_by, required, at) from None
            raise already_decided(review) from None

    def _record(
        self, conn: Connection, review: Review, decision: NewDecision, now: datetime
    ) -> None:
        """pending → decided with ``decision``; the run queued when nothing else is pending."""
        changed = move_reviews(
            conn,
            ReviewStatus.PENDING,
            ReviewStatus.DECIDED,
            reviews.c.id == review.id,
            decided_at=now,
        )
        if changed != 1:
            raise already_decided(load_review(conn, review.id))
        conn.execute(
            insert(decisions).values(
                review_id=review.id,
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
            move_run(conn, review.run_id, RunStatus.WAITING, RunStatus.QUEUED, updated_at=now)
        self._enqueue(conn, review.run_id, OutboxKind.REVIEW_DECIDED, review.id)
        record_event(conn, now, WebhookEventType.REVIEW_DECIDED, review.run_id, review.id)

    def sweep_reviews(self, *, expired_by: str = "countersign") -> dict[str, int]:
        """Act on what is due: remind, escalate, expire. Safe to run twice or on two replicas.

        Each due time is cleared with a compare-and-set on its old value before it is
        announced, and expiry is a decision like any other (first one wins): an expiry by
        ``expired_by``, or, where the review's rule says ``on_expire = "approve"``, an
        approval by :data:`DEADLINE` (counted under ``expired`` too).
        """
        now = self.clock()
        counts = {"reminded": 0, "escalated": 0, "expired": 0}
        for column, kind, name in (
            (reviews.c.remind_at, OutboxKind.REVIEW_REMINDED, "reminded"),
            (reviews.c.escalate_at, OutboxKind.REVIEW_ESCALATED, "escalated"),
        ):
            with self._tx() as conn:
                # On PostgreSQL another replica's sweep skips the rows this one holds (and
                # the reverse) rather than waiting on them, or deadlocking over their order.
                due = conn.execute(
                    select(reviews.c.id, reviews.c.run_id, column)
                    .where(reviews.c.status == ReviewStatus.PENDING, column <= now)
                    .order_by(reviews.c.id)
                    .with_for_update(skip_locked=True)
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
                select(reviews.c.id, reviews.c.kind, reviews.c.on_expire).where(
                    reviews.c.status == ReviewStatus.PENDING, reviews.c.expires_at <= now
                )
            ).all()
        for review_id, kind, on_expire in expiring:
            try:
                self.decide(review_id, _at_deadline(ReviewKind(kind), on_expire, expired_by))
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
            old = load_review(conn, review_id, lock=True)
            run = load_run(conn, old.run_id, lock=True)
            if run.status != RunStatus.WAITING:
                raise NotWaiting(run.id, run.status)
            if old.status != ReviewStatus.DECIDED:
                raise TransitionRejected(f"review {review_id} is {old.status}, not decided")
            point = old.journal_pos
            move_reviews(
                conn,
                REPLAYABLE,
                ReviewStatus.SUPERSEDED,
                reviews.c.run_id == run.id,
                (reviews.c.id == old.id) | (reviews.c.journal_pos > point),
            )
            conn.execute(delete(journal).where(journal.c.run_id == run.id, journal.c.pos >= point))
            conn.execute(delete(snapshots).where(snapshots.c.run_id == run.id))
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
                    digest=old.digest,
                    reviewers=None if old.raised is None else old.raised.to_json(),
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
            return load_review(conn, new_review_id)


def _in_places(
    places: Mapping[str, Collection[str] | None],
    named: Mapping[str, tuple[str, tuple[str, ...]]],
) -> ColumnElement[bool]:
    anywhere = [crew for crew, channels in places.items() if channels is None]
    clauses: list[ColumnElement[bool]] = []
    if anywhere:
        clauses.append(runs.c.crew.in_(anywhere))
    for crew, channels in places.items():
        if channels:
            clauses.append(and_(runs.c.crew == crew, runs.c.channel.in_(list(channels))))
    for crew, (name, values) in named.items():
        clauses.append(and_(runs.c.crew == crew, runs.c.inputs[name].as_string().in_(values)))
    return or_(false(), *clauses)


def _at_deadline(kind: ReviewKind, on_expire: str | None, expired_by: str) -> NewDecision:
    """The decision a review's deadline makes: an approval by :data:`DEADLINE` where its rule
    says ``on_expire = "approve"`` and the review can be approved (a question cannot), else
    an expiry by ``expired_by``."""
    if on_expire == OnExpire.APPROVE and DecisionKind.APPROVE in ALLOWED_DECISIONS[kind]:
        return NewDecision(DecisionKind.APPROVE, DEADLINE)
    return NewDecision(DecisionKind.EXPIRE, expired_by)


def already_decided(review: Review) -> AlreadyDecided:
    decision = review.decision
    return AlreadyDecided(
        review.id,
        review.status,
        by=decision.decided_by if decision else None,
        kind=decision.kind if decision else None,
        at=decision.created_at if decision else None,
    )
