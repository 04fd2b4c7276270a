"""A crew's options as its author set them, kept deterministic under replay, or refused.

Nothing a crew's author switched on is switched off behind their back:

- ``planning=True``: CrewAI's planner asks its model for a plan before the first task and
  appends it to the tasks' descriptions. Its model is put behind the journal like any
  other (the planner's turns are the stream ``crew:Task Execution Planner``), so a resume
  replays the plan and the tasks' prompts match their recording. Without a
  ``planning_llm`` CrewAI plans with its default model on OpenAI; a worker without an
  OpenAI key refuses such a crew at once rather than fail inside the planner.
- ``inject_date=True``: CrewAI puts ``datetime.now()`` in each prompt of the agent
  (``utilities/prompts.py``). The date of a run is the instant its first prompt asked for
  it, journaled once; every prompt of the run, in any execution, shows that instant in
  the agent's ``date_format``.
- ``step_callback``, task ``callback`` and the crew's ``task_callback`` run once per step
  or task that really ran, not again for those a resume replays (:func:`once_callbacks`);
  so do listeners of CrewAI's event bus for the lifecycle of crews, tasks and agents
  (:func:`install_once_events`).
- ``memory`` and knowledge (``knowledge_sources``) run as CrewAI runs them, their
  embeddings, searches, recalls and saves journaled (``crew_runtime.recall``,
  ``crew_runtime.memories``); knowledge built with a storage of the author's, whose
  searches cannot be journaled, is refused (:func:`refusal` names it).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from datetime import datetime, tzinfo
from typing import Any

import crewai.utilities.prompts as crewai_prompts
from crewai import Agent, Crew
from crewai.events.event_bus import crewai_event_bus
from crewai.events.types.agent_events import (
    AgentExecutionCompletedEvent,
    AgentExecutionStartedEvent,
)
from crewai.events.types.crew_events import CrewKickoffCompletedEvent, CrewKickoffStartedEvent
from crewai.events.types.task_events import TaskCompletedEvent, TaskStartedEvent
from crewai.llms.base_llm import BaseLLM
from crewai.utilities.llm_utils import create_llm
from crewai.utilities.planning_handler import CrewPlanner

from crew_runtime import recall, streams
from crew_runtime.context import RunContext, current_run
from crew_runtime.progress import FINISHED, STARTED

# The journal entry holding the instant a run's agents see as "now".
CLOCK = ("crew", "clock", 0)

_clock_lock = threading.Lock()


def refusal(crew: Crew, name: str) -> str | None:
    """Why Countersign cannot run this crew as its author built it, or None."""
    knowledge = recall.refusal(crew, _agents(crew), name)
    if knowledge is not None:
        return knowledge
    if crew.planning and crew.planning_llm is None:
        default = CrewPlanner(tasks=[], planning_agent_llm=None).planning_agent_llm
        if isinstance(default, str) and not os.environ.get("OPENAI_API_KEY"):
            return (
                f"crew {name!r} uses planning=True without a planning_llm: CrewAI then "
                f"plans with {default} on OpenAI, and this worker has no OPENAI_API_KEY. "
                "Give the crew a planning_llm (its turns are journaled like any model's)."
            )
    return None


def _agents(crew: Crew) -> list[Any]:
    """The crew's agents, its tasks' and its manager, each once."""
    tasks = [t.agent for t in crew.tasks if t.agent is not None]
    manager = [crew.manager_agent] if crew.manager_agent is not None else []
    return list({id(a): a for a in [*crew.agents, *tasks, *manager]}.values())


def journal_planning(crew: Crew, wrap: Callable[[BaseLLM], BaseLLM]) -> None:
    """Put the planner's model behind the journal (CrewAI's default one if none is set)."""
    if not crew.planning:
        return
    llm = crew.planning_llm
    if llm is None:
        llm = CrewPlanner(tasks=[], planning_agent_llm=None).planning_agent_llm
    model = create_llm(llm)
    if model is not None:
        crew.planning_llm = wrap(model)


# -- the date a run's agents see


class _RunClock:
    """The ``datetime`` CrewAI's prompt builder calls ``now()`` on: the run's instant."""

    @staticmethod
    def now(tz: tzinfo | None = None) -> datetime:
        ctx = current_run()
        if ctx is None or tz is not None:
            return datetime.now(tz)
        return run_now(ctx)


def run_now(ctx: RunContext) -> datetime:
    """The run's "now": journaled the first time a prompt of the run asks for it."""
    with _clock_lock:
        entry = ctx.recorded(*CLOCK)
        if entry is not None:
            return datetime.fromisoformat(str(entry.payload["now"]))
        now = datetime.now()
        ctx.record(*CLOCK, {"now": now.isoformat()})
        return now


def install_run_clock() -> None:
    """Make CrewAI's ``inject_date`` read the run's instant (idempotent).

    ``Prompts._build_date_block`` is the one place CrewAI reads the clock for a prompt;
    outside a run (no current :class:`RunContext`) it reads the real clock, as before.
    """
    crewai_prompts.datetime = _RunClock  # type: ignore[attr-defined,assignment]


# -- callbacks once


