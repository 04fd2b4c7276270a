"""Typed, immutable views of the rows, handed out by the Store."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from storage.details import ReviewDetails
from storage.status import DIGEST, DecisionKind, OnExpire, ReviewKind, ReviewStatus, RunStatus

JSON = dict[str, Any]


@dataclass(frozen=True)
class Run:
    id: str
    crew: str
    inputs: dict[str, str]
    status: RunStatus
    output: str | None
    error: str | None
    divergence: str | None
    started_by: str | None
    channel: str | None
    thread_ts: str | None
    attempts: int
    lease_owner: str | None
    lease_token: str | None  # the fencing token of the claim executing it, while running
    lease_expires: datetime | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class Decision:
    review_id: str
    run_id: str
    kind: DecisionKind
    text: str | None
    original: str | None
    details: JSON
    decided_by: str
    created_at: datetime
    request_key: str | None = None

    @property
    def digest(self) -> str | None:
        """The action digest the decision covers (None: a question, or a decision from
        before digests)."""
        value = self.details.get(DIGEST)
        return value if isinstance(value, str) else None


@dataclass(frozen=True)
class Approval:
    """One reviewer's approval of a review that needs several (``approvals_required``)."""

    review_id: str
    decided_by: str
    details: JSON
    created_at: datetime
    request_key: str | None = None
    stage: str | None = None  # the approval chain's stage it was given at (None: no stages)


@dataclass(frozen=True)
class Stage:
    """One stage of an approval chain, as :meth:`Store.decide` counts it: its name and how
    many distinct reviewers' approvals pass it (who they may be is the service's to say)."""

    name: str
    required: int


@dataclass(frozen=True)
class StageSpec:
    """One stage of an approval chain (a ``stages`` list: the crew's, a gate's, a task's or
    a rule's): who is asked at it and how many of them must approve before the next stage
    is asked (the last stage's decide)."""

    name: str
    reviewers: tuple[str, ...]
    approvals_required: int = 1

    @property
    def rule(self) -> Stage:
        """What storage counts of it."""
        return Stage(self.name, self.approvals_required)


@dataclass(frozen=True)
class Raised:
    """What a rule (``crew_runtime.rules``) raised for one review, kept with it so that the
    review policy answers from it whatever the configuration says since: its ``reviewers``
    (in place of the run's), or its approval chain ``stages`` (in place of its gate's), and
    its quorum ``approvals``; each left empty (None) where the rule does not set it."""

    reviewers: tuple[str, ...] = ()
    stages: tuple[StageSpec, ...] = ()
    approvals: int | None = None

    @property
    def names_people(self) -> bool:
        """Whether it replaces who is asked (its reviewers, or its stages)."""
        return bool(self.reviewers or self.stages)

    def to_json(self) -> dict[str, Any]:
        """The JSON object stored for it (``reviews.reviewers``; JSON, never pickle)."""
        stored: dict[str, Any] = {}
        if self.reviewers:
            stored["reviewers"] = list(self.reviewers)
        if self.stages:
            stored["stages"] = [
                {
                    "name": s.name,
                    "reviewers": list(s.reviewers),
                    "approvals_required": s.approvals_required,
                }
                for s in self.stages
            ]
        if self.approvals is not None:
            stored["approvals"] = self.approvals
        return stored

    @classmethod
    def from_json(cls, data: object) -> Raised | None:
        """What :meth:`to_json` stored; None for a row without (NULL: no rule raised it)."""
        if not isinstance(data, dict):
            return None
        stages = data.get("stages")
        return cls(
            reviewers=_strings(data.get("reviewers")),
            stages=tuple(
                StageSpec(
                    str(stage.get("name", "")),
                    _strings(stage.get("reviewers")),
                    _count(stage.get("approvals_required")) or 1,
                )
                for stage in (stages if isinstance(stages, list) else [])
                if isinstance(stage, dict)
            ),
            approvals=_count(data.get("approvals")),
        )


def _strings(value: object) -> tuple[str, ...]:
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class StandingApproval:
    """An approval of a gated tool's call that approves the tool's later calls in the run
    whose arguments named in ``match`` have those values (all of them: an empty ``match``),
    until revoked."""

    id: str
    run_id: str
    review_id: str
    tool: str
    match: dict[str, Any]
    granted_by: str
    created_at: datetime
    revoked_by: str | None = None
    revoked_at: datetime | None = None
    channel: str | None = None  # where its thread message is, once posted
    message_ts: str | None = None

    def covers(self, tool: str, args: Mapping[str, Any]) -> bool:
        """Whether a call of ``tool`` with ``args`` is approved by this (if not revoked)."""
        return tool == self.tool and all(args.get(k) == v for k, v in self.match.items())


