"""The configuration file, ``countersign.toml``: which crews exist and who reviews them.

Each crew (or flow) a Slack user may start is one table. The file names a *factory*, not a
crew object, so the file stays data: the factory is imported only when a run needs it
(:func:`load_factory`), which keeps listing crews cheap (importing crewai costs seconds).

Example::

    [crews.blog]
    factory = "my_crews.blog:build"      # module:function, called as build(inputs) -> Crew
    description = "Outline and write a blog post"
    channel = "#content-review"          # channel id ("C0123ABCD") or name
    reviewers = ["U012ABCDEF", "S0GROUP01"]  # users (U…/W…) or user groups (S…); empty = anyone
    remind_after = "30m"                 # "90s", "30m", "2h", "1d", "1h30m", or seconds as an int
    escalate_after = "2h"
    escalate_to = ["U0LEAD0001"]         # user ids
    expire_after = "1d"
    on_expire = "reject"                 # or "approve", or "keep_waiting" (no expiry)
    remind_by = "thread"                 # or "dm": reminders and escalations as DMs
    approval_tools = ["send_email"]      # tool calls that need a human's approval
    inputs = ["topic"]                   # required inputs: /crew run blog topic="..."
    optional_inputs = ["tone"]           # inputs a run may be given; no others are taken
    approvals_required = 2               # distinct reviewers who must approve each review
    forbid_self_approval = true          # who started a run may not approve its reviews

    [crews.deal]
    factory = "my_crews.deal:build"
    inputs = ["customer", "approver"]
    reviewers_from_input = "approver"     # /crew run deal approver=@dana: Dana reviews that run

    [crews.blog.gates.send_email]        # a gated tool's calls: their own quorum and deadlines
    approvals_required = 3
    expire_after = "4h"
    on_expire = "approve"

    [crews.blog.tasks.2]                 # the second task's reviews (tasks count from 1)
    approvals_required = 1

    [flows.onboarding]
    factory = "my_crews.onboarding:build"
    keep_runs = "90d"                    # this crew's own retention (below)

    [retention]                          # the deployment's; none of it: keep everything
    keep_journal = "30d"                 # a finished run's journal
    keep_runs = "1y"                     # a finished run with all its rows
    keep_audit = "2y"                    # who decided what, after its run was pruned

Keys and defaults (every key but ``factory`` is optional):

==================  ==========================================  ===========
key                 meaning                                     default
==================  ==========================================  ===========
``factory``         ``"module:function"``; ``function(inputs:  required
                    dict[str, str])`` returns the crew or flow
``description``     one line shown in Slack                     ``""``
``channel``         where runs are posted                       none
``reviewers``       who may decide; empty means anyone          ``[]``
``remind_after``    remind the reviewers after this long        none
``escalate_after``  escalate to ``escalate_to`` after this long none
``expire_after``    expire the review after this long           none
``on_expire``       what ``expire_after`` does: ``"reject"``,   ``"reject"``
                    ``"approve"`` (decided by ``deadline``) or
                    ``"keep_waiting"`` (no expiry)
``remind_by``       ``"thread"``, or ``"dm"``: reminders and    ``"thread"``
                    escalations as DMs to each person named
``escalate_to``     user ids to escalate to                     ``[]``
``approval_tools``  names of tools whose calls need approval    ``[]``
``inputs``          names of inputs a run must be given         ``[]``
``optional_inputs`` names of inputs a run may be given          ``[]``
``approvals_required`` distinct reviewers' approvals a review   ``1``
                    needs (any rejection or changes decide it)
``forbid_self_approval`` the run's starter may not approve      ``false``
``reviewers_from_input`` the input (one of ``inputs``) naming   none
                    the run's one reviewer, a Slack user
``gates``           ``{tool: {approvals_required, remind_after, ``{}``
                    escalate_after, expire_after, on_expire,
                    remind_by, allow_standing,
                    standing_match}}``
``tasks``           ``{task number: {the same keys}}``         ``{}``
``keep_journal``    this crew's own ``[retention]`` keys        the
``keep_runs``                                                   deployment's
``keep_audit``
==================  ==========================================  ===========

A review's quorum is its gate's or its task's ``approvals_required`` when the crew sets one,
else the crew's; so is each of its deadline keys (:meth:`CrewSpec.deadlines_for`), key by key.
An ``on_expire`` that cannot act (``"approve"``/``"reject"`` with no ``expire_after``, or
``"keep_waiting"`` beside an ``expire_after`` of the same table) is an error. With
``reviewers`` listing only users, a quorum above their number is an
error (nobody could reach it).

A gate's ``allow_standing = true`` lets the approval of one call of its tool also approve the
tool's later calls in the run (a standing approval), those whose arguments named in
``standing_match`` (default: none, so every call) have the approved call's values; only where
its calls need one approval (its ``approvals_required``, else the crew's, is 1).

With ``reviewers_from_input``, each run names its own reviewer: the input holds a Slack user
id (``/crew run`` takes a mention), and that person alone decides the run's reviews and is
the one reminded. It cannot be combined with ``reviewers``, and every quorum stays 1.

A crew that names inputs (either key) takes no others: a run given an input it does not
name is refused with the names it takes. A crew that names none takes any.

Names match ``[a-z0-9][a-z0-9_-]*`` and are unique across ``crews`` and ``flows``. Unknown keys
are errors, not warnings: a misspelt ``reviewers`` would otherwise let anyone approve.

Errors: every problem raises :class:`ConfigError` whose message names the file, the dotted key
and what is wrong, e.g. ``countersign.toml: crews.writer.remind_after: expected a duration like
"30m", got "soon"``.

ConfigError
└── UnknownCrewError        :meth:`Config.get` with a name the file does not define
"""

