"""Validation of a configuration file, key by key: every problem is a :class:`ConfigError`
naming the file, the dotted key and what is wrong (the file's format is described in
``crew_runtime.config``)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from types import MappingProxyType
from typing import Any

from crew_runtime.config_values import (
    Where,
    check_keys,
    read_count,
    read_string,
    read_strings,
    show,
    suggest,
)
from crew_runtime.rules import Rule, RuleSet, check_reachable, parse_rule, rule_set
from crew_runtime.specs import (
    FACTORY_RE,
    RETENTION_KEYS,
    USER_ID_RE,
    Chain,
    Config,
    CrewSpec,
    Deadlines,
    Kind,
    RemindBy,
)
from crew_runtime.stage_checks import parse_stages, read_reviewers
from crew_runtime.webhooks import parse_webhooks
from storage.retention import Retention
from storage.status import OnExpire

_REMIND_BY: tuple[RemindBy, ...] = ("thread", "dm")
_SECTIONS: Mapping[str, Kind] = {"crews": "crew", "flows": "flow"}
_NAME_RE = re.compile(r"[a-z0-9][a-z0-9_-]*")
# Slack ids: channels C…, private channels G…, DMs D…; users U…/W… (W on Enterprise Grid);
# user groups S….
_CHANNEL_ID_RE = re.compile(r"[CGD][A-Z0-9]{2,}")
_CHANNEL_NAME_RE = re.compile(r"#?[^\sA-Z#.,@<>]{1,80}")  # Slack: lowercase, no spaces/periods
_INPUT_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # used as {placeholders} in crewai
_DURATION_RE = re.compile(r"(?:\d+[ydhms])+")
_DURATION_PART_RE = re.compile(r"(\d+)([ydhms])")
_UNIT_SECONDS = {"y": 365 * 86_400, "d": 86_400, "h": 3_600, "m": 60, "s": 1}
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
    *RETENTION_KEYS,
    "approvals_required",
    "forbid_self_approval",
    "progress",
    "reviewers_from_input",
    "gates",
    "tasks",
    "webhooks",
    "stages",
    "rules",
)
_DEADLINE_KEYS = ("remind_after", "escalate_after", "expire_after", "on_expire", "remind_by")
# What a [crews.NAME.gates.TOOL] or .tasks.N table sets; a gate's may also allow standing
# approvals of its tool.
_RULE_KEYS = ("approvals_required", "stages", *_DEADLINE_KEYS)
_GATE_KEYS = (*_RULE_KEYS, "allow_standing", "standing_match", "rules")
_ARGUMENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TASK_NUMBER_RE = re.compile(r"[1-9][0-9]*")


MOST_DURATION = timedelta(days=36_500)
"""The longest duration a file may give (``"100y"``): any time it is added to or taken from
is still a date (a datetime ends at 9999)."""
MOST_DURATION_WORDS = '"100y" (36500d)'


def parse_duration(value: object) -> timedelta | None:
    """Parse ``"90s"``, ``"30m"``, ``"2h"``, ``"1d"``, ``"1h30m"`` or an int of seconds.

    Returns:
        The duration, or None when ``value`` is not one (callers word the error, they know
        the key). Zero and negative durations are not durations here, nor those longer than
        :data:`MOST_DURATION` (:func:`duration_seconds` tells them apart).
    """
    seconds = duration_seconds(value)
    if seconds is None or not 0 < seconds <= MOST_DURATION.total_seconds():
        return None
    return timedelta(seconds=seconds)


def duration_seconds(value: object) -> int | None:
    """The seconds ``value`` says as :func:`parse_duration` reads it, whatever their number
    (zero, negative, or more than a timedelta holds); None when it is not a duration."""
    if isinstance(value, bool):  # bool is an int subclass; `true` is not "1 second"
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        text = value.strip()
        if not _DURATION_RE.fullmatch(text):
            return None
        return sum(int(n) * _UNIT_SECONDS[u] for n, u in _DURATION_PART_RE.findall(text))
    return None


def _parse(data: dict[str, Any], where: Where) -> dict[str, CrewSpec]:
    for key in data:
        if key not in _SECTIONS:
            raise where.error(
                key,
                f"unknown top-level key{suggest(key, _SECTIONS)}; "
                "the file holds only [crews.NAME], [flows.NAME] and [retention] tables",
            )
    specs: dict[str, CrewSpec] = {}
    for section, kind in _SECTIONS.items():
        tables = data.get(section, {})
        if not isinstance(tables, dict):
            raise where.error(section, f"expected tables like [{section}.NAME], got {show(tables)}")
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
                raise where.error(key, f"expected a table [{key}], got {show(table)}")
            specs[name] = _parse_spec(name, kind, key, table, where)
    return specs


def _parse_spec(name: str, kind: Kind, key: str, table: dict[str, Any], where: Where) -> CrewSpec:
    check_keys(table, _KNOWN_KEYS, key, where.error)
    if "factory" not in table:
        raise where.error(f"{key}.factory", 'missing; every crew needs factory = "module:function"')
    factory = read_string(table["factory"], f"{key}.factory", where)
    if not FACTORY_RE.fullmatch(factory):
        raise where.error(
            f"{key}.factory",
            f'expected "module:function", e.g. "my_crews.blog:build", got {show(factory)}',
        )
    channel = table.get("channel")
    if channel is not None:
        channel = read_string(channel, f"{key}.channel", where)
        if not (_CHANNEL_ID_RE.fullmatch(channel) or _CHANNEL_NAME_RE.fullmatch(channel)):
            raise where.error(
                f"{key}.channel",
                f'expected a channel id like "C0123ABCD" or a name like "#reviews", '
                f"got {show(channel)}",
            )
    reviewers = read_reviewers(table, key, where)
    approvals = read_count(table.get("approvals_required", 1), f"{key}.approvals_required", where)
    gate_rules = _rules(table, key, "gates", where, _GATE_KEYS)
    task_rules = _rules(table, key, "tasks", where, _RULE_KEYS)
    gates = _quorums(gate_rules, f"{key}.gates", where)
    tasks = _quorums(task_rules, f"{key}.tasks", where)
    for task in task_rules:
        if not _TASK_NUMBER_RE.fullmatch(task):
            raise where.error(
                f"{key}.tasks.{task}",
                f"expected a task number from 1, as in [{key}.tasks.2], got {show(task)}",
            )
    stages = parse_stages(table, key, where)
    gate_stages = {t: parse_stages(r, f"{key}.gates.{t}", where) for t, r in gate_rules.items()}
    task_stages = {t: parse_stages(r, f"{key}.tasks.{t}", where) for t, r in task_rules.items()}
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
            f"{key}.forbid_self_approval", f"expected true or false, got {show(forbid)}"
        )
    progress = table.get("progress", True)
    if not isinstance(progress, bool):
        raise where.error(f"{key}.progress", f"expected true or false, got {show(progress)}")
    decision_rules = _decision_rules(table, key, gate_rules, where)
    return CrewSpec(
        name=name,
        kind=kind,
        factory=factory,
        description=read_string(table.get("description", ""), f"{key}.description", where),
        channel=channel,
        reviewers=reviewers,
        remind_after=crew_deadlines.remind_after,
        escalate_after=crew_deadlines.escalate_after,
        expire_after=crew_deadlines.expire_after,
        on_expire=crew_deadlines.on_expire or OnExpire.REJECT,
        remind_by=crew_deadlines.remind_by or "thread",
        escalate_to=read_strings(
            table, key, "escalate_to", USER_ID_RE, 'a Slack user id ("U…", "W…")', where
        ),
        approval_tools=read_strings(table, key, "approval_tools", None, "a tool name", where),
        required_inputs=read_strings(
            table, key, "inputs", _INPUT_NAME_RE, 'an input name like "topic"', where
        ),
        optional_inputs=read_strings(
            table, key, "optional_inputs", _INPUT_NAME_RE, 'an input name like "tone"', where
        ),
        approvals_required=approvals,
        forbid_self_approval=forbid,
        progress=progress,
        reviewers_from_input=_reviewer_input(table, key, reviewers, where),
        gates=MappingProxyType(gates),
        tasks=MappingProxyType({int(task): needed for task, needed in tasks.items()}),
        gate_deadlines=MappingProxyType(gate_deadlines),
        task_deadlines=MappingProxyType(task_deadlines),
        standing=MappingProxyType(
            _standing(gate_rules, gates, approvals, bool(stages), f"{key}.gates", where)
        ),
        stages=stages,
        gate_stages=MappingProxyType({t: c for t, c in gate_stages.items() if c}),
        task_stages=MappingProxyType({int(t): c for t, c in task_stages.items() if c}),
        retention=_retention(table, key, where),
        webhooks=parse_webhooks(table.get("webhooks", []), f"{key}.webhooks", where.error),
        rules=decision_rules,
    )


def _decision_rules(
    table: dict[str, Any], key: str, gate_rules: dict[str, dict[str, Any]], where: Where
) -> RuleSet:
    """The crew's rules (``crew_runtime.rules``): each gate's ``rules`` first, then the
    crew's, each list in its order, checked together."""
    lists: list[tuple[str, Any, str | None]] = [
        (f"{key}.gates.{tool}.rules", r.get("rules"), tool) for tool, r in gate_rules.items()
    ]
    lists.append((f"{key}.rules", table.get("rules"), None))
    found: list[Rule] = []
    for list_key, listed, tool in lists:
        if listed is None:
            continue
        if not isinstance(listed, list):
            raise where.error(
                list_key, f"expected a list of rules [{{ name = ... }}], got {show(listed)}"
            )
        found.extend(
            parse_rule(
                rule,
                f"{list_key}[{n}]",
                tool,
                where.error,
                parse_duration,
                lambda value, at: read_count(value, at, where),
                lambda rule, at, approvals: _rule_people(rule, at, approvals, where),
            )
            for n, rule in enumerate(listed)
        )
    check_reachable(found, where.error)
    return rule_set(found, tuple(dict.fromkeys(r.tool for r in found if r.tool)))


