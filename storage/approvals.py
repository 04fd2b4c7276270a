"""Counting approvals of a review that needs several: a quorum of distinct reviewers
(``approvals_required``), or an approval chain (``stages``), each stage its own quorum, the
next asked only once the one before reached its count. Both run inside
:meth:`ReviewStore.decide`'s transaction, on the locked, pending review."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from sqlalchemy import Connection, insert, update

from storage.base import StoreBase
from storage.errors import AlreadyApproved, StageMoved
from storage.records import Approval, NewDecision, Review, Stage
from storage.rows import approvals_by_review
from storage.schema import approvals, reviews
from storage.status import APPROVAL_STAGES, APPROVED_BY, OutboxKind, ReviewStatus


class ApprovalCounting(StoreBase):
    """The approvals rows of a review, one per reviewer: what counts, and what it moves."""

    def _approve(
        self,
        conn: Connection,
        review: Review,
        decision: NewDecision,
        required: int,
        now: datetime,
    ) -> tuple[Approval, ...]:
        """Count ``decision`` as one more reviewer's approval of the locked, pending
        ``review``; every approval it has with this one. One short of the quorum is
        announced (the review message shows who approved and who is still expected)."""
        given = self._insert(conn, review, decision, None, required, now)
        if len(given) < required:
            self._enqueue(conn, review.run_id, OutboxKind.REVIEW_APPROVED, review.id)
        return given

    def _approve_at_stage(
        self,
        conn: Connection,
        review: Review,
        decision: NewDecision,
        stages: Sequence[Stage],
        now: datetime,
    ) -> tuple[Approval, ...] | None:
        """Count ``decision`` as an approval at the stage the locked, pending ``review`` is
        at. The approval that reaches the stage's quorum moves the review to the next stage
        (a compare-and-set on the stage, announced with the stage passed), or, at the last
        stage, returns every approval, for the decision. None while the review stays
        pending."""
        index = current_stage(review, stages)
        stage = stages[index]
        given = self._insert(conn, review, decision, stage, stage.required, now)
        if sum(1 for a in given if a.stage == stage.name) < stage.required:
            self._enqueue(conn, review.run_id, OutboxKind.REVIEW_APPROVED, review.id)
            return None
        if index == len(stages) - 1:
            return given
        moved = conn.execute(
            update(reviews)
            .where(
                reviews.c.id == review.id,
                reviews.c.status == ReviewStatus.PENDING,
                reviews.c.stage == review.stage,
            )
            .values(stage=index + 1)
        ).rowcount
        if moved != 1:  # the lock makes this a bug's symptom; the compare-and-set says so
            raise StageMoved(review.id, stage.name, stages[index + 1].name)
        said = {"stage": stage.name}
        self._enqueue(conn, review.run_id, OutboxKind.REVIEW_APPROVED, review.id, said)
        return None

    def _insert(
        self,
        conn: Connection,
        review: Review,
        decision: NewDecision,
        stage: Stage | None,
        required: int,
        now: datetime,
    ) -> tuple[Approval, ...]:
        """The approval's row (a reviewer counts once per review, at whichever stage they
        approved); every approval of the review with it."""
        if any(a.decided_by == decision.decided_by for a in review.approvals):
            raise approved_before(review, decision.decided_by, required, stage)
        conn.execute(
            insert(approvals).values(
                review_id=review.id,
                run_id=review.run_id,
                decided_by=decision.decided_by,
                details=decision.details,
                request_key=decision.request_key,
                stage=None if stage is None else stage.name,
                created_at=now,
            )
        )
        return approvals_by_review(conn, [review.id]).get(review.id, ())


def current_stage(review: Review, stages: Sequence[Stage]) -> int:
    """The stage ``review`` is at (the last one where the configuration has fewer now)."""
    return min(review.stage, len(stages) - 1)


def check_stage(review: Review, stages: Sequence[Stage], stage: int | None) -> None:
    """A decision made at ``stage`` (None: at whatever stage, as a deadline's) reaches the
    review still at that stage.

    Raises:
        StageMoved: it moved on since.
    """
    if stage is None or not stages or review.stage == stage:
        return
    last = len(stages) - 1
    raise StageMoved(review.id, stages[min(stage, last)].name, stages[min(review.stage, last)].name)


def with_approvers(decision: NewDecision, given: Sequence[Approval]) -> NewDecision:
    """``decision`` with who had approved the review (``approved_by``), and at which stage
    where it had an approval chain."""
    details = {**decision.details, APPROVED_BY: [a.decided_by for a in given]}
    if any(a.stage is not None for a in given):
        details[APPROVAL_STAGES] = [{"by": a.decided_by, "stage": a.stage} for a in given]
    return replace(decision, details=details)


def approved_before(
    review: Review, by: str, required: int, stage: Stage | None = None
) -> AlreadyApproved:
    given = len(review.approvals) if stage is None else len(review.approvals_at(stage.name))
    return AlreadyApproved(review.id, by, given, required)