def once_callbacks(crew: Crew, ctx: RunContext) -> None:
    """Make the crew's callbacks skip the steps and tasks a resume replays.

    A step callback runs after a model's final answer or a tool's result; the step was
    reported already when that answer or result came from the journal
    (:meth:`RunContext.step_replayed`). A task callback runs when a task completes,
    which a replay cannot tell from the journal alone (a reviewed task completes when a
    decision is met, in the execution after its last turn): each completion is journaled
    (kind ``callback``) once its callbacks have run, and a replay meeting it again skips
    them. A callback inside which the run paused (it kicked off an agent that asked a
    person) is not journaled: on resume it runs again and meets the decision.
    """
    manager = crew.manager_agent  # its own step callback only: CrewAI gives it no other
    for agent in _agents(crew):
        if not isinstance(agent, Agent):
            continue
        callback = agent.step_callback
        if agent is not manager:
            callback = callback or crew.step_callback  # as CrewAI's setup_agents does
        if callback is not None:
            agent.step_callback = _OncePerStep(callback, agent, ctx)
    tasks = list(crew.tasks)
    crew_callback = crew.task_callback
    wrapped = None if crew_callback is None else _OncePerTask(crew_callback, ctx, tasks, 1)
    for task in tasks:
        if task.callback is None or task.callback == crew_callback:
            # CrewAI skips the crew's callback when it is the task's own: kept the same.
            task.callback = wrapped
        else:
            task.callback = _OncePerTask(task.callback, ctx, [task], 0)
    crew.task_callback = wrapped


class _OncePerStep:
    """An agent's step callback, not run for steps whose end came from the journal."""

    def __init__(self, callback: Callable[..., Any], agent: Any, ctx: RunContext) -> None:
        self.callback = callback
        self.agent = agent
        self.ctx = ctx

    def __call__(self, step: Any) -> Any:
        if self.ctx.step_replayed(self.agent):
            return None
        return self.callback(step)


class _OncePerTask:
    """A task callback (``seq`` 0: the task's own, 1: the crew's), run once per completion."""

    def __init__(
        self, callback: Callable[..., Any], ctx: RunContext, tasks: list[Any], seq: int
    ) -> None:
        self.callback = callback
        self.ctx = ctx
        self.tasks = tasks
        self.seq = seq

    def __call__(self, output: Any) -> Any:
        ctx = self.ctx
        # CrewAI sets ``task.output`` just before it runs the callbacks.
        task = next((t for t in self.tasks if t.output is output), None)
        task = task or ctx.delegated_task(output)
        if task is None:  # not a task Countersign can place: CrewAI's behaviour
            return self.callback(output)
        stream = ctx.stream_for(task, task.agent)
        if ctx.recorded(stream, "callback", self.seq) is not None:
            return None
        signalled = ctx.signalled
        result = self.callback(output)
        if ctx.signalled == signalled:  # the run did not pause inside it
            ctx.record(stream, "callback", self.seq, {})
        return result


# -- listeners of CrewAI's event bus

# The lifecycle events a replay would emit again for work that was done before.
_ONCE_EVENTS: dict[type[Any], str] = {
    CrewKickoffStartedEvent: "crew_started",
    CrewKickoffCompletedEvent: "crew_completed",
    TaskStartedEvent: "task_started",
    TaskCompletedEvent: "task_completed",
    AgentExecutionStartedEvent: "agent_started",
    AgentExecutionCompletedEvent: "agent_completed",
}
# The lifecycle events a run's progress message shows (``crew_runtime.progress``).
_PROGRESS = {"task_started": STARTED, "task_completed": FINISHED}
_events_lock = threading.Lock()
_events_installed = False


def install_once_events() -> None:
    """Emit each lifecycle event of a run's crews once (idempotent, once per process).

    A resume replays the tasks done before the pause, and CrewAI emits their "started" and
    "completed" events again, so a listener that notifies someone would do it again. Inside
    a run, each such event is numbered where it happens (its task's stream, or the crew's
    place) and journaled (kind ``event``) once emitted; an event found in the journal is not
    emitted again, to any listener. Model-call and tool events need nothing: a replayed turn
    asks no model and runs no tool. A worker killed between an emit and its journal write
    emits it again on resume.
    """
    global _events_installed
    with _events_lock:
        if _events_installed:
            return
        emit = crewai_event_bus.emit

        def emit_once(source: Any, event: Any) -> Any:
            ctx = current_run()
            name = _ONCE_EVENTS.get(type(event))
            if ctx is None or name is None:
                return emit(source, event)
            place = _event_place(ctx, source, event)
            where = streams.event_stream(place, name)
            seq = ctx.next_seq(where, "event")
            if ctx.recorded(where, "event", seq) is not None:
                return None
            emitted = emit(source, event)
            ctx.record(where, "event", seq, {})
            if ctx.progress is not None and name in _PROGRESS:
                task = getattr(event, "task", None)
                agent = getattr(event, "agent", None) or getattr(task, "agent", None)
                ctx.progress.task(place, _PROGRESS[name], task, agent)
            return emitted

        crewai_event_bus.emit = emit_once  # type: ignore[method-assign]
        _events_installed = True


def _event_place(ctx: RunContext, source: Any, event: Any) -> str:
    """The stream an event belongs to: its task's (and agent's), or its crew's."""
    task = getattr(event, "task", None)
    if task is not None:
        agent = getattr(event, "agent", None) or getattr(task, "agent", None)
        return ctx.stream_for(task, agent)
    tasks = list(getattr(source, "tasks", None) or [])
    # A crew sits where its first task does (a flow step's crews each under their prefix).
    return ctx.stream_for(tasks[0], None) if tasks else "crew"