@dataclass(frozen=True)
class Review:
    id: str
    run_id: str
    kind: ReviewKind
    status: ReviewStatus
    stream: str
    seq: int
    prompt: str
    details: ReviewDetails  # the type of its kind (storage.details)
    journal_pos: int
    channel: str | None
    message_ts: str | None
    created_at: datetime
    decided_at: datetime | None
    remind_at: datetime | None
    escalate_at: datetime | None
    expires_at: datetime | None
    decision: Decision | None = None
    approvals: tuple[Approval, ...] = ()  # in the order given; empty for a one-person review
    claimed_by: str | None = None  # who is handling it (claimed, or reassigned to them)
    claimed_at: datetime | None = None
    stage: int = 0  # where an approval chain stands: the stage asked now, from 0
    digest: str | None = None  # the action digest of what it proposes (None: a question)
    raised: Raised | None = None  # what a rule raised for it (None: its configuration's)

    def made_by(self, request_key: str | None) -> bool:
        """Whether it was decided, or approved, by the request ``request_key`` (None: no
        request): replayed, that request is answered as the first time."""
        if request_key is None:
            return False
        if self.decision is not None and self.decision.request_key == request_key:
            return True
        return any(a.request_key == request_key for a in self.approvals)

    def approvals_at(self, stage: str) -> tuple[Approval, ...]:
        """The approvals given at the approval chain's stage named ``stage``."""
        return tuple(a for a in self.approvals if a.stage == stage)


@dataclass(frozen=True)
class PendingReviews:
    """One page of pending reviews, oldest first, with their runs and how many there are."""

    reviews: list[Review]
    runs: dict[str, Run]
    total: int


@dataclass(frozen=True)
class NewEntry:
    """A journal entry to write with a suspension (see :meth:`Store.suspend_run`)."""

    stream: str
    kind: str
    seq: int
    payload: JSON


@dataclass(frozen=True)
class Snapshot:
    """Where a suspended run stands (``payload``, plain JSON), for a resume that does not
    replay its journal; its turns before ``pos`` are not needed to go on."""

    pos: int
    payload: JSON


@dataclass(frozen=True)
class FlowPause:
    """A CrewAI Flow's pending feedback: what its resume needs, saved with the suspension
    that asks a person for it."""

    flow_uuid: str
    context: JSON
    state: JSON


@dataclass(frozen=True)
class NewReview:
    """What the runtime asks a human when a run pauses.

    ``details`` are of the type of ``kind`` (``storage.details``); left out, the review
    has none (stored as an empty object, read back as the kind's defaults).
    """

    kind: ReviewKind
    stream: str
    seq: int
    prompt: str
    details: ReviewDetails | None = None
    remind_at: datetime | None = None
    escalate_at: datetime | None = None
    expires_at: datetime | None = None
    on_expire: OnExpire = OnExpire.REJECT  # what expires_at does
    digest: str | None = None  # the action digest of what it proposes (crew_runtime.digests)
    raised: Raised | None = None  # what a rule raised for it: who is asked, how many

    def __post_init__(self) -> None:
        if self.details is not None and self.details.kind is not self.kind:
            raise TypeError(f"a {self.kind} review cannot hold {type(self.details).__name__}")


@dataclass(frozen=True)
class NewDecision:
    """A decision to record. ``request_key`` names the request that made it (a Slack
    request's inbox key): the same request replayed is answered as if it were the first."""

    kind: DecisionKind
    decided_by: str
    text: str | None = None
    details: JSON = field(default_factory=dict)
    request_key: str | None = None


@dataclass(frozen=True)
class JournalEntry:
    pos: int
    stream: str
    kind: str
    seq: int
    payload: JSON
    prompt_hash: str | None


@dataclass(frozen=True)
class OutboxMessage:
    """An announcement to deliver; ``progress`` holds the steps of it already done."""

    id: int
    run_id: str
    review_id: str | None
    kind: str
    payload: JSON
    attempts: int
    created_at: datetime
    progress: JSON = field(default_factory=dict)


@dataclass(frozen=True)
class Delegation:
    """``person`` is away: their reviews go to ``delegate`` until ``until`` (naive UTC)."""

    id: int
    person: str
    delegate: str
    until: datetime
    created_by: str
    created_at: datetime
    ended_by: str | None
    ended_at: datetime | None


@dataclass(frozen=True)
class ApiToken:
    """A bearer token of the HTTP API: its name, the scopes it grants, and the SHA-256 of
    its secret (the secret itself is shown once, when made, and never stored)."""

    id: str
    name: str
    secret_hash: str
    scopes: tuple[str, ...]
    created_by: str
    created_at: datetime
    revoked_by: str | None = None
    revoked_at: datetime | None = None
    last_used_at: datetime | None = None
