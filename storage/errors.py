"""Countersign's exceptions: one root, a subtree per layer.

``except CountersignError`` catches every failure Countersign expects and can explain in one
sentence (bad input, a missing setting, a decision that came second, a database that refused a
value or cannot be reached by the CLI); ``bot.slack.text.refusal`` says each to a person in Slack.
Each layer raises its own subtree; the root lives here, in the lowest layer, so that every
layer can import it.

CountersignError
├── StorageError                           (storage.errors)
│   ├── NotFound
│   │   ├── RunNotFound
│   │   ├── ReviewNotFound
│   │   ├── StandingNotFound
│   │   └── TokenNotFound
│   ├── UnstorableValue                    the database refused a value, and always will
│   ├── DelegationRefused                  away in the past, to oneself, or in a circle
│   ├── TokenExists                        an API token of that name exists already
│   └── TransitionRejected                 a compare-and-set found another status
│       ├── LeaseLost                      the execution's claim on the run is gone
│       ├── OutboxClaimLost                another dispatcher took the outbox row over
│       ├── AlreadyFinal                   the run already ended
│       ├── AlreadyDecided                 someone decided the review first
│       ├── AlreadyApproved                 this reviewer approved already
│       ├── StageMoved                     the approval chain moved on to another stage
│       ├── DigestMismatch                 a decision for an action no longer the one pending
│       ├── DecisionNotAllowed             e.g. "approve" on a question
│       ├── NotWaiting                     the run is not waiting for a review
│       ├── AlreadyRevoked                 someone revoked the standing approval first
│       └── TokenRevoked                   someone revoked the API token first
├── CrewRuntimeError                       (crew_runtime.errors)
│   ├── UsageError                         bad input from a person: say it, change nothing
│   │   ├── InputsRefused                  inputs a crew lacks, or does not take
│   │   ├── ReviewerInputRefused           a run's reviewer input that is not a user id
│   │   ├── TextRefused                    text that cannot be stored
│   │   ├── EditRefused                    an edit that does not fit its schema
│   │   ├── NothingToReopen                a task with no approved review to send back
│   │   ├── SelfApproval                   approving a run one started (forbid_self_approval)
│   │   ├── NotYourStage                   deciding at a stage of a chain one is not asked at
│   │   ├── NotAReviewer                   acting where the review policy says one may not
│   │   ├── NobodyDecides                  starting a run no one could decide
│   │   └── CouldNotCheck                  Slack did not say who is in a group or channel
│   ├── CrewBuildError                     the crew's factory failed or returned another thing
│   ├── TurnUnreadable                     a model turn CrewAI could not read back on replay
│   ├── ConsoleInputRefused                input() where no question can be asked for it
│   └── ConfigError                        countersign.toml is wrong (crew_runtime.specs)
│       └── UnknownCrewError
└── BotError                               (bot.errors)
    ├── SettingsError                      an environment variable Countersign cannot use
    │   └── SlackSettingsError             a Slack credential is missing
    ├── CliError                           a command cannot be done as asked
    ├── CommandError                       a /crew command that does not parse
    ├── PayloadError                       a Slack payload without what it must have
    ├── CheckFailed                        Slack did not say who may decide
    ├── CannotListen                       a port serve or a worker cannot listen on
    ├── TokenRefused                       an API token's name or scopes that cannot be
    ├── ApiError                           an HTTP API request refused (its status and why)
    ├── Deferred                           a progress edit waits out its two seconds
    └── ForkServerGone                     serve's fork server refused or exited: start afresh

Not in the tree, on purpose: the signals that stop a crew (``crew_runtime.signals``: they are
CrewAI ``HookAborted`` so that CrewAI lets them through), the Slack stand-in's own errors
(``sandbox.errors``: they are Slack's, in the sandbox), and :class:`IllegalTransition`
(a bug, which nobody should catch).

This subtree:

StorageError
├── NotFound
│   ├── RunNotFound
│   ├── ReviewNotFound
│   ├── StandingNotFound
│   └── TokenNotFound
├── UnstorableValue             the database refused a value, and always will
├── DelegationRefused           away in the past, to oneself, or in a circle
├── TokenExists                 an API token of that name exists already
└── TransitionRejected          a compare-and-set found another status
    ├── LeaseLost               the execution's claim on the run is gone
    ├── OutboxClaimLost         another dispatcher took the outbox row over
    ├── AlreadyFinal            the run already ended
    ├── AlreadyDecided          someone decided the review first
    ├── AlreadyApproved          this reviewer approved already
    ├── StageMoved              the approval chain moved on to another stage
    ├── DigestMismatch          a decision for an action no longer the one pending
    ├── DecisionNotAllowed      e.g. "approve" on a question
    ├── NotWaiting              the run is not waiting for a review
    ├── AlreadyRevoked          someone revoked the standing approval first
    └── TokenRevoked            someone revoked the API token first

IllegalTransition (not a StorageError: a bug, nobody should catch it) is raised when code asks
for a status change the state tables of ``storage.status`` do not list.
"""

