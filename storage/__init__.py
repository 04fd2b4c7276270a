"""Durable state of Countersign: runs, reviews, decisions, the journal, the outbox and the inbox.

Depends on SQLAlchemy only; knows nothing of CrewAI or Slack. See ``storage.errors``
for the exception hierarchy and ``storage.status`` for the state machines.
"""

from storage.base import utc_now
from storage.details import (
    FlowFeedbackDetails,
    QuestionDetails,
    ReviewDetails,
    TaskReviewDetails,
    ToolApprovalDetails,
    details_from_json,
    details_to_json,
)
from storage.engine import DEFAULT_URL, make_engine
from storage.errors import (
    AlreadyApproved,
    AlreadyDecided,
    AlreadyFinal,
    CountersignError,
    DecisionNotAllowed,
    LeaseLost,
    NotFound,
    NotWaiting,
    OutboxClaimLost,
    ReviewNotFound,
    RunNotFound,
    StorageError,
    TransitionRejected,
    UnstorableValue,
)
from storage.flows import FlowStore
from storage.inbox import InboxRequest, InboxStore, NewRequest
from storage.records import (
    Approval,
    Decision,
    FlowPause,
    JournalEntry,
    NewDecision,
    NewEntry,
    NewReview,
    OutboxMessage,
    PendingReviews,
    Review,
    Run,
    Snapshot,
)
from storage.schema import PERSON_LENGTH
from storage.status import (
    ALLOWED_DECISIONS,
    APPROVED_BY,
    DEADLINE,
    HUMAN_DECISIONS,
    DecisionKind,
    OnExpire,
    OutboxKind,
    ReviewKind,
    ReviewStatus,
    RunStatus,
)
from storage.store import Store

__all__ = [
    "ALLOWED_DECISIONS",
    "APPROVED_BY",
    "DEADLINE",
    "DEFAULT_URL",
    "HUMAN_DECISIONS",
    "PERSON_LENGTH",
    "AlreadyApproved",
    "AlreadyDecided",
    "AlreadyFinal",
    "Approval",
    "CountersignError",
    "Decision",
    "DecisionKind",
    "DecisionNotAllowed",
    "FlowFeedbackDetails",
    "FlowPause",
    "FlowStore",
    "InboxRequest",
    "InboxStore",
    "JournalEntry",
    "LeaseLost",
    "NewDecision",
    "NewEntry",
    "NewRequest",
    "NewReview",
    "NotFound",
    "NotWaiting",
    "OnExpire",
    "OutboxClaimLost",
    "OutboxKind",
    "OutboxMessage",
    "PendingReviews",
    "QuestionDetails",
    "Review",
    "ReviewDetails",
    "ReviewKind",
    "ReviewNotFound",
    "ReviewStatus",
    "Run",
    "RunNotFound",
    "RunStatus",
    "Snapshot",
    "StorageError",
    "Store",
    "TaskReviewDetails",
    "ToolApprovalDetails",
    "TransitionRejected",
    "UnstorableValue",
    "details_from_json",
    "details_to_json",
    "make_engine",
    "utc_now",
]
