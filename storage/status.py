"""The state machines of runs and reviews, as data.

Every status change in storage is a compare-and-set on one of the transitions
listed here, so a second click, a Slack retry or a late timer is a no-op that
says so instead of a silent overwrite.
"""

from __future__ import annotations

from enum import StrEnum


class RunStatus(StrEnum):
    """Where a run is in its life."""

    QUEUED = "queued"
    RUNNING = "running"
    WAITING = "waiting"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    REJECTED = "rejected"

    @property
    def is_final(self) -> bool:
        return self in FINAL_RUN_STATUSES


FINAL_RUN_STATUSES = frozenset(
    {RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.REJECTED}
)

# Every status change a run makes, and only those (storage.transitions enforces it).
RUN_TRANSITIONS: dict[RunStatus, frozenset[RunStatus]] = {
    # queued -> running: a worker claims it.
    RunStatus.QUEUED: frozenset({RunStatus.RUNNING, RunStatus.CANCELLED}),
    # running -> queued: the worker gave it back (shutdown).
    # running -> running: a new claim of an expired lease (never by the worker still
    # executing the run); the old claim's token then matches nothing.
    # running -> failed: settled so, or given up after too many recoveries.
    RunStatus.RUNNING: frozenset(
        {
            RunStatus.RUNNING,
            RunStatus.QUEUED,
            RunStatus.WAITING,
            RunStatus.SUCCEEDED,
            RunStatus.FAILED,
            RunStatus.REJECTED,
            RunStatus.CANCELLED,
        }
    ),
    # waiting -> queued: every pending review got its decision, or a task was reopened.
    RunStatus.WAITING: frozenset({RunStatus.QUEUED, RunStatus.CANCELLED}),
    RunStatus.SUCCEEDED: frozenset(),
    RunStatus.FAILED: frozenset(),
    RunStatus.CANCELLED: frozenset(),
    RunStatus.REJECTED: frozenset(),
}


class ReviewKind(StrEnum):
    """What a human is asked for."""

    QUESTION = "question"
    TASK_REVIEW = "task_review"
    TOOL_APPROVAL = "tool_approval"


class ReviewStatus(StrEnum):
    """Where a review is in its life.

    ``superseded`` marks a review that belongs to a part of the journal that was
    dropped (the crew diverged from its recording); it stays for the audit trail.
    """

    PENDING = "pending"
    DECIDED = "decided"
    CANCELLED = "cancelled"
    SUPERSEDED = "superseded"


# Every status change a review makes, and only those.
REVIEW_TRANSITIONS: dict[ReviewStatus, frozenset[ReviewStatus]] = {
    # pending -> decided: a person's decision (or expiry); -> cancelled: with its run;
    # -> superseded: a task before it was reopened.
    ReviewStatus.PENDING: frozenset(
        {ReviewStatus.DECIDED, ReviewStatus.CANCELLED, ReviewStatus.SUPERSEDED}
    ),
    # decided -> superseded: the journal before it was dropped (a divergence, a reopened task).
    ReviewStatus.DECIDED: frozenset({ReviewStatus.SUPERSEDED}),
    ReviewStatus.CANCELLED: frozenset(),
    ReviewStatus.SUPERSEDED: frozenset(),
}


class DecisionKind(StrEnum):
    """A reviewer's typed answer (``expire`` comes from the clock, not a person)."""

    APPROVE = "approve"
    EDIT = "edit"
    CHANGES = "changes"
    REJECT = "reject"
    ANSWER = "answer"
    EXPIRE = "expire"

    @property
    def needs_text(self) -> bool:
        return self in {DecisionKind.EDIT, DecisionKind.CHANGES, DecisionKind.ANSWER}


HUMAN_DECISIONS: tuple[DecisionKind, ...] = tuple(
    k for k in DecisionKind if k != DecisionKind.EXPIRE
)
"""What a person may decide, in the order every door lists them (buttons, the CLI's usage)."""