from __future__ import annotations

import difflib
import importlib
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from crew_runtime import streams
from crew_runtime.errors import CrewRuntimeError
from storage.details import ReviewDetails, ToolApprovalDetails
from storage.retention import Retention, RetentionPolicy
from storage.status import OnExpire, ReviewKind

__all__ = [
    "CONFIG_ENV_VAR",
    "DEFAULT_CONFIG_NAME",
    "NOBODY",
    "Config",
    "ConfigError",
    "CrewSpec",
    "Deadlines",
    "UnknownCrewError",
    "load_config",
    "load_factory",
    "parse_duration",
    "rule_of",
]

CONFIG_ENV_VAR = "COUNTERSIGN_CONFIG"
DEFAULT_CONFIG_NAME = "countersign.toml"

Kind = Literal["crew", "flow"]
RemindBy = Literal["thread", "dm"]  # where reminders and escalations go
_REMIND_BY: tuple[RemindBy, ...] = ("thread", "dm")
_SECTIONS: Mapping[str, Kind] = {"crews": "crew", "flows": "flow"}

_NAME_RE = re.compile(r"[a-z0-9][a-z0-9_-]*")
_FACTORY_RE = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
# Slack ids: channels C…, private channels G…, DMs D…; users U…/W… (W on Enterprise Grid);
# user groups S….
_CHANNEL_ID_RE = re.compile(r"[CGD][A-Z0-9]{2,}")
_CHANNEL_NAME_RE = re.compile(r"#?[^\sA-Z#.,@<>]{1,80}")  # Slack: lowercase, no spaces/periods
_USER_ID_RE = re.compile(r"[UW][A-Z0-9]{2,}")
NOBODY = "-"  # a reviewer no Slack id matches: the run's reviews wait for no one
_REVIEWER_ID_RE = re.compile(r"[UWS][A-Z0-9]{2,}")
_INPUT_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # used as {placeholders} in crewai
_DURATION_RE = re.compile(r"(?:\d+[ydhms])+")
_DURATION_PART_RE = re.compile(r"(\d+)([ydhms])")
_UNIT_SECONDS = {"y": 365 * 86_400, "d": 86_400, "h": 3_600, "m": 60, "s": 1}
_RETENTION_KEYS = ("keep_journal", "keep_runs", "keep_audit")

