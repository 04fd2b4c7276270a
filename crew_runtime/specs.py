"""What a configuration file says, as objects: each crew's or flow's settings
(:class:`CrewSpec`, with its gates' and tasks' rules), the deployment's (:class:`Config`), and
the errors of a configuration. ``crew_runtime.config`` reads a file into them (its docstring
describes the file), ``crew_runtime.config_checks`` validates it."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from crew_runtime import streams
from crew_runtime.errors import CrewRuntimeError
from crew_runtime.rules import RuleSet
from storage import StageSpec
from storage.details import ReviewDetails, ToolApprovalDetails
from storage.retention import Retention, RetentionPolicy
from storage.status import OnExpire, ReviewKind
from storage.webhooks import WebhookEventType

Kind = Literal["crew", "flow"]
RemindBy = Literal["thread", "dm"]  # where reminders and escalations go
FACTORY_RE = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
USER_ID_RE = re.compile(r"[UW][A-Z0-9]{2,}")
NOBODY = "-"  # a reviewer no Slack id matches: the run's reviews wait for no one
RETENTION_KEYS = ("keep_journal", "keep_runs", "keep_audit")


class ConfigError(CrewRuntimeError):
    """The configuration file is missing or wrong, or a crew's factory cannot be loaded."""


class UnknownCrewError(ConfigError):
    """A crew name that the configuration does not define."""

    def __init__(self, name: str, known: tuple[str, ...], path: Path) -> None:
        listed = ", ".join(known) if known else "none are defined"
        super().__init__(f'{path}: no crew or flow named "{name}" (known: {listed})')
        self.name = name
        self.known = known


@dataclass(frozen=True, kw_only=True)
class Deadlines:
    """How long a review may wait and what then: the crew's keys, or a gate's or a task's.

    In a gate's or a task's table a key left out is None (the crew's applies); the crew's
    own, and what :meth:`CrewSpec.deadlines_for` returns, say None for "never"."""

    remind_after: timedelta | None = None
    escalate_after: timedelta | None = None
    expire_after: timedelta | None = None
    on_expire: OnExpire | None = None
    remind_by: RemindBy | None = None

    def over(self, base: Deadlines) -> Deadlines:
        """These, each key left out taken from ``base``; ``keep_waiting`` drops the expiry.
        An ``expire_after`` of their own is a deadline even where ``base`` keeps waiting
        (its expiry then rejects, unless they say otherwise)."""
        inherited = base.on_expire
        if self.expire_after is not None and inherited is OnExpire.KEEP_WAITING:
            inherited = None
        on_expire = self.on_expire or inherited or OnExpire.REJECT
        expire_after = self.expire_after or base.expire_after
        return Deadlines(
            remind_after=self.remind_after or base.remind_after,
            escalate_after=self.escalate_after or base.escalate_after,
            expire_after=None if on_expire is OnExpire.KEEP_WAITING else expire_after,
            on_expire=on_expire,
            remind_by=self.remind_by or base.remind_by or "thread",
        )


@dataclass(frozen=True)
class WebhookSpec:
    """One of a crew's ``webhooks``: where its events go, which, and the environment
    variable holding the secret that signs them (never the secret itself)."""

    url: str
    events: tuple[WebhookEventType, ...]
    secret_env: str


Chain = tuple[StageSpec, ...]  # a table's stages, in order; empty: no approval chain