def _rule_people(
    table: dict[str, Any], key: str, approvals: int | None, where: Where
) -> tuple[tuple[str, ...], Chain]:
    """A rule's ``reviewers`` and ``stages``, checked as a crew's reviewers and a gate's
    stages are (the same messages), its ``approvals`` reachable by its reviewers."""
    reviewers = read_reviewers(table, key, where)
    if "reviewers" in table and not reviewers:
        raise where.error(f"{key}.reviewers", "empty; name who reviews the calls it applies to")
    if approvals is not None:
        _reachable(reviewers, key, "approvals", approvals, where)
    return reviewers, parse_stages(table, key, where)


def _reviewer_input(
    table: dict[str, Any], key: str, reviewers: tuple[str, ...], where: Where
) -> str | None:
    """``reviewers_from_input``: a required input's name, with no ``reviewers`` list beside
    it and no quorum above the one person it names."""
    if "reviewers_from_input" not in table:
        return None
    name_key = f"{key}.reviewers_from_input"
    name = read_string(table["reviewers_from_input"], name_key, where)
    required = table.get("inputs", [])
    if not isinstance(required, list) or name not in required:
        raise where.error(name_key, f"{show(name)} must be one of the crew's inputs = [...]")
    if reviewers:
        raise where.error(name_key, "cannot be combined with reviewers: each run names its own")
    quorums = [table.get("approvals_required", 1)] + [
        rule.get("approvals_required", 1)
        for section in ("gates", "tasks")
        for rule in table.get(section, {}).values()
    ]
    if any(needed != 1 for needed in quorums):
        raise where.error(name_key, "names one reviewer, so every approvals_required must be 1")
    rules = [table] + [
        rule for section in ("gates", "tasks") for rule in table.get(section, {}).values()
    ]
    if any("stages" in rule for rule in rules):
        raise where.error(
            name_key,
            "names one reviewer, so it cannot be combined with stages (each stage "
            "names its own reviewers)",
        )
    return name


