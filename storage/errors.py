"""Errors raised by storage.

StorageError
├── NotFound
│   ├── RunNotFound
│   └── ReviewNotFound
└── TransitionRejected          a compare-and-set found another status
    ├── LeaseLost               the worker no longer owns the run
    ├── OutboxClaimLost         another dispatcher took the outbox row over
    ├── AlreadyFinal            the run already ended
    ├── AlreadyDecided          someone decided the review first
    └── DecisionNotAllowed      e.g. "approve" on a question
"""

from __future__ import annotations

from datetime import datetime


class StorageError(Exception):
    """Base class of every error raised by storage."""


class NotFound(StorageError):
    """No row with that id."""


class RunNotFound(NotFound):
    def __init__(self, run_id: str) -> None:
        super().__init__(f"no run with id {run_id!r}")
        self.run_id = run_id


class ReviewNotFound(NotFound):
    def __init__(self, review_id: str) -> None:
        super().__init__(f"no review with id {review_id!r}")
        self.review_id = review_id


class TransitionRejected(StorageError):
    """A compare-and-set did not match: the row was not in the expected state."""


class LeaseLost(TransitionRejected):
    def __init__(self, run_id: str, worker_id: str) -> None:
        super().__init__(f"worker {worker_id} no longer holds the lease on run {run_id}")
        self.run_id = run_id
        self.worker_id = worker_id


class OutboxClaimLost(TransitionRejected):
    def __init__(self, message_id: int) -> None:
        super().__init__(f"the claim on outbox row {message_id} was lost (taken over or sent)")
        self.message_id = message_id


class AlreadyFinal(TransitionRejected):
    def __init__(self, run_id: str, status: str) -> None:
        super().__init__(f"run {run_id} has already ended ({status})")
        self.run_id = run_id
        self.status = status


class AlreadyDecided(TransitionRejected):
    """The review is no longer pending; ``by``/``kind`` say who got there first."""

    def __init__(
        self,
        review_id: str,
        status: str,
        by: str | None = None,
        kind: str | None = None,
        at: datetime | None = None,
    ) -> None:
        if by is not None:
            detail = f"already decided ({kind}) by {by}"
        else:
            detail = f"no longer pending ({status})"
        super().__init__(f"review {review_id} was {detail}")
        self.review_id = review_id
        self.status = status
        self.by = by
        self.kind = kind
        self.at = at


class DecisionNotAllowed(TransitionRejected):
    def __init__(self, review_id: str, review_kind: str, decision: str, allowed: list[str]) -> None:
        super().__init__(
            f"review {review_id} is a {review_kind.replace('_', ' ')}; "
            f"'{decision}' is not a valid decision for it (use one of: {', '.join(allowed)})"
        )
        self.review_id = review_id
        self.review_kind = review_kind
        self.decision = decision
        self.allowed = allowed


class NotWaiting(TransitionRejected):
    def __init__(self, run_id: str, status: str) -> None:
        super().__init__(f"run {run_id} is {status}, not waiting for a review")
        self.run_id = run_id
        self.status = status
