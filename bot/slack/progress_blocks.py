"""The run's progress message: one per run, in its thread, edited as the crew moves (the
dispatcher posts it once and edits it; ``storage.progress`` says when). Sections and a context,
as any client shows them: the run's status, each task started or finished, the last tool
called and how many were, and whom a waiting run waits for."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from bot.slack import thread_text as t
from bot.slack.elements import Block, context, section
from bot.slack.message import Message, listing
from storage.status import ReviewKind, RunStatus

TASKS_BUDGET = 6000  # chars of task lines; a crew with more says how many are not shown


def progress_message(
    state: dict[str, Any],
    status: RunStatus,
    waiting_on: Collection[ReviewKind] = (),
    waiting_for: Collection[str] = (),
) -> Message:
    """The message for ``state`` (``crew_runtime.progress``'s) with the run at ``status``;
    a waiting run's pending review kinds (``waiting_on``) and who may decide them."""
    blocks: list[Block] = [section(t.progress_title(status, waiting_on))]
    tasks = [
        t.progress_task(
            str(task.get("state")), str(task.get("name", "")), str(task.get("agent", ""))
        )
        for task in state.get("tasks") or []
        if isinstance(task, dict)
    ]
    blocks += listing(tasks, budget=TASKS_BUDGET)
    facts = []
    tool = state.get("tool")
    if isinstance(tool, dict):
        facts.append(
            t.progress_tool(str(tool.get("name", "")), str(tool.get("agent", "")), _count(state))
        )
    if status is RunStatus.WAITING:
        facts.append(t.progress_waiting(waiting_for))
    if facts:
        blocks.append(context("\n".join(facts)))
    return Message(t.progress_fallback(status), blocks)


def _count(state: dict[str, Any]) -> int:
    count = state.get("tools")
    return count if isinstance(count, int) else 0
