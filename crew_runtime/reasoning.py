"""An agent that reasons before it works is journaled like any other model call.

``Agent(reasoning=True)`` (or ``planning_config=PlanningConfig(...)``) makes CrewAI's agent
executor plan first: ``AgentReasoning`` asks a model for a plan, and again until the plan says
it is ready (crewai/utilities/reasoning_handler.py), and on plans with steps a
``PlannerObserver`` asks one after each step (crewai/agents/planner_observer.py). Each asks the
model it resolves itself (``_resolve_llm``): the agent's, which the journal wraps for the
task's stream, or the ``planning_config``'s own, which the journal never saw.

Both resolvers are wrapped here (once per process; CrewAI's own outside a run): inside a run
the model they resolve is put behind the journal in a stream of its own,
``{stream}~reasoning`` or ``{stream}~observer`` (``crew_runtime.streams``), with the journal
kind ``reasoning``. A stream of its own keeps the task's turns numbered as without reasoning,
and the kind keeps the plan in what a resume from a snapshot reads, so every resume replays
the plan instead of asking for it again.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from crewai.agents import planner_observer
from crewai.llms.base_llm import BaseLLM
from crewai.utilities import reasoning_handler

from crew_runtime import streams
from crew_runtime.context import current_run
from crew_runtime.journal_llm import JournalLLM

KIND = "reasoning"

_lock = threading.Lock()
_installed = False


def install() -> None:
    """Journal the models of CrewAI's reasoning and plan observer (idempotent)."""
    global _installed
    with _lock:
        if _installed:
            return
        for cls, step in (
            (reasoning_handler.AgentReasoning, "reasoning"),
            (planner_observer.PlannerObserver, "observer"),
        ):
            setattr(cls, "_resolve_llm", _journaled(cls._resolve_llm, step))  # noqa: B010
        _installed = True


def _journaled(resolve: Callable[[Any], Any], step: str) -> Callable[[Any], Any]:
    @functools.wraps(resolve)
    def resolved(self: Any) -> Any:
        llm = resolve(self)
        ctx = current_run()
        if ctx is None or not isinstance(llm, BaseLLM):
            return llm
        inner = llm.inner if isinstance(llm, JournalLLM) else llm
        of = ctx.stream_for(getattr(self, "task", None), getattr(self, "agent", None))
        return JournalLLM.wrap(inner, ctx, stream=streams.reasoning_stream(of, step), kind=KIND)

    return resolved