_KNOWN_KEYS = (
    "factory",
    "description",
    "channel",
    "reviewers",
    "remind_after",
    "escalate_after",
    "expire_after",
    "on_expire",
    "remind_by",
    "escalate_to",
    "approval_tools",
    "inputs",
    "optional_inputs",
    *_RETENTION_KEYS,
    "approvals_required",
    "forbid_self_approval",
    "reviewers_from_input",
    "gates",
    "tasks",
)
_DEADLINE_KEYS = ("remind_after", "escalate_after", "expire_after", "on_expire", "remind_by")
# What a [crews.NAME.gates.TOOL] or .tasks.N table sets; a gate's may also allow standing
# approvals of its tool.
_RULE_KEYS = ("approvals_required", *_DEADLINE_KEYS)
_GATE_KEYS = (*_RULE_KEYS, "allow_standing", "standing_match")
_ARGUMENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TASK_NUMBER_RE = re.compile(r"[1-9][0-9]*")


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
    gates: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    tasks: Mapping[int, int] = field(default_factory=lambda: MappingProxyType({}))
    on_expire: OnExpire = OnExpire.REJECT
    remind_by: RemindBy = "thread"
    gate_deadlines: Mapping[str, Deadlines] = field(default_factory=lambda: MappingProxyType({}))
    task_deadlines: Mapping[int, Deadlines] = field(default_factory=lambda: MappingProxyType({}))
    reviewers_from_input: str | None = None
    standing: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: MappingProxyType({}))

    def standing_match(self, tool: str) -> tuple[str, ...] | None:
        """The arguments whose values a standing approval of ``tool`` keeps to (empty: it
        approves every later call), or None where the gate allows no standing approval."""
        return self.standing.get(tool)

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
        return (person,) if _USER_ID_RE.fullmatch(person) else (NOBODY,)

    def approvals_for(self, *, tool: str | None = None, task: int | None = None) -> int:
        """How many distinct reviewers must approve a review of the gated ``tool``'s call,
        or of task number ``task`` (from 1): its own rule, else the crew's."""
        if tool is not None and tool in self.gates:
            return self.gates[tool]
        if task is not None and task in self.tasks:
            return self.tasks[task]
        return self.approvals_required

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
                    for key in _RETENTION_KEYS
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


