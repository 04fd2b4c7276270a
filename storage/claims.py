"""Claiming and reassigning a pending review: who is handling it, a note that restricts
nobody, recorded for the audit trail (``review_events``) in the same transaction."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, insert, select, update
from sqlalchemy.exc import IntegrityError

from storage.approvals import check_stage
from storage.base import StoreBase
from storage.records import Review, Stage
from storage.reviews import already_decided
from storage.rows import load_review, load_run
from storage.schema import review_events, reviews
from storage.status import OutboxKind, ReviewEventKind, ReviewStatus


class ClaimStore(StoreBase):
    """Who is handling a pending review."""

    def claim_review(
        self,
        review_id: str,
        kind: ReviewEventKind,
        *,
        by: str,
        to: str,
        request_key: str | None = None,
        stages: Sequence[Stage] = (),
        stage: int | None = None,
    ) -> Review:
        """Mark the pending review as handled by ``to`` (``by`` claiming it for themselves,
        or reassigning it), with a compare-and-set on who had it, and record the event for
        the audit trail in the same transaction, with a ``REVIEW_CLAIMED`` outbox row for
        the thread. A later claim moves it; a claim for whoever has it already changes and
        records nothing. Deciding is not restricted by it. With ``stages`` (an approval
        chain), ``stage`` is the one the claim was allowed at, as for :meth:`decide`.

        Raises:
            ReviewNotFound: no such review.
            AlreadyDecided: the review is no longer pending.
            StageMoved: the approval chain is no longer at ``stage``.
        """
        try:
            with self._tx() as conn:
                review = load_review(conn, review_id, lock=True)
                now = self.clock()  # once the row is held, so that the times follow the order
                if _event_made_by(conn, review_id, request_key):
                    return review  # the same request, replayed: it was recorded the first time
                if review.status != ReviewStatus.PENDING:
                    raise already_decided(review)
                check_stage(review, stages, stage)
                if review.claimed_by == to:
                    return review
                had = reviews.c.claimed_by
                changed = conn.execute(
                    update(reviews)
                    .where(
                        reviews.c.id == review_id,
                        reviews.c.status == ReviewStatus.PENDING,
                        had.is_(None) if review.claimed_by is None else had == review.claimed_by,
                    )
                    .values(claimed_by=to, claimed_at=now)
                ).rowcount
                if changed != 1:
                    raise already_decided(load_review(conn, review_id))
                run = load_run(conn, review.run_id)
                conn.execute(
                    insert(review_events).values(
                        review_id=review_id,
                        run_id=run.id,
                        crew=run.crew,
                        review_kind=review.kind,
                        kind=kind,
                        by=by,
                        to=to,
                        request_key=request_key,
                        at=now,
                        channel=run.channel,
                        thread_ts=run.thread_ts,
                    )
                )
                said = {"by": by, "to": to, "before": review.claimed_by}
                self._enqueue(conn, run.id, OutboxKind.REVIEW_CLAIMED, review_id, said)
                return load_review(conn, review_id)
        except IntegrityError:
            # The same request, raced with itself: the UNIQUE kept one.
            with self.engine.connect() as conn:
                return load_review(conn, review_id)

    def claimed_by_request(self, review_id: str, request_key: str | None) -> bool:
        """Whether the request ``request_key`` (None: no request) claimed or reassigned the
        review already: replayed, it is answered as the first time."""
        with self.engine.connect() as conn:
            return _event_made_by(conn, review_id, request_key)


def _event_made_by(conn: Connection, review_id: str, request_key: str | None) -> bool:
    """Whether the request ``request_key`` (None: no request) claimed or reassigned the
    review already."""
    if request_key is None:
        return False
    found = conn.execute(
        select(review_events.c.id).where(
            review_events.c.review_id == review_id, review_events.c.request_key == request_key
        )
    ).first()
    return found is not None