def _retention(table: dict[str, Any], key: str, where: Where) -> Retention:
    return Retention(**{name: _duration(table, key, name, where) for name in RETENTION_KEYS})


def _rules(
    table: dict[str, Any], key: str, name: str, where: Where, known: tuple[str, ...]
) -> dict[str, dict[str, Any]]:
    """``[KEY.NAME.WHICH]`` tables (a gated tool's, a task's), each setting ``known`` keys."""
    rules = table.get(name, {})
    if not isinstance(rules, dict):
        raise where.error(
            f"{key}.{name}", f"expected tables like [{key}.{name}.NAME], got {show(rules)}"
        )
    found: dict[str, dict[str, Any]] = {}
    for which, rule in rules.items():
        rule_key = f"{key}.{name}.{which}"
        if not isinstance(rule, dict):
            raise where.error(rule_key, f"expected a table [{rule_key}], got {show(rule)}")
        check_keys(rule, known, rule_key, where.error)
        if not rule:
            raise where.error(rule_key, f"empty; set one of {', '.join(known)}")
        found[which] = rule
    return found


def _quorums(rules: dict[str, dict[str, Any]], key: str, where: Where) -> dict[str, int]:
    """The approvals_required of the ``rules`` that set one."""
    return {
        which: read_count(rule["approvals_required"], f"{key}.{which}.approvals_required", where)
        for which, rule in rules.items()
        if "approvals_required" in rule
    }