@dataclass(frozen=True, kw_only=True)
class CrewSpec:
    """One ``[crews.NAME]`` or ``[flows.NAME]`` table, validated.

    Keyword-only with defaults for everything but ``name`` and ``factory`` so tests can build
    one in a line.
    """

    name: str
    kind: Kind = "crew"
    factory: str
    description: str = ""
    channel: str | None = None
    reviewers: tuple[str, ...] = ()
    remind_after: timedelta | None = None
    escalate_after: timedelta | None = None
    expire_after: timedelta | None = None
    escalate_to: tuple[str, ...] = ()
    approval_tools: tuple[str, ...] = ()
    required_inputs: tuple[str, ...] = ()
    optional_inputs: tuple[str, ...] = ()
    approvals_required: int = 1
    forbid_self_approval: bool = False
    progress: bool = True
    gates: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    tasks: Mapping[int, int] = field(default_factory=lambda: MappingProxyType({}))
    on_expire: OnExpire = OnExpire.REJECT
    remind_by: RemindBy = "thread"
    gate_deadlines: Mapping[str, Deadlines] = field(default_factory=lambda: MappingProxyType({}))
    task_deadlines: Mapping[int, Deadlines] = field(default_factory=lambda: MappingProxyType({}))
    reviewers_from_input: str | None = None
    standing: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: MappingProxyType({}))
    webhooks: tuple[WebhookSpec, ...] = ()
    stages: Chain = ()
    gate_stages: Mapping[str, Chain] = field(default_factory=lambda: MappingProxyType({}))
    task_stages: Mapping[int, Chain] = field(default_factory=lambda: MappingProxyType({}))
    rules: RuleSet = field(default_factory=RuleSet)  # rules that decide gated calls

    def standing_match(self, tool: str) -> tuple[str, ...] | None:
        """The arguments whose values a standing approval of ``tool`` keeps to (empty: it
        approves every later call), or None where the gate allows no standing approval."""
        return self.standing.get(tool)

    def standing_values(self, tool: str, args: Mapping[str, Any]) -> dict[str, Any] | None:
        """The values a standing approval granted on a call of ``tool`` with ``args`` keeps
        to (those its gate's ``standing_match`` names), or None where it allows none."""
        names = self.standing_match(tool)
        return None if names is None else {name: args.get(name) for name in names}

    def deadlines_for(self, *, tool: str | None = None, task: int | None = None) -> Deadlines:
        """When a review of the gated ``tool``'s call, or of task number ``task`` (from 1), is
        reminded, escalated and expired, and what its expiry does: each key its gate's or its
        task's where that sets it, else the crew's."""
        own = Deadlines()
        if tool is not None and tool in self.gate_deadlines:
            own = self.gate_deadlines[tool]
        elif task is not None and task in self.task_deadlines:
            own = self.task_deadlines[task]
        crew = Deadlines(
            remind_after=self.remind_after,
            escalate_after=self.escalate_after,
            expire_after=self.expire_after,
            on_expire=self.on_expire,
            remind_by=self.remind_by,
        )
        return own.over(crew)

    def reviewers_of(self, inputs: Mapping[str, str]) -> tuple[str, ...]:
        """Who may decide a run given ``inputs``: the person its reviewer input names when
        the crew takes its reviewers from one, else the crew's ``reviewers`` (empty: anyone
        in the run's channel)."""
        if self.reviewers_from_input is None:
            return self.reviewers
        person = inputs.get(self.reviewers_from_input, "")
        # A run without the input (started before the crew took one) stays closed to all.
        return (person,) if USER_ID_RE.fullmatch(person) else (NOBODY,)

    def approvals_for(self, *, tool: str | None = None, task: int | None = None) -> int:
        """How many distinct reviewers must approve a review of the gated ``tool``'s call,
        or of task number ``task`` (from 1): its own rule, else the crew's."""
        if tool is not None and tool in self.gates:
            return self.gates[tool]
        if task is not None and task in self.tasks:
            return self.tasks[task]
        return self.approvals_required

    def stages_for(self, *, tool: str | None = None, task: int | None = None) -> Chain:
        """The approval chain of a review of the gated ``tool``'s call, or of task number
        ``task``: its own rule's ``stages`` (none where its rule sets a quorum instead),
        else the crew's (none: the review follows :meth:`approvals_for`)."""
        if tool is not None and (tool in self.gate_stages or tool in self.gates):
            return self.gate_stages.get(tool, ())
        if task is not None and (task in self.task_stages or task in self.tasks):
            return self.task_stages.get(task, ())
        return self.stages

    retention: Retention = field(default_factory=Retention)  # only the keys it sets

    @property
    def declared_inputs(self) -> tuple[str, ...]:
        """Every input the crew names; when it names none, it takes any."""
        return (*self.required_inputs, *self.optional_inputs)

    @property
    def key(self) -> str:
        """The table's dotted key in the file, e.g. ``crews.blog``, used in error messages."""
        return f"{self.kind}s.{self.name}"


def rule_of(
    kind: ReviewKind, stream: str, details: ReviewDetails | None
) -> tuple[str | None, int | None]:
    """Whose rule a review follows: its gated tool's (a tool call's review) or its task's,
    numbered from 1 (a task review), as ``(tool, task)`` for :meth:`CrewSpec.approvals_for`
    and :meth:`CrewSpec.deadlines_for`."""
    tool = details.tool if isinstance(details, ToolApprovalDetails) else None
    index = streams.task_index(stream) if kind == ReviewKind.TASK_REVIEW else None
    return tool, None if index is None else index + 1


@dataclass(frozen=True)
class Config:
    """The loaded file: crew specs by name, crews and flows together."""

    path: Path
    crews: Mapping[str, CrewSpec] = field(default_factory=lambda: MappingProxyType({}))
    retention: Retention = field(default_factory=Retention)

    def retention_policy(self) -> RetentionPolicy:
        """The deployment's retention, and each crew's where it sets a key of its own."""
        own = {
            name: Retention(
                **{
                    key: getattr(spec.retention, key) or getattr(self.retention, key)
                    for key in RETENTION_KEYS
                }
            )
            for name, spec in self.crews.items()
            if spec.retention != Retention()
        }
        return RetentionPolicy(self.retention, own)

    def get(self, name: str) -> CrewSpec:
        """Return the spec called ``name``.

        Raises:
            UnknownCrewError: No crew or flow has that name; the message lists those that do,
                because the name usually comes from a person typing ``/crew run NAME``.
        """
        try:
            return self.crews[name]
        except KeyError:
            raise UnknownCrewError(name, tuple(sorted(self.crews)), self.path) from None
