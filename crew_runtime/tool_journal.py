"""Tool calls through the journal, with execution-scoped CrewAI hooks.

The before-hook gives the call its place ``(stream, seq)``; a call found in the
journal is blocked, and the after-hook (which CrewAI runs for blocked calls too,
utilities/tool_utils.py:290) hands back the recorded result, so a recorded side
effect never runs again. A call that will run (approved gated calls and ``ask_human``
included) first renews the execution's lease, and stops the run if another execution
claimed it meanwhile. Live results are appended. Before and after hooks of one call
run in the same context, so the slot travels in a ContextVar (see ``RunContext``).

A pause must reach the runtime whatever tool it is raised under. CrewAI's delegation
tools run a coworker's agent loop inside the call and turn any exception of it into
their result text; a pause raised in that loop marks every call around it
(:meth:`RunContext.interrupt`), and the after-hook of a marked call journals nothing
and raises the pause again, up to ``kickoff()``. On resume the delegation runs again:
its coworker replays its recorded turns and meets the decision in the nested call.

Native function calling can put several calls in one model turn, and CrewAI runs
them in parallel threads (or one by one when a tool of the turn has
``result_as_answer``/``max_usage_count``). Each call's seq is its place in the
turn (reserved by the LLM journal, :meth:`RunContext.note_llm_response`), not
the order threads happen to reach the hook, so a review and a recorded result
always belong to the same call. A held gated call does not pause the run by
itself: the pause is raised by the after-hook of the turn's last call, so every
gated call of the turn has opened its review first (several reviews, each
decided on its own). The calls held before it get a placeholder result that no
model sees.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from crewai.hooks.dispatch import InterceptionPoint, register_scoped
from crewai.tools.tool_failure import ToolFailure

from crew_runtime.calls import ToolSlot
from crew_runtime.context import RunContext
from crew_runtime.digests import call_digest
from crew_runtime.gates import Gate
from crew_runtime.people import reviewer
from crew_runtime.rules import Match
from crew_runtime.signals import PauseRun
from storage import (
    DecisionKind,
    NewReview,
    Raised,
    Review,
    ReviewKind,
    ReviewStatus,
    ToolApprovalDetails,
)
from storage.journal import RAISE_ENTRY, RULE_ENTRY, STANDING_ENTRY

AWAITING_HUMAN = "AWAITING_HUMAN"


def register_tool_journal(ctx: RunContext) -> None:
    """Install the hooks in the current ``scoped_hooks()`` scope."""

    def before(hook: Any) -> bool | None:
        stream = ctx.stream_for(hook.task, hook.agent)
        seq, batch = ctx.tool_seq(stream, hook.tool_name, dict(hook.tool_input))
        entry = ctx.recorded(stream, "tool", seq)
        recorded = None if entry is None else str(entry.payload["result"])
        role = str(getattr(hook.agent, "role", None) or "")
        slot = ToolSlot(ctx.key(stream, seq), recorded, batch=batch, agent=role)
        ctx.enter_tool_call(slot)
        if recorded is not None:
            ctx.stats["tool_replayed"] += 1
            return False
        ctx.check_alive()
        gate = ctx.gates.get(hook.tool_name)
        if gate is not None and gate.applies(dict(hook.tool_input)):
            blocked = check_gate(ctx, gate, hook, slot)
            if blocked is not None:
                return blocked
        slot.live = ctx.begin_live()
        if slot.live is None:  # the run is stopping: this call is made on resume
            slot.interrupted = True
            return False
        ctx.hold_lease()  # the call runs now: only under a lease still held
        if ctx.progress is not None:
            ctx.progress.tool(hook.tool_name, role)
        return None

    def after(hook: Any) -> str | None:
        slot = ctx.leave_tool_call()
        if slot is None:
            return None
        swallowed = slot.interrupted and slot.recorded is None
        try:
            result = None if swallowed else outcome(hook, slot)
        finally:
            ctx.end_live(slot.live)
        pause = ctx.finish_tool_call(slot)
        # Raised from an after-hook, HookAborted leaves kickoff() (tool_hooks.py:193).
        if swallowed:
            raise ctx.signal_again(f"{hook.tool_name} ({slot.key})")
        if pause:
            raise ctx.signal(PauseRun(f"waiting for approval of {hook.tool_name} ({slot.key})"))
        return result

    def outcome(hook: Any, slot: ToolSlot) -> str | None:
        """The result the model sees (None: CrewAI's own); live results are journaled."""
        if slot.recorded is not None:
            ctx.note_step(hook.agent, replayed=True)
            return slot.recorded
        if slot.awaiting_approval:
            return f"{hook.tool_name} is waiting for a reviewer's approval."  # never shown
        raw = hook.raw_tool_result
        if isinstance(raw, ToolFailure) and raw.code == AWAITING_HUMAN:
            ctx.interrupt()  # CrewAI raises it next; a delegation around would catch it
            return None  # not an answer: the run pauses and the call runs again on resume
        result = slot.override if slot.override is not None else hook.tool_result
        if slot.note:
            result = f"{result}\n\n{slot.note}"
        ctx.stats["tool_live"] += 1
        args = json.loads(json.dumps(hook.tool_input, default=str))
        payload = {"tool": hook.tool_name, "args": args, "result": result}
        ctx.record(slot.key.stream, "tool", slot.key.seq, payload)
        ctx.note_step(hook.agent, replayed=False)
        return str(result) if (slot.override is not None or slot.note) else None

    register_scoped(InterceptionPoint.PRE_TOOL_CALL, before)
    register_scoped(InterceptionPoint.POST_TOOL_CALL, after)


def check_gate(ctx: RunContext, gate: Gate, hook: Any, slot: ToolSlot) -> bool | None:
    """Hold, run, run with edited arguments, or deny a gated call, as its review says.

    Returns False to block the call (CrewAI then runs the after-hook, which pauses the
    run or hands the denial to the model), None to let it run.
    """
    key = slot.key
    proposed = json.loads(json.dumps(hook.tool_input, default=str))
    review = ctx.find_review(ReviewKind.TOOL_APPROVAL, key.stream, key.seq)
    digest = call_digest(ctx.run.id, key.stream, key.seq, hook.tool_name, proposed)
    raised: Raising | None = None
    if review is None:
        ruled = ctx.recorded(key.stream, RULE_ENTRY, key.seq)
        ruled = ruled or ctx.recorded(key.stream, RAISE_ENTRY, key.seq)
        payload = None if ruled is None else ruled.payload
        # The rules are evaluated once a call, by its first execution (a replay reads them).
        match = None if payload is not None else _match(ctx, hook.tool_name, proposed)
        # No standing approval, granted by others, covers a call whose rule names who
        # reviews it (its reviewers or stages).
        by_rule = None if match is None else match.rule.raised
        standing = ruled is None and not (by_rule is not None and by_rule.names_people)
        if standing and _standing(ctx, hook.tool_name, proposed, slot, digest):
            return None
        runs, raised = _ruling(ctx, hook.tool_name, proposed, slot, digest, payload, match)
        if runs is not None:
            return None if runs else False
    if review is None or review.status == ReviewStatus.PENDING:
        if review is None:
            _ask(ctx, gate, hook.tool_name, proposed, slot, raised)
        slot.awaiting_approval = True
        return False
    decision = review.decision
    if decision is None or decision.kind in (DecisionKind.REJECT, DecisionKind.EXPIRE):
        who = reviewer(decision) if decision else "nobody"
        reason = (decision.text if decision else None) or "no reason given"
        if decision is not None and decision.kind == DecisionKind.EXPIRE:
            reason = "nobody approved it in time"
        slot.override = f"{hook.tool_name} was denied by {who}: {reason}. It was not run."
        return False
    about_to_run = (
        json.loads(decision.text)
        if decision.kind == DecisionKind.EDIT and decision.text
        else proposed
    )
    running = call_digest(ctx.run.id, key.stream, key.seq, hook.tool_name, about_to_run)
    if decision.digest is not None and decision.digest != running:
        # Not what was approved (a changed replay, code changed since the pause): not run,
        # the refusal recorded, the call asked again.
        ctx.void(
            review,
            {
                "tool": hook.tool_name,
                "approved": decision.digest,
                "found": running,
                "args": about_to_run,
            },
        )
        _ask(ctx, gate, hook.tool_name, proposed, slot, _raised_again(ctx, slot, review))
        slot.awaiting_approval = True
        return False
    if decision.kind == DecisionKind.EDIT and decision.text:
        edited = json.loads(decision.text)
        hook.tool_input.clear()  # in place: CrewAI calls the tool with this very dict
        hook.tool_input.update(edited)
        changes = _changes(proposed, edited)
        if changes:  # an edit submitted unchanged is an approval: nothing to tell the model
            slot.note = (
                f"Note: {reviewer(decision)} changed the arguments of "
                f"{hook.tool_name}: {changes}; the call was made with the new values."
            )
    return None


@dataclass(frozen=True)
class Raising:
    """What a rule raised of a call's review: the rule, what the review keeps (who reviews
    it, how many), its deadline."""

    rule: str
    raised: Raised | None = None
    expire_after: timedelta | None = None

    def payload(self) -> dict[str, Any]:
        """What the journal keeps of it (:data:`RAISE_ENTRY`), JSON."""
        return {
            "rule": self.rule,
            "raised": None if self.raised is None else self.raised.to_json(),
            "expire_after": None
            if self.expire_after is None
            else int(self.expire_after.total_seconds()),
        }

    @classmethod
    def read(cls, payload: dict[str, Any]) -> Raising:
        """What :meth:`payload` journaled."""
        seconds = payload.get("expire_after")
        return cls(
            str(payload["rule"]),
            Raised.from_json(payload.get("raised")),
            None if not isinstance(seconds, int) else timedelta(seconds=seconds),
        )

    @classmethod
    def of(cls, review: Review) -> Raising | None:
        """What a rule raised of ``review``, as the review kept it (its deadline aside: the
        journal keeps that, :func:`_raised_again`)."""
        details = review.details
        rule = details.rule if isinstance(details, ToolApprovalDetails) else None
        return None if rule is None else cls(rule, review.raised)


def _raised_again(ctx: RunContext, slot: ToolSlot, review: Review) -> Raising | None:
    """What a rule raised of the call ``review`` asked, to ask it again as it was asked: as
    journaled (its people and its deadline), else as the review kept it (reviews of before
    the journal kept what a rule raised)."""
    entry = ctx.recorded(slot.key.stream, RAISE_ENTRY, slot.key.seq)
    if entry is not None and entry.payload:
        return Raising.read(entry.payload)
    return Raising.of(review)


def _ask(
    ctx: RunContext,
    gate: Gate,
    tool: str,
    proposed: dict[str, Any],
    slot: ToolSlot,
    raised: Raising | None,
) -> None:
    """Open the review of the call (``raised``: what the rule that applies raised of it)."""
    ctx.ask(
        NewReview(
            kind=ReviewKind.TOOL_APPROVAL,
            stream=slot.key.stream,
            seq=slot.key.seq,
            prompt=f"{tool}({json.dumps(proposed, ensure_ascii=False)})",
            details=ToolApprovalDetails(
                tool=tool,
                description=gate.description,
                args=proposed,
                schema=gate.schema,
                rule=None if raised is None else raised.rule,
            ),
            raised=None if raised is None else raised.raised,
        ),
        expire_after=None if raised is None else raised.expire_after,
    )


def _standing(
    ctx: RunContext, tool: str, args: dict[str, Any], slot: ToolSlot, digest: str
) -> bool:
    """Whether a standing approval approves this call. The first execution to meet the call
    asks the database and journals the answer (which standing approval, granted by whom, for
    which digest); a replay reads the journal, so it makes the same choice whatever was
    revoked since."""
    key = slot.key
    entry = ctx.recorded(key.stream, STANDING_ENTRY, key.seq)
    if entry is not None:
        return True
    found = ctx.standing_for(tool, args)
    if found is None:
        return False
    payload = {
        "tool": tool,
        "args": args,
        "standing": found.id,
        "granted_by": found.granted_by,
        "match": found.match,
        "digest": digest,
    }
    ctx.record_auto(key.stream, STANDING_ENTRY, key.seq, payload, by=found.granted_by)
    return True


def _match(ctx: RunContext, tool: str, args: dict[str, Any]) -> Match | None:
    """The crew's rule that applies to the call (``crew_runtime.rules``), or None."""
    return ctx.spec.rules.match(tool, args, inputs=ctx.run.inputs, run=_run_values(ctx))


def _run_values(ctx: RunContext) -> dict[str, str]:
    """What a rule's ``run`` is (``crew_runtime.rules``)."""
    return {"id": ctx.run.id, "crew": ctx.run.crew, "started_by": ctx.run.started_by or ""}


def _ruling(
    ctx: RunContext,
    tool: str,
    args: dict[str, Any],
    slot: ToolSlot,
    digest: str,
    payload: dict[str, Any] | None,
    match: Match | None,
) -> tuple[bool | None, Raising | None]:
    """What the crew's rules (``crew_runtime.rules``) say of the call: ``(True, None)`` run
    it (approved), ``(False, None)`` block it (rejected: the reason is the model's),
    ``(None, raising)`` a person reviews it, as ``raising`` (None: no rule applies) says.

    The first execution to meet the call evaluates the rules and journals a decision, or
    what a rule raised of the review, with its digest; a replay reads the journal and makes
    the same choice whatever the rules say now, for the same call (another digest: a person
    is asked, as the gate says where a rule decided, as the rule raised it where it
    raised)."""
    if payload is None:
        if match is None:
            return None, None
        if match.rule.decide is None:
            raising = Raising(match.rule.name, match.rule.raised, match.rule.expire_after)
            payload = {"tool": tool, "args": args, "why": match.why, "digest": digest}
            payload.update(raising.payload())
            ctx.record(slot.key.stream, RAISE_ENTRY, slot.key.seq, payload)
            return None, raising
        payload = {
            "rule": match.rule.name,
            "decide": match.rule.decide,
            "tool": tool,
            "args": args,
            "why": match.why,
            "digest": digest,
            "reason": match.rule.reason,
        }
        ctx.record_auto(
            slot.key.stream, RULE_ENTRY, slot.key.seq, payload, by=f"rule:{match.rule.name}"
        )
    elif "decide" not in payload:
        # A rule raised the review: asked of whom it named, even for a changed call here.
        return None, Raising.read(payload)
    elif payload.get("digest") != digest:
        return None, None  # a rule decided another call here: a person is asked
    if payload["decide"] == "approve":
        return True, None
    slot.override = (
        f"{tool} was rejected by rule {payload['rule']}: {payload['reason']}. It was not run."
    )
    return False, None


def _changes(proposed: dict[str, Any], edited: dict[str, Any]) -> str:
    """``amount from 1500 to 900; memo removed`` — only what the reviewer changed."""
    parts = []
    for name in [*proposed, *(k for k in edited if k not in proposed)]:
        before, after = proposed.get(name, _ABSENT), edited.get(name, _ABSENT)
        if before == after:
            continue
        if after is _ABSENT:
            parts.append(f"{name} removed (was {_shown(before)})")
        elif before is _ABSENT:
            parts.append(f"{name} added: {_shown(after)}")
        else:
            parts.append(f"{name} from {_shown(before)} to {_shown(after)}")
    return "; ".join(parts)


_ABSENT = object()


def _shown(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
