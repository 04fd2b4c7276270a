"""Tool calls through the journal, with execution-scoped CrewAI hooks.

The before-hook gives the call its place ``(stream, seq)``; a call found in the
journal is blocked, and the after-hook (which CrewAI runs for blocked calls too,
utilities/tool_utils.py:290) hands back the recorded result, so a recorded side
effect never runs again. Live results are appended. Before and after hooks of
one call run on the same thread, so the slot travels in a thread-local.
"""

from __future__ import annotations

import json
from typing import Any

from crewai.hooks.dispatch import InterceptionPoint, register_scoped
from crewai.tools.tool_failure import ToolFailure

from crew_runtime.context import RunContext, ToolSlot

AWAITING_HUMAN = "AWAITING_HUMAN"


def register_tool_journal(ctx: RunContext) -> None:
    """Install the hooks in the current ``scoped_hooks()`` scope."""

    def before(hook: Any) -> bool | None:
        stream = ctx.stream_for(hook.task, hook.agent)
        seq = ctx.next_seq(stream, "tool")
        entry = ctx.recorded(stream, "tool", seq)
        recorded = None if entry is None else str(entry.payload["result"])
        ctx.set_tool_slot(ToolSlot(ctx.key(stream, seq), recorded))
        if recorded is not None:
            ctx.stats["tool_replayed"] += 1
            return False
        ctx.check_alive()
        return None

    def after(hook: Any) -> str | None:
        slot = ctx.tool_slot()
        ctx.set_tool_slot(None)
        if slot is None:
            return None
        if slot.recorded is not None:
            return slot.recorded
        raw = hook.raw_tool_result
        if isinstance(raw, ToolFailure) and raw.code == AWAITING_HUMAN:
            return None  # not an answer: the run pauses and the call runs again on resume
        ctx.stats["tool_live"] += 1
        args = json.loads(json.dumps(hook.tool_input, default=str))
        payload = {"tool": hook.tool_name, "args": args, "result": hook.tool_result}
        ctx.record(slot.key.stream, "tool", slot.key.seq, payload)
        return None

    register_scoped(InterceptionPoint.PRE_TOOL_CALL, before)
    register_scoped(InterceptionPoint.POST_TOOL_CALL, after)