ALLOWED_DECISIONS: dict[ReviewKind, frozenset[DecisionKind]] = {
    ReviewKind.QUESTION: frozenset({DecisionKind.ANSWER, DecisionKind.REJECT, DecisionKind.EXPIRE}),
    ReviewKind.TASK_REVIEW: frozenset(
        {
            DecisionKind.APPROVE,
            DecisionKind.EDIT,
            DecisionKind.CHANGES,
            DecisionKind.REJECT,
            DecisionKind.EXPIRE,
        }
    ),
    ReviewKind.TOOL_APPROVAL: frozenset(
        {DecisionKind.APPROVE, DecisionKind.EDIT, DecisionKind.REJECT, DecisionKind.EXPIRE}
    ),
}


class ReviewEventKind(StrEnum):
    """What happened to a review besides its decision (``review_events``, in the audit trail):
    who handles it, and standing approvals granted with it and revoked; and a step of a run
    that Slack refused for good (of the review the step announced, if any)."""

    CLAIM = "claim"  # someone said they handle it
    REASSIGN = "reassign"  # someone handed it to another reviewer
    STANDING = "standing"  # someone approved the call and the tool's later matching calls
    STANDING_REVOKED = "standing_revoked"  # someone revoked that standing approval
    SLACK_REFUSED = "slack_refused"  # an outbox row given up on: details say which and why
    RULE = "rule"  # a configured rule decided a gated call: details say which rule, and why
    STANDING_APPLIED = "standing_used"  # a standing approval approved a call: details say which
    # The worker did not run an approved call: what it was about to run has another digest.
    DIGEST_MISMATCH = "digest_mismatch"


class OnExpire(StrEnum):
    """What a review's deadline (``expire_after``) does when nobody decided in time."""

    REJECT = "reject"  # expire it: the run goes on as rejected (a question: "no answer")
    APPROVE = "approve"  # approve it, recorded as decided by DEADLINE (questions expire)
    KEEP_WAITING = "keep_waiting"  # no deadline: reminders and escalation, never an expiry


DEADLINE = "deadline"
"""Who decided a review that its deadline approved (``on_expire = "approve"``): no person."""

APPROVED_BY = "approved_by"
"""A decision's details key: who approved a review that needed several approvals, in order
(the last of them made the decision)."""

DIGEST = "digest"
"""A decision's details key: the action digest it covers (an edit's: the edited action's)."""

APPROVAL_STAGES = "approval_stages"
"""A decision's details key, beside :data:`APPROVED_BY` where the review had an approval chain
(``stages``): each approval in order as ``{"by": …, "stage": …}``."""


class OutboxKind(StrEnum):
    """What an outbox row announces; the dispatcher reads the current state by id."""

    RUN_STARTED = "run_started"
    REVIEW_OPENED = "review_opened"
    REVIEW_DECIDED = "review_decided"
    # An approval short of the review's quorum, or (payload ``stage``: the one passed) the
    # approval that passed a stage of its approval chain.
    REVIEW_APPROVED = "review_approved"
    REVIEW_REMINDED = "review_reminded"
    REVIEW_ESCALATED = "review_escalated"
    REVIEW_CLAIMED = "review_claimed"  # claimed or reassigned: payload by, to, before
    STANDING_GRANTED = "standing_granted"  # payload standing: its id; a thread message
    STANDING_REVOKED = "standing_revoked"  # payload standing: its id; that message edited
    RULE_DECIDED = "rule_decided"  # payload: the rule's decision of a call; one thread line
    RUN_DIVERGED = "run_diverged"
    TASK_REOPENED = "task_reopened"
    RUN_NOTE = "run_note"
    RUN_FINISHED = "run_finished"
    RUN_PROGRESS = "run_progress"  # the run's progress message to post or edit (coalesced)


class RunNote(StrEnum):
    """Something the runtime tells a run's thread once (``RUN_NOTE``'s payload ``note``);
    the bot owns the words."""

    OFFLINE_MODEL = "offline_model"  # the crew runs on the offline scripted model
