"""Rules that decide the easy reviews of gated tool calls, in CEL (the Common Expression
Language, through ``common-expression-language``, bindings of the Rust ``cel`` crate: a
sandboxed language with no access to Python; nothing is ``eval``'d).

A crew's ``rules = [...]`` and a gate's (``[crews.NAME.gates.TOOL] rules = [...]``) are
tables::

    { name = "small-payments", tool = "pay", when = "args.amount < 100", decide = "approve" }
    { name = "external-mail", tool = "send_email", when = "!args.to.endsWith('@ourco.com')",
      decide = "reject", reason = "external recipients need the outreach crew" }
    { name = "big-payments", tool = "pay", when = "args.amount >= 10000", approvals = 2,
      expire_after = "4h" }
    { name = "huge-payments", tool = "pay", when = "args.amount >= 100000", stages = [
        { name = "finance", reviewers = ["U0FIN1", "U0FIN2"] },
        { name = "cfo", reviewers = ["U0CFO"] } ] }

``name`` (required, unique in the crew) is what the thread, the audit and the metrics say;
``tool`` the gated tool it applies to (implied in a gate's table; left out of a crew's, every
gated tool); ``when`` a CEL expression, true where the rule applies (left out: always).
A rule does one of: ``decide = "approve"`` (the call runs, nobody is asked),
``decide = "reject"`` with a ``reason`` (the call does not run; the model reads the reason),
or raises what the review needs: ``approvals`` (distinct reviewers' approvals),
``expire_after`` (its deadline), and who reviews it: ``reviewers`` (users and user groups,
as a crew's) or an approval chain ``stages`` (as a gate's; each stage its own
``approvals_required``, so not with ``approvals``). A rule's reviewers or stages *replace*
the gate's and the crew's for that review (its quorum is then the rule's ``approvals``, 1
where left out), and are kept with the review (``storage.records.Raised``), so the review
policy answers from the review whatever the file says since. A gate's rules are tried
before the crew's, each list in its order; the first that applies wins; none: the call is
reviewed as the gate says.

The names an expression may use (anything else is an error when the file loads):

===========  ============================================================
``args``     the call's arguments as the tool would be called (a map)
``inputs``   the run's inputs (a map of strings)
``tool``     the gated tool's name (a string)
``run``      ``{"id", "crew", "started_by"}`` (strings; ``started_by`` may be "")
===========  ============================================================

A field the call does not have (``args.amount`` of a call without one), or an expression
that fails on the values (a string compared with a number), makes the rule not apply: the
call goes on to the next rule, and at worst to a person. Rules are checked when the file
loads: an expression that does not compile, a name not above, a rule after one that applies
to every call of its tool (it can never be reached), or a key it does not take is an
``error:`` line naming the rule.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

import cel

from storage import Raised, StageSpec

Decide = Literal["approve", "reject"]
NAMES = ("args", "inputs", "tool", "run")
"""The names an expression may use (see the module's docstring)."""
RAISES = ("approvals", "expire_after", "reviewers", "stages")
"""What a rule that does not decide may raise of the review."""
KEYS = ("name", "tool", "when", "decide", "reason", *RAISES)
"""The keys a rule's table takes."""
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
_FIELD_RE = re.compile(r"\b(args|inputs)\.([A-Za-z_][A-Za-z0-9_]*)")
# The variables a comprehension binds (``args.items.all(i, i > 0)``): not names of the call.
_BOUND_RE = re.compile(r"\.\s*(?:all|exists|exists_one|map|filter)\s*\(\s*([A-Za-z_]\w*)\s*,")


@dataclass(frozen=True)
class Rule:
    """One rule, compiled."""

    name: str
    key: str  # where the file sets it: ``crews.pay.rules[0]``
    tool: str | None = None  # None: every gated tool of the crew
    when: str | None = None  # None: always
    decide: Decide | None = None  # None: a person reviews, as the rule raises it
    reason: str | None = None
    approvals: int | None = None
    expire_after: timedelta | None = None
    reviewers: tuple[str, ...] = ()  # who reviews in the gate's reviewers' place
    stages: tuple[StageSpec, ...] = ()  # the approval chain in the gate's chain's place
    program: Any = field(default=None, compare=False, repr=False)

    @property
    def raised(self) -> Raised | None:
        """What the review of a call it applies to keeps (None: nothing but its deadline, or
        a rule that decides)."""
        if self.approvals is None and not self.reviewers and not self.stages:
            return None
        return Raised(self.reviewers, self.stages, self.approvals)

    @property
    def label(self) -> str:
        """How an error line names it: ``crews.pay.rules[1] (rule 'big')``."""
        return f"{self.key} (rule {self.name!r})"

    def applies(self, context: cel.Context) -> bool:
        """Whether the rule applies to the call ``context`` describes."""
        if self.program is None:
            return True
        try:
            return self.program.execute(context) is True
        except Exception:  # a field the call lacks, a type the expression cannot take: not met
            return False

    def said(self, args: Mapping[str, Any], inputs: Mapping[str, str]) -> str:
        """What matched, in the expression's own words with the values put in:
        ``amount 42 < 100`` (``args.amount < 100``); the rule's name where it has no
        ``when``."""
        if self.when is None:
            return "every call"
        values = {"args": args, "inputs": inputs}

        def shown(found: re.Match[str]) -> str:
            value = values[found.group(1)].get(found.group(2), "(none)")
            return f"{found.group(2)} {json.dumps(value, ensure_ascii=False, default=str)}"

        return _FIELD_RE.sub(shown, self.when)


@dataclass(frozen=True)
class Match:
    """The rule that applies to a call, and what matched."""

    rule: Rule
    why: str


@dataclass(frozen=True)
class RuleSet:
    """A crew's rules by tool, gate rules first, in the order the file gives them."""

    rules: tuple[Rule, ...] = ()
    by_tool: Mapping[str, tuple[Rule, ...]] = field(default_factory=dict, compare=False)

    def __bool__(self) -> bool:
        return bool(self.rules)

    def named(self, name: str | None) -> Rule | None:
        """The rule called ``name`` (None: no such rule, or no name)."""
        return next((r for r in self.rules if r.name == name), None)

    def candidates(self, tool: str) -> tuple[Rule, ...]:
        found = self.by_tool.get(tool)
        if found is None:
            found = tuple(r for r in self.rules if r.tool in (None, tool))
        return found

    def match(
        self,
        tool: str,
        args: Mapping[str, Any],
        *,
        inputs: Mapping[str, str],
        run: Mapping[str, str],
    ) -> Match | None:
        """The first rule that applies to a call of ``tool`` with ``args``, or None."""
        candidates = self.candidates(tool)
        if not candidates:
            return None
        context = cel.Context(
            variables={"args": dict(args), "inputs": dict(inputs), "tool": tool, "run": dict(run)}
        )
        for rule in candidates:
            if rule.applies(context):
                return Match(rule, rule.said(args, inputs))
        return None


def rule_set(rules: list[Rule], tools: tuple[str, ...]) -> RuleSet:
    """The rules, with each of ``tools``' candidates worked out once."""
    ordered = tuple(rules)
    by_tool = {t: tuple(r for r in ordered if r.tool in (None, t)) for t in tools}
    return RuleSet(ordered, by_tool)


Fail = Callable[[str, str], Exception]
"""Makes the error for a key and what is wrong with it (``Where.error``)."""
People = Callable[
    [dict[str, Any], str, "int | None"], tuple[tuple[str, ...], tuple[StageSpec, ...]]
]
"""Reads a rule's ``reviewers`` and ``stages`` (the table, its key, its ``approvals``) with
the checks the file's other reviewers and stages get (``crew_runtime.config_checks``)."""


def parse_rule(
    table: object,
    key: str,
    tool: str | None,
    fail: Fail,
    duration: Callable[[object], timedelta | None],
    count: Callable[[object, str], int],
    people: People,
) -> Rule:
    """One rule's table, checked: its keys, its name, its expression (compiled, with only
    :data:`NAMES`), what it does. ``tool`` is the gate's (a gate's own rules), else None."""
    if not isinstance(table, dict):
        raise fail(
            key, f"expected a table like {{ name = ..., when = ..., decide = ... }}, got {table!r}"
        )
    unknown = [k for k in table if k not in KEYS]
    if unknown:
        raise fail(f"{key}.{unknown[0]}", f"unknown key; a rule takes {', '.join(KEYS)}")
    name = table.get("name")
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise fail(f"{key}.name", 'a rule needs a name like "small-payments"')
    where = f"{key} (rule {name!r})"
    if "tool" in table:
        if tool is not None:
            raise fail(f"{where}.tool", "a gate's rule is for the gate's tool: leave tool out")
        if not isinstance(table["tool"], str) or not table["tool"]:
            raise fail(f"{where}.tool", "expected a tool's name")
        tool = table["tool"]
    when = table.get("when")
    program = None
    if when is not None:
        if not isinstance(when, str) or not when.strip():
            raise fail(f"{where}.when", 'expected a CEL expression, like "args.amount < 100"')
        program = compile_when(when, f"{where}.when", fail)
    decide = table.get("decide")
    if decide not in (None, "approve", "reject"):
        raise fail(f"{where}.decide", f'expected "approve" or "reject", got {decide!r}')
    reason = table.get("reason")
    if reason is not None and (not isinstance(reason, str) or not reason.strip()):
        raise fail(f"{where}.reason", "expected the words the model is told")
    if decide == "reject" and reason is None:
        raise fail(f"{where}.reason", "a rule that rejects needs a reason the model reads")
    if decide != "reject" and reason is not None:
        raise fail(f"{where}.reason", 'only a rule with decide = "reject" gives a reason')
    raises = [k for k in RAISES if k in table]
    if decide is not None and raises:
        raise fail(f"{where}.{raises[0]}", f"a rule that decides ({decide}) raises no review")
    if decide is None and not raises:
        raise fail(
            where,
            f'set decide = "approve" or "reject", or what the review needs ({", ".join(RAISES)})',
        )
    approvals = (
        None if "approvals" not in table else count(table["approvals"], f"{where}.approvals")
    )
    if "stages" in table and "approvals" in table:
        raise fail(
            f"{where}.stages",
            "cannot be combined with approvals in the same rule: "
            "each stage sets its own approvals_required",
        )
    if "stages" in table and "reviewers" in table:
        raise fail(
            f"{where}.reviewers",
            "cannot be combined with stages in the same rule: each stage names its reviewers",
        )
    reviewers, stages = people(table, where, approvals)
    expire_after = None
    if "expire_after" in table:
        expire_after = duration(table["expire_after"])
        if expire_after is None:
            raise fail(f"{where}.expire_after", 'expected a duration like "4h"')
    return Rule(
        name=name,
        key=key,
        tool=tool,
        when=when,
        decide=decide,
        reason=reason,
        approvals=approvals,
        expire_after=expire_after,
        reviewers=reviewers,
        stages=stages,
        program=program,
    )


def compile_when(when: str, key: str, fail: Fail) -> cel.Program:
    """The CEL program of ``when``.

    Raises:
        the error ``fail`` makes: it does not compile, or names something but
        :data:`NAMES`.
    """
    try:
        program = cel.compile(when)
    except ValueError as exc:
        found = _SYNTAX_AT.search(str(exc))
        where = f"at column {int(found.group(1)) + 1}" if found else "somewhere"
        raise fail(
            key, f"{when!r} does not compile as CEL: it stops making sense {where}"
        ) from None
    bound = set(_BOUND_RE.findall(when))
    unknown = sorted(set(program.variables()) - set(NAMES) - bound)
    if unknown:
        raise fail(key, f"names {unknown[0]!r}: an expression may use only {', '.join(NAMES)}")
    return program


# Where the parser's complaint says it stopped: ``<input>:1:14: Syntax error``.
_SYNTAX_AT = re.compile(r"<input>:\d+:(\d+):")


def check_reachable(rules: list[Rule], fail: Fail) -> None:
    """Refuse a rule no call can reach: after one without ``when`` for the same tool (or for
    every tool), or with the name of an earlier one."""
    seen: set[str] = set()
    catch_all: dict[str | None, Rule] = {}
    for rule in rules:
        if rule.name in seen:
            raise fail(rule.label, "another rule of the crew has this name")
        seen.add(rule.name)
        earlier = catch_all.get(None) or catch_all.get(rule.tool)
        if earlier is not None:
            raise fail(
                rule.label,
                f"can never apply: rule {earlier.name!r} before it applies to every call"
                + (f" of {earlier.tool}" if earlier.tool else ""),
            )
        if rule.when is None or rule.when.strip() == "true":
            catch_all[rule.tool] = rule