def _standing(
    rules: dict[str, dict[str, Any]],
    quorums: dict[str, int],
    crew_quorum: int,
    crew_staged: bool,
    key: str,
    where: Where,
) -> dict[str, tuple[str, ...]]:
    """The gates that allow standing approvals (``allow_standing = true``), each with its
    ``standing_match``; only where one reviewer's approval settles a call of the tool (not
    where an approval chain does: the gate's ``stages``, or the crew's)."""
    found: dict[str, tuple[str, ...]] = {}
    for tool, rule in rules.items():
        allow = rule.get("allow_standing", False)
        if not isinstance(allow, bool):
            raise where.error(
                f"{key}.{tool}.allow_standing", f"expected true or false, got {show(allow)}"
            )
        if not allow:
            if "standing_match" in rule:
                raise where.error(
                    f"{key}.{tool}.standing_match", "needs allow_standing = true beside it"
                )
            continue
        if "stages" in rule or (crew_staged and tool not in quorums):
            raise where.error(
                f"{key}.{tool}.allow_standing",
                f"a call of {tool} goes through an approval chain (stages), so one reviewer "
                "cannot approve its later calls: allow_standing needs approvals_required = 1",
            )
        needed = quorums.get(tool, crew_quorum)
        if needed != 1:
            raise where.error(
                f"{key}.{tool}.allow_standing",
                f"a call of {tool} needs {needed} approvals, so one reviewer cannot approve "
                "its later calls: allow_standing needs approvals_required = 1",
            )
        found[tool] = read_strings(
            rule,
            f"{key}.{tool}",
            "standing_match",
            _ARGUMENT_RE,
            'an argument name of the tool, like "to"',
            where,
        )
    return found


def _deadlines(
    table: dict[str, Any], key: str, where: Where, crew: Deadlines | None = None
) -> Deadlines:
    """The deadline keys ``table`` sets; with ``crew`` (a gate's or a task's table), checked
    as they combine with the crew's."""
    on_expire = table.get("on_expire")
    if on_expire is not None and on_expire not in tuple(OnExpire):
        raise where.error(
            f"{key}.on_expire",
            f'expected "reject", "approve" or "keep_waiting", got {show(on_expire)}',
        )
    remind_by = table.get("remind_by")
    if remind_by is not None and remind_by not in _REMIND_BY:
        raise where.error(f"{key}.remind_by", f'expected "thread" or "dm", got {show(remind_by)}')
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


def _reachable(reviewers: tuple[str, ...], key: str, name: str, needed: int, where: Where) -> None:
    """A quorum the listed reviewers cannot reach (only users listed, fewer than it needs)."""
    if reviewers and all(USER_ID_RE.fullmatch(r) for r in reviewers) and needed > len(reviewers):
        raise where.error(
            f"{key}.{name}",
            f"{needed} approvals can never be given: reviewers lists {len(reviewers)} people",
        )


def _duration(table: dict[str, Any], key: str, name: str, where: Where) -> timedelta | None:
    if name not in table:
        return None
    value = table[name]
    parsed = parse_duration(value)
    seconds = duration_seconds(value)
    if parsed is None and seconds is not None and seconds > MOST_DURATION.total_seconds():
        raise where.error(
            f"{key}.{name}",
            f"{show(value)} is longer than the longest duration accepted, {MOST_DURATION_WORDS}",
        )
    if parsed is None:
        raise where.error(
            f"{key}.{name}",
            f'expected a duration like "30m", got {show(value)} (units s, m, h, d, y as in '
            '"90s", "1h30m" or "1y", or a positive whole number of seconds)',
        )
    return parsed


def describe_toml_error(message: str) -> str:
    """Put tomllib's "(at line L, column C)" first, where editors and people look for it."""
    match = re.search(r"\s*\(at line (\d+), column (\d+)\)$", message)
    if match is None:
        return f"invalid TOML: {message}"
    return f"line {match[1]}, column {match[2]}: invalid TOML: {message[: match.start()]}"


def parse_config(file: Path, data: dict[str, Any]) -> Config:
    """The configuration ``file`` holds, its TOML already read into ``data``, validated.

    Raises:
        ConfigError: A key is unknown or a value wrong; the message names the key.
    """
    where = Where(file)
    retention = data.pop("retention", {})
    if not isinstance(retention, dict):
        raise where.error("retention", f"expected a table [retention], got {show(retention)}")
    check_keys(retention, RETENTION_KEYS, "retention", where.error)
    return Config(
        path=file,
        crews=MappingProxyType(_parse(data, where)),
        retention=_retention(retention, "retention", where),
    )