def load_config(
    path: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Config:
    """Read and validate the configuration file.

    The file is found in this order: ``path`` if given; else the ``COUNTERSIGN_CONFIG``
    environment variable; else ``countersign.toml`` in ``cwd``. ``environ`` and ``cwd`` default
    to the process's own and are parameters so callers (and tests) decide what is read.

    Args:
        path: An explicit path to the file.
        environ: The environment to read ``COUNTERSIGN_CONFIG`` from.
        cwd: The directory searched last.

    Returns:
        The validated configuration. Factories are not imported; see :func:`load_factory`.

    Raises:
        ConfigError: The file is missing, unreadable, not TOML, or not valid configuration.
    """
    env = os.environ if environ is None else environ
    if path is not None:
        file, origin = Path(path), "the path given"
    elif env.get(CONFIG_ENV_VAR):
        file, origin = Path(env[CONFIG_ENV_VAR]), f"${CONFIG_ENV_VAR}"
    else:
        file = (Path.cwd() if cwd is None else cwd) / DEFAULT_CONFIG_NAME
        origin = "the default location"
    try:
        raw = file.read_bytes()
    except FileNotFoundError:
        raise ConfigError(
            f"{file}: configuration file not found (tried {origin}); pass its path explicitly "
            f"or set {CONFIG_ENV_VAR}=/path/to/{DEFAULT_CONFIG_NAME}"
        ) from None
    except OSError as exc:
        raise ConfigError(f"{file}: cannot read the configuration file: {exc.strerror}") from exc
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{file}: not UTF-8 text: {exc.reason} at byte {exc.start}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: {_describe_toml_error(str(exc))}") from None
    where = _Where(file)
    retention = data.pop("retention", {})
    if not isinstance(retention, dict):
        raise where.error("retention", f"expected a table [retention], got {_show(retention)}")
    for key in retention:
        if key not in _RETENTION_KEYS:
            raise where.error(
                f"retention.{key}",
                f"unknown key{_suggest(key, _RETENTION_KEYS)}; "
                f"known keys: {', '.join(_RETENTION_KEYS)}",
            )
    return Config(
        path=file,
        crews=MappingProxyType(_parse(data, where)),
        retention=_retention(retention, "retention", where),
    )


def load_factory(spec: CrewSpec) -> Callable[[dict[str, str]], Any]:
    """Import the crew's ``module:function`` factory.

    Lazy on purpose: importing a user's crew module imports crewai (seconds), and a broken
    module should fail the one crew that uses it, not the whole configuration.

    Raises:
        ConfigError: The factory string is malformed, its module cannot be imported (the
            import's own error is included), the attribute is missing, or it is not callable.
    """
    where = f'{spec.key}.factory: "{spec.factory}"'
    if not _FACTORY_RE.fullmatch(spec.factory):
        raise ConfigError(f'{where}: expected "module:function", e.g. "my_crews.blog:build"')
    module_name, _, attr_path = spec.factory.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and _is_module_or_parent(exc.name, module_name):
            raise ConfigError(
                f'{where}: no module named "{exc.name}" (is it installed, or on sys.path?)'
            ) from exc
        raise ConfigError(f'{where}: importing "{module_name}" failed: {exc}') from exc
    except Exception as exc:  # an import can raise anything; show it, crew by crew
        raise ConfigError(
            f'{where}: importing "{module_name}" failed: {type(exc).__name__}: {exc}'
        ) from exc
    target: Any = module
    parts = attr_path.split(".")
    for i, part in enumerate(parts):
        try:
            target = getattr(target, part)
        except AttributeError:
            missing = ".".join(parts[: i + 1])
            raise ConfigError(
                f'{where}: module "{module_name}" has no attribute "{missing}"'
            ) from None
    if not callable(target):
        raise ConfigError(f"{where}: not callable (it is a {type(target).__name__})")
    factory: Callable[[dict[str, str]], Any] = target
    return factory


def parse_duration(value: object) -> timedelta | None:
    """Parse ``"90s"``, ``"30m"``, ``"2h"``, ``"1d"``, ``"1h30m"`` or an int of seconds.

    Returns:
        The duration, or None when ``value`` is not one (callers word the error, they know
        the key). Zero and negative durations are not durations here.
    """
    if isinstance(value, bool):  # bool is an int subclass; `true` is not "1 second"
        return None
    if isinstance(value, int):
        return timedelta(seconds=value) if value > 0 else None
    if isinstance(value, str):
        text = value.strip()
        if not _DURATION_RE.fullmatch(text):
            return None
        seconds = sum(int(n) * _UNIT_SECONDS[u] for n, u in _DURATION_PART_RE.findall(text))
        return timedelta(seconds=seconds) if seconds > 0 else None
    return None


# --- validation --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Where:
    """The file being validated; turns a dotted key and a complaint into a ConfigError."""

    file: Path

    def error(self, key: str, problem: str) -> ConfigError:
        return ConfigError(f"{self.file}: {key}: {problem}")


def _parse(data: dict[str, Any], where: _Where) -> dict[str, CrewSpec]:
    for key in data:
        if key not in _SECTIONS:
            raise where.error(
                key,
                f"unknown top-level key{_suggest(key, _SECTIONS)}; "
                "the file holds only [crews.NAME], [flows.NAME] and [retention] tables",
            )
    specs: dict[str, CrewSpec] = {}
    for section, kind in _SECTIONS.items():
        tables = data.get(section, {})
        if not isinstance(tables, dict):
            raise where.error(
                section, f"expected tables like [{section}.NAME], got {_show(tables)}"
            )
        for name, table in tables.items():
            key = f"{section}.{name}"
            if not _NAME_RE.fullmatch(name):
                raise where.error(
                    key,
                    f'invalid name "{name}": use lowercase letters, digits, "-" and "_", '
                    "starting with a letter or digit",
                )
            if name in specs:
                raise where.error(key, f'the name "{name}" is already used by {specs[name].key}')
            if not isinstance(table, dict):
                raise where.error(key, f"expected a table [{key}], got {_show(table)}")
            specs[name] = _parse_spec(name, kind, key, table, where)
    return specs


def _parse_spec(name: str, kind: Kind, key: str, table: dict[str, Any], where: _Where) -> CrewSpec:
    for k in table:
        if k not in _KNOWN_KEYS:
            raise where.error(
                f"{key}.{k}",
                f"unknown key{_suggest(k, _KNOWN_KEYS)}; known keys: {', '.join(_KNOWN_KEYS)}",
            )
    if "factory" not in table:
        raise where.error(f"{key}.factory", 'missing; every crew needs factory = "module:function"')
    factory = _string(table["factory"], f"{key}.factory", where)
    if not _FACTORY_RE.fullmatch(factory):
        raise where.error(
            f"{key}.factory",
            f'expected "module:function", e.g. "my_crews.blog:build", got {_show(factory)}',
        )
    channel = table.get("channel")
    if channel is not None:
        channel = _string(channel, f"{key}.channel", where)
        if not (_CHANNEL_ID_RE.fullmatch(channel) or _CHANNEL_NAME_RE.fullmatch(channel)):
            raise where.error(
                f"{key}.channel",
                f'expected a channel id like "C0123ABCD" or a name like "#reviews", '
                f"got {_show(channel)}",
            )
    reviewers = _strings(
        table,
        key,
        "reviewers",
        _REVIEWER_ID_RE,
        'a Slack user id ("U…", "W…") or user-group id ("S…")',
        where,
    )
    approvals = _count(table.get("approvals_required", 1), f"{key}.approvals_required", where)
    gate_rules = _rules(table, key, "gates", where, _GATE_KEYS)
    task_rules = _rules(table, key, "tasks", where, _RULE_KEYS)
    gates = _quorums(gate_rules, f"{key}.gates", where)
    tasks = _quorums(task_rules, f"{key}.tasks", where)
    for task in task_rules:
        if not _TASK_NUMBER_RE.fullmatch(task):
            raise where.error(
                f"{key}.tasks.{task}",
                f"expected a task number from 1, as in [{key}.tasks.2], got {_show(task)}",
            )
    _reachable(reviewers, key, "approvals_required", approvals, where)
    for section, rules in (("gates", gates), ("tasks", tasks)):
        for which, needed in rules.items():
            _reachable(reviewers, f"{key}.{section}.{which}", "approvals_required", needed, where)
    crew_deadlines = _deadlines(table, key, where)
    gate_deadlines = {
        tool: _deadlines(rule, f"{key}.gates.{tool}", where, crew_deadlines)
        for tool, rule in gate_rules.items()
    }
    task_deadlines = {
        int(task): _deadlines(rule, f"{key}.tasks.{task}", where, crew_deadlines)
        for task, rule in task_rules.items()
    }
    forbid = table.get("forbid_self_approval", False)
    if not isinstance(forbid, bool):
        raise where.error(
            f"{key}.forbid_self_approval", f"expected true or false, got {_show(forbid)}"
        )
    return CrewSpec(
        name=name,
        kind=kind,
        factory=factory,
        description=_string(table.get("description", ""), f"{key}.description", where),
        channel=channel,
        reviewers=reviewers,
        remind_after=crew_deadlines.remind_after,
        escalate_after=crew_deadlines.escalate_after,
        expire_after=crew_deadlines.expire_after,
        on_expire=crew_deadlines.on_expire or OnExpire.REJECT,
        remind_by=crew_deadlines.remind_by or "thread",
        escalate_to=_strings(
            table, key, "escalate_to", _USER_ID_RE, 'a Slack user id ("U…", "W…")', where
        ),
        approval_tools=_strings(table, key, "approval_tools", None, "a tool name", where),
        required_inputs=_strings(
            table, key, "inputs", _INPUT_NAME_RE, 'an input name like "topic"', where
        ),
        optional_inputs=_strings(
            table, key, "optional_inputs", _INPUT_NAME_RE, 'an input name like "tone"', where
        ),
        approvals_required=approvals,
        forbid_self_approval=forbid,
        reviewers_from_input=_reviewer_input(table, key, reviewers, where),
        gates=MappingProxyType(gates),
        tasks=MappingProxyType({int(task): needed for task, needed in tasks.items()}),
        gate_deadlines=MappingProxyType(gate_deadlines),
        task_deadlines=MappingProxyType(task_deadlines),
        standing=MappingProxyType(_standing(gate_rules, gates, approvals, f"{key}.gates", where)),
        retention=_retention(table, key, where),
    )


def _reviewer_input(
    table: dict[str, Any], key: str, reviewers: tuple[str, ...], where: _Where
) -> str | None:
    """``reviewers_from_input``: a required input's name, with no ``reviewers`` list beside
    it and no quorum above the one person it names."""
    if "reviewers_from_input" not in table:
        return None
    name_key = f"{key}.reviewers_from_input"
    name = _string(table["reviewers_from_input"], name_key, where)
    required = table.get("inputs", [])
    if not isinstance(required, list) or name not in required:
        raise where.error(name_key, f"{_show(name)} must be one of the crew's inputs = [...]")
    if reviewers:
        raise where.error(name_key, "cannot be combined with reviewers: each run names its own")
    quorums = [table.get("approvals_required", 1)] + [
        rule.get("approvals_required", 1)
        for section in ("gates", "tasks")
        for rule in table.get(section, {}).values()
    ]
    if any(needed != 1 for needed in quorums):
        raise where.error(name_key, "names one reviewer, so every approvals_required must be 1")
    return name


def _retention(table: dict[str, Any], key: str, where: _Where) -> Retention:
    return Retention(**{name: _duration(table, key, name, where) for name in _RETENTION_KEYS})


def _count(value: object, key: str, where: _Where) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise where.error(
            key, f"expected a whole number of approvals, 1 or more, got {_show(value)}"
        )
    return value


def _rules(
    table: dict[str, Any], key: str, name: str, where: _Where, known: tuple[str, ...]
) -> dict[str, dict[str, Any]]:
    """``[KEY.NAME.WHICH]`` tables (a gated tool's, a task's), each setting ``known`` keys."""
    rules = table.get(name, {})
    if not isinstance(rules, dict):
        raise where.error(
            f"{key}.{name}", f"expected tables like [{key}.{name}.NAME], got {_show(rules)}"
        )
    found: dict[str, dict[str, Any]] = {}
    for which, rule in rules.items():
        rule_key = f"{key}.{name}.{which}"
        if not isinstance(rule, dict):
            raise where.error(rule_key, f"expected a table [{rule_key}], got {_show(rule)}")
        for k in rule:
            if k not in known:
                raise where.error(
                    f"{rule_key}.{k}",
                    f"unknown key{_suggest(k, known)}; known keys: {', '.join(known)}",
                )
        if not rule:
            raise where.error(rule_key, f"empty; set one of {', '.join(known)}")
        found[which] = rule
    return found


def _quorums(rules: dict[str, dict[str, Any]], key: str, where: _Where) -> dict[str, int]:
    """The approvals_required of the ``rules`` that set one."""
    return {
        which: _count(rule["approvals_required"], f"{key}.{which}.approvals_required", where)
        for which, rule in rules.items()
        if "approvals_required" in rule
    }


def _standing(
    rules: dict[str, dict[str, Any]],
    quorums: dict[str, int],
    crew_quorum: int,
    key: str,
    where: _Where,
) -> dict[str, tuple[str, ...]]:
    """The gates that allow standing approvals (``allow_standing = true``), each with its
    ``standing_match``; only where one reviewer's approval settles a call of the tool."""
    found: dict[str, tuple[str, ...]] = {}
    for tool, rule in rules.items():
        allow = rule.get("allow_standing", False)
        if not isinstance(allow, bool):
            raise where.error(
                f"{key}.{tool}.allow_standing", f"expected true or false, got {_show(allow)}"
            )
        if not allow:
            if "standing_match" in rule:
                raise where.error(
                    f"{key}.{tool}.standing_match", "needs allow_standing = true beside it"
                )
            continue
        needed = quorums.get(tool, crew_quorum)
        if needed != 1:
            raise where.error(
                f"{key}.{tool}.allow_standing",
                f"a call of {tool} needs {needed} approvals, so one reviewer cannot approve "
                "its later calls: allow_standing needs approvals_required = 1",
            )
        found[tool] = _strings(
            rule,
            f"{key}.{tool}",
            "standing_match",
            _ARGUMENT_RE,
            'an argument name of the tool, like "to"',
            where,
        )
    return found


def _deadlines(
    table: dict[str, Any], key: str, where: _Where, crew: Deadlines | None = None
) -> Deadlines:
    """The deadline keys ``table`` sets; with ``crew`` (a gate's or a task's table), checked
    as they combine with the crew's."""
    on_expire = table.get("on_expire")
    if on_expire is not None and on_expire not in tuple(OnExpire):
        raise where.error(
            f"{key}.on_expire",
            f'expected "reject", "approve" or "keep_waiting", got {_show(on_expire)}',
        )
    remind_by = table.get("remind_by")
    if remind_by is not None and remind_by not in _REMIND_BY:
        raise where.error(f"{key}.remind_by", f'expected "thread" or "dm", got {_show(remind_by)}')
    own = Deadlines(
        remind_by=remind_by,
        remind_after=_duration(table, key, "remind_after", where),
        escalate_after=_duration(table, key, "escalate_after", where),
        expire_after=_duration(table, key, "expire_after", where),
        on_expire=None if on_expire is None else OnExpire(on_expire),
    )
    if own.on_expire is OnExpire.KEEP_WAITING and own.expire_after is not None:
        raise where.error(
            f"{key}.expire_after",
            'a review that keeps waiting (on_expire = "keep_waiting") never expires; '
            "remove one of the two",
        )
    if own.on_expire in (OnExpire.REJECT, OnExpire.APPROVE):
        effective = own.over(crew or Deadlines())
        if effective.expire_after is None:
            raise where.error(
                f"{key}.on_expire",
                f'"{own.on_expire}" needs a deadline: set expire_after here or for the crew',
            )
    return own


def _reachable(reviewers: tuple[str, ...], key: str, name: str, needed: int, where: _Where) -> None:
    """A quorum the listed reviewers cannot reach (only users listed, fewer than it needs)."""
    if reviewers and all(_USER_ID_RE.fullmatch(r) for r in reviewers) and needed > len(reviewers):
        raise where.error(
            f"{key}.{name}",
            f"{needed} approvals can never be given: reviewers lists {len(reviewers)} people",
        )


def _string(value: object, key: str, where: _Where) -> str:
    if not isinstance(value, str):
        raise where.error(key, f"expected a string, got {_show(value)}")
    return value


def _duration(table: dict[str, Any], key: str, name: str, where: _Where) -> timedelta | None:
    if name not in table:
        return None
    value = table[name]
    parsed = parse_duration(value)
    if parsed is None:
        raise where.error(
            f"{key}.{name}",
            f'expected a duration like "30m", got {_show(value)} (units s, m, h, d, y as in '
            '"90s", "1h30m" or "1y", or a positive whole number of seconds)',
        )
    return parsed


def _strings(
    table: dict[str, Any],
    key: str,
    name: str,
    pattern: re.Pattern[str] | None,
    expected: str,
    where: _Where,
) -> tuple[str, ...]:
    values = table.get(name, [])
    if not isinstance(values, list):
        raise where.error(f"{key}.{name}", f"expected a list like [...], got {_show(values)}")
    seen: list[str] = []
    for i, item in enumerate(values):
        item_key = f"{key}.{name}[{i}]"
        ok = isinstance(item, str) and item != ""
        if ok and pattern is not None:
            ok = pattern.fullmatch(item) is not None
        if not ok:
            raise where.error(item_key, f"expected {expected}, got {_show(item)}")
        if item in seen:
            raise where.error(item_key, f"{_show(item)} is listed twice")
        seen.append(item)
    return tuple(seen)


def _show(value: object) -> str:
    """Render a TOML value the way the user wrote it, for error messages."""
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "a list"
    return repr(value)


def _suggest(word: str, choices: Mapping[str, object] | tuple[str, ...]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f' (did you mean "{close[0]}"?)' if close else ""


def _describe_toml_error(message: str) -> str:
    """Put tomllib's "(at line L, column C)" first, where editors and people look for it."""
    match = re.search(r"\s*\(at line (\d+), column (\d+)\)$", message)
    if match is None:
        return f"invalid TOML: {message}"
    return f"line {match[1]}, column {match[2]}: invalid TOML: {message[: match.start()]}"


def _is_module_or_parent(missing: str, module_name: str) -> bool:
    return module_name == missing or module_name.startswith(missing + ".")