from __future__ import annotations

from datetime import datetime


class CountersignError(Exception):
    """The root of every failure Countersign expects (the tree is drawn above)."""


class StorageError(CountersignError):
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


class StandingNotFound(NotFound):
    def __init__(self, standing_id: str) -> None:
        super().__init__(f"no standing approval with id {standing_id!r}")
        self.standing_id = standing_id


class TokenNotFound(NotFound):
    def __init__(self, name: str) -> None:
        super().__init__(f"no API token named {name!r}")
        self.name = name


class UnstorableValue(StorageError):
    """The database refused a value it can never store: a NUL in PostgreSQL's text, a lone
    surrogate in any text, a string longer than its column. Writing it again fails again,
    so whoever wrote it must give up on it, not retry.

    The message is the driver's reason, made storable itself (it may quote the value).
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason.encode("ascii", "backslashreplace").decode().replace("\0", "\\x00"))


class DelegationRefused(StorageError):
    """A delegation while away that cannot be: ``reason`` says why, in words for a person."""

    def __init__(self, person: str, delegate: str, reason: str) -> None:
        super().__init__(f"{person} cannot hand their reviews to {delegate}: {reason}")
        self.person = person
        self.delegate = delegate
        self.reason = reason


class TokenExists(StorageError):
    """An API token of that name exists (revoked or not): names are never reused, so the
    audit of what a name did stays one token's."""

    def __init__(self, name: str) -> None:
        super().__init__(f"an API token named {name!r} exists already: choose another name")
        self.name = name


class TransitionRejected(StorageError):
    """A compare-and-set did not match: the row was not in the expected state."""


class IllegalTransition(Exception):
    """Code asked for a status change that ``storage.status`` does not list: a bug in the
    caller, raised before the database is touched."""

    def __init__(self, table: str, old: list[str], new: str) -> None:
        super().__init__(f"{table}: no transition from {', '.join(old) or 'nothing'} to {new}")


class LeaseLost(TransitionRejected):
    """The execution holding ``token`` no longer holds the run: it was cancelled, finished,
    given back, or claimed again (by another worker, or by the same one after a stall)."""

    def __init__(self, run_id: str, token: str) -> None:
        super().__init__(f"the execution of run {run_id} under lease {token} no longer holds it")
        self.run_id = run_id
        self.token = token


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


class AlreadyApproved(TransitionRejected):
    """A review that needs several approvals was approved again by a reviewer who counts
    already; ``given``/``required`` say how many it has and needs."""

    def __init__(self, review_id: str, by: str, given: int, required: int) -> None:
        super().__init__(
            f"review {review_id}: {by} approved it already ({given} of {required} approvals); "
            "each reviewer counts once"
        )
        self.review_id = review_id
        self.by = by
        self.given = given
        self.required = required


class DigestMismatch(TransitionRejected):
    """A decision bound to an action digest (``expected``) reached a review whose action has
    another (``pending``; None: it has none): a stale card, an old API client, or a call the
    worker was about to run that is not the approved one."""

    def __init__(self, review_id: str, expected: str, pending: str | None) -> None:
        now = f"it is {pending[:12]} now" if pending else "it has no digest"
        super().__init__(
            f"review {review_id}: the decision was for action {expected[:12]}, but {now}: "
            "look at the review again and decide what it proposes now"
        )
        self.review_id = review_id
        self.expected = expected
        self.pending = pending


class StageMoved(TransitionRejected):
    """A decision made at one stage of an approval chain reached the review after it had
    moved to another (its stage's quorum was reached, by someone else, first); ``at`` and
    ``now`` are the stages' names."""

    def __init__(self, review_id: str, at: str, now: str) -> None:
        super().__init__(
            f"review {review_id}: the {at} stage was passed already; it is at the {now} stage"
        )
        self.review_id = review_id
        self.at = at
        self.now = now


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


class AlreadyRevoked(TransitionRejected):
    """The standing approval was revoked already; ``by``/``at`` say by whom and when."""

    def __init__(self, standing_id: str, by: str, at: datetime) -> None:
        super().__init__(
            f"standing approval {standing_id} was revoked by {by} at {at:%Y-%m-%d %H:%M} UTC"
        )
        self.standing_id = standing_id
        self.by = by
        self.at = at


class TokenRevoked(TransitionRejected):
    """The API token was revoked already; ``by``/``at`` say by whom and when."""

    def __init__(self, name: str, by: str, at: datetime) -> None:
        super().__init__(
            f"API token {name!r} was revoked already, by {by} at {at:%Y-%m-%d %H:%M} UTC"
        )
        self.name = name
        self.by = by
        self.at = at
