"""Execute one run once: build the crew, replay its journal, go on live, settle the outcome.

The outcome is written with a compare-and-set fenced by the claim's lease token:
succeeded, rejected or failed; or waiting, with the reviews that were asked for.
A crew whose agents run on the offline scripted model says so once in its thread
(``RunNote.OFFLINE_MODEL``), before its first review, so nobody mistakes canned drafts
for a real model's.
"""

from __future__ import annotations

import logging
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from crewai import Agent, Crew, CrewOutput
from crewai.core.providers.human_input import reset_provider, set_provider
from crewai.crews.utils import enable_agent_streaming
from crewai.events.event_context import (
    EventContextConfig,
    MismatchBehavior,
    _event_context_config,
)
from crewai.flow import Flow
from crewai.flow.async_feedback import HumanFeedbackPending
from crewai.flow.flow_config import flow_config
from crewai.hooks.dispatch import scoped_hooks
from crewai.llms.base_llm import BaseLLM

from crew_runtime import console, quiet, reasoning, recall, streams
from crew_runtime.config import Config, load_factory
from crew_runtime.context import RunContext
from crew_runtime.errors import CrewBuildError
from crew_runtime.flows import (
    InnerCrews,
    ReviewFeedbackProvider,
    StoredFlowPersistence,
    feedback_text,
    resume_point,
    route_by_decision,
)
from crew_runtime.gates import gates_of
from crew_runtime.guardrails import journal_guardrails
from crew_runtime.journal_llm import JournalLLM
from crew_runtime.lease import unstorable_reason
from crew_runtime.options import (
    install_once_events,
    install_run_clock,
    journal_planning,
    once_callbacks,
    refusal,
)
from crew_runtime.review import ReviewProvider
from crew_runtime.signals import PauseRun
from crew_runtime.snapshot import fingerprint, install_repeat_count, restore, take
from crew_runtime.tool_journal import register_tool_journal
from storage import (
    FlowPause,
    FlowStore,
    LeaseLost,
    NewEntry,
    Review,
    Run,
    RunStatus,
    Snapshot,
    Store,
    UnstorableValue,
)
from storage.status import RunNote

log = logging.getLogger(__name__)

T = TypeVar("T")

_QUIET_EVENTS = EventContextConfig(
    mismatch_behavior=MismatchBehavior.SILENT, empty_pop_behavior=MismatchBehavior.SILENT
)


@dataclass
class Outcome:
    """How one execution ended. ``status`` None: the lease was lost, nothing was written."""

    status: RunStatus | None
    reviews: list[Review] = field(default_factory=list)
    stats: dict[str, int] = field(default_factory=dict)
    error: str | None = None  # why it failed or was rejected, as recorded


def build_crew(config: Config, run: Run) -> Crew:
    """Call the crew's factory with the run's inputs."""
    return _build(config, run, Crew)


def _build(config: Config, run: Run, kind: type[T]) -> T:
    """Call the factory of the run's crew (or flow) and check what it returns."""
    spec = config.get(run.crew)
    # Crew modules usually sit next to countersign.toml; appended, so installed code wins.
    crew_dir = str(config.path.parent)
    if crew_dir not in sys.path:
        sys.path.append(crew_dir)
    factory = load_factory(spec)
    try:
        crew = factory(dict(run.inputs))
    except Exception as exc:
        raise CrewBuildError(f"the factory of crew {run.crew!r} raised {exc!r}") from exc
    if not isinstance(crew, kind):
        raise CrewBuildError(
            f"the factory of {run.crew!r} returned {type(crew).__name__}, "
            f"not a crewai.{kind.__name__}"
        )
    return crew


def uses_offline_model(crew: Crew) -> bool:
    """Whether any model of the crew (its agents', its tasks' agents', the manager's) is an
    offline one, whose class says ``offline = True`` (as ``crew_runtime.offline``'s
    ScriptedLLM does: the core reads the marker and never imports it). Look before
    :func:`prepare` wraps them in the journal."""
    agents = [*crew.agents, *(task.agent for task in crew.tasks if task.agent is not None)]
    if crew.manager_agent is not None:
        agents.append(crew.manager_agent)
    llms = [crew.manager_llm, *(a.llm for a in agents)]
    llms += [getattr(a, "function_calling_llm", None) for a in agents]  # Agent only
    return any(getattr(type(llm), "offline", False) is True for llm in llms)


def prepare(crew: Crew, ctx: RunContext, prefix: str = "") -> None:
    """Put every LLM (the planner's too) behind the journal, and the crew's callbacks
    behind the replay, so a resumed run sends the prompts it recorded and reports each
    step once (``crew_runtime.options``). The crew is otherwise run as its author built it.

    A crew kicked off in a flow step has its streams under ``prefix``; the gates of a
    flow's crews are the run's, by tool name.
    """
    ctx.index_tasks(list(crew.tasks), prefix)
    journal_guardrails(crew.tasks, ctx, prefix)
    _unstreamed(crew)
    ctx.gates.update(gates_of(list(crew.agents), ctx.spec.approval_tools))
    planner = streams.planner_stream(prefix)
    journal_planning(crew, lambda llm: JournalLLM.wrap(llm, ctx, stream=planner))
    once_callbacks(crew, ctx)
    recall.prepare(crew, list(crew.agents), ctx)
    # A hierarchical crew's own manager_agent is not among its agents (CrewAI refuses it).
    manager = [crew.manager_agent] if crew.manager_agent is not None else []
    for agent in [*crew.agents, *manager]:
        if isinstance(agent, Agent) and agent.function_calling_llm is not None:
            agent.function_calling_llm = _wrap(agent.function_calling_llm, ctx)
        agent.llm = _wrap(agent.llm, ctx)
    if crew.manager_llm is not None:
        crew.manager_llm = _wrap(crew.manager_llm, ctx)
    # CrewAI hands the crew's own function_calling_llm to agents that have none, at kickoff.
    if crew.function_calling_llm is not None:
        crew.function_calling_llm = _wrap(crew.function_calling_llm, ctx)


def _wrap(llm: Any, ctx: RunContext) -> Any:
    if isinstance(llm, BaseLLM) and not isinstance(llm, JournalLLM):
        return JournalLLM.wrap(llm, ctx)
    return llm


def execute(store: Store, config: Config, ctx: RunContext) -> Outcome:
    """Run the crew (or flow) under ``ctx`` and record how it ended."""
    quiet.install()
    install_run_clock()
    install_once_events()
    install_repeat_count()
    reasoning.install()
    recall.install()  # before the factory: CrewAI embeds knowledge while building a crew
    console.install()
    if ctx.spec.kind == "flow":
        return _execute_flow(store, config, ctx)
    run = ctx.run
    try:
        crew = build_crew(config, run)
    except Exception as exc:
        return _settle(store, ctx, RunStatus.FAILED, error=str(exc))
    refused = refusal(crew, run.crew)
    if refused is not None:  # before any model is asked anything
        return _settle(store, ctx, RunStatus.FAILED, error=refused)
    if uses_offline_model(crew):
        try:  # enqueued before kickoff, so it goes out before any review it opens
            store.note_run(run.id, ctx.lease_token, RunNote.OFFLINE_MODEL)
        except LeaseLost:
            return Outcome(None, stats=dict(ctx.stats))
    prepare(crew, ctx)
    crew_print = fingerprint(crew, dict(run.inputs))
    restore(ctx, crew, crew_print)
    result, failure = _kick(ctx, lambda: crew.kickoff(inputs=dict(run.inputs)))
    if failure is not None:
        snapshot = take(ctx, crew, crew_print) if ctx.asks else None
        return _stopped(store, ctx, failure, snapshot=snapshot)
    if ctx.aborted:
        return Outcome(None, stats=dict(ctx.stats))
    if ctx.signalled:  # caught on its way out (by a tool, say): the run is not done
        return _stopped(store, ctx, PauseRun("a pause was caught inside the crew"))
    output = result.raw if isinstance(result, CrewOutput) else str(result)
    return _settle(store, ctx, RunStatus.SUCCEEDED, output=output)


def _execute_flow(store: Store, config: Config, ctx: RunContext) -> Outcome:
    """Start a flow, or resume the paused one with the reviewer's decision.

    The crews its steps kick off are prepared as they start (``InnerCrews``), journaled
    and reviewed like a run's own crew; a pause in one suspends the whole run, and the
    next execution runs the flow again (from its start, or from its pending feedback),
    each crew replaying its journal up to the pause.
    """
    run = ctx.run
    try:
        flow = _build(config, run, Flow)
    except Exception as exc:
        return _settle(store, ctx, RunStatus.FAILED, error=str(exc))
    flows = FlowStore(store)
    persistence = StoredFlowPersistence(flows=flows)
    # CrewAI reads the provider of an undecorated @human_feedback from this global.
    flow_config.hitl_provider = ReviewFeedbackProvider()
    started = ctx.recorded(streams.FLOW, "flow", 0)

    def prepare_inner(crew: Crew, prefix: str) -> None:
        refused = refusal(crew, f"{run.crew} {prefix.rstrip('/')}")
        if refused is not None:  # before any model is asked anything
            raise CrewBuildError(refused)
        if uses_offline_model(crew):  # at most once per run (the store checks)
            store.note_run(run.id, ctx.lease_token, RunNote.OFFLINE_MODEL)
        prepare(crew, ctx, prefix)

    crews = InnerCrews(ctx, prepare_inner)

    def kickoff() -> Any:
        with crews.active():
            if started is None:
                flow.persistence = persistence
                return flow.kickoff(inputs=dict(run.inputs))
            decision = resume_point(ctx)
            if decision is None:
                raise CrewBuildError("the flow is paused but no decision was found")
            resumed = type(flow).from_pending(started.payload["flow_id"], persistence)
            route_by_decision(resumed, decision, ctx)
            return resumed.resume(feedback_text(decision))

    result, failure = _kick(ctx, kickoff)
    if failure is not None:
        return _stopped(store, ctx, failure)
    if ctx.aborted:
        return Outcome(None, stats=dict(ctx.stats))
    if isinstance(result, HumanFeedbackPending):
        # One transaction: where the flow paused, its pending feedback and the review.
        entries = [crews.end_leg()]
        if started is None:
            entries.append(NewEntry(streams.FLOW, "flow", 0, {"flow_id": result.context.flow_id}))
        return _stopped(store, ctx, result, entries=entries, flow=persistence.pending)
    if ctx.signalled:  # a step caught its crew's pause: the run is not done
        return _stopped(store, ctx, PauseRun("a pause was caught inside the flow"))
    outcome = _settle(store, ctx, RunStatus.SUCCEEDED, output=str(result))
    if started is not None and outcome.status is not None:
        flows.clear_pending(str(started.payload["flow_id"]))
    return outcome


def _kick(ctx: RunContext, kickoff: Callable[[], T]) -> tuple[T | None, Exception | None]:
    """Call ``kickoff`` under the run: its context, tool journal and review provider.

    Returns its result, or what it raised (a pause, a rejection, a lost lease, a failure),
    once the calls still in flight (a parallel task's) are journaled.
    """
    token = set_provider(ReviewProvider())
    # A pause leaves kickoff() from inside open event scopes (task, agent); CrewAI
    # would print a "pairing mismatch" warning for each. They are expected here.
    events = _event_context_config.set(_QUIET_EVENTS)
    try:
        with ctx.active(), scoped_hooks():
            register_tool_journal(ctx)
            try:
                return kickoff(), None
            except Exception as exc:
                return None, exc
            finally:
                ctx.close()
    finally:
        _event_context_config.reset(events)
        reset_provider(token)


def _stopped(
    store: Store,
    ctx: RunContext,
    exc: Exception,
    *,
    entries: Sequence[NewEntry] = (),
    flow: FlowPause | None = None,
    snapshot: Snapshot | None = None,
) -> Outcome:
    """``kickoff()`` raised: a pause, a rejection, a lost lease, or a real failure. A pause
    suspends the run with its reviews, and ``entries``, ``flow`` and ``snapshot`` (see
    ``suspend_run``)."""
    if ctx.refused is not None:  # replaying it would meet the same refusal
        return _settle(store, ctx, RunStatus.FAILED, error=ctx.refused)
    if ctx.aborted or isinstance(exc, LeaseLost):
        return Outcome(None, stats=dict(ctx.stats))
    if ctx.rejection is not None:
        return _settle(store, ctx, RunStatus.REJECTED, error=ctx.rejection)
    if ctx.asks:
        try:
            reviews = store.suspend_run(
                ctx.run.id, ctx.lease_token, ctx.asks, entries=entries, flow=flow, snapshot=snapshot
            )
        except LeaseLost:
            return Outcome(None, stats=dict(ctx.stats))
        except UnstorableValue as refused:
            # Replaying the run would draft the same text and meet the same refusal.
            error = unstorable_reason("the review it asked for", refused)
            return _settle(store, ctx, RunStatus.FAILED, error=error)
        return Outcome(RunStatus.WAITING, reviews, dict(ctx.stats))
    log.warning("run %s failed: %s", ctx.run.id, "".join(traceback.format_exception(exc)))
    return _settle(store, ctx, RunStatus.FAILED, error=f"{type(exc).__name__}: {exc}")


def _settle(
    store: Store,
    ctx: RunContext,
    status: RunStatus,
    *,
    output: str | None = None,
    error: str | None = None,
) -> Outcome:
    """Record how the run ended, if this worker still holds it.

    Output (or a reason) the database refuses fails the run with that refusal as its
    reason: left running, the run would be taken for a crashed worker's and replayed,
    to the same refusal, until it gave up without saying why.
    """
    try:
        try:
            store.finish_run(ctx.run.id, ctx.lease_token, status, output=output, error=error)
        except UnstorableValue as refused:
            status = RunStatus.FAILED
            what = "its output" if output is not None else "the reason it ended"
            error = unstorable_reason(what, refused)
            store.finish_run(ctx.run.id, ctx.lease_token, status, error=error)
    except LeaseLost:
        return Outcome(None, stats=dict(ctx.stats))
    return Outcome(status, stats=dict(ctx.stats), error=error)


def _unstreamed(crew: Crew) -> None:
    """A streaming crew (``Crew(stream=True)``) makes ``kickoff()`` hand back an iterator of
    chunks and run nothing until someone reads it (crew.py:1019). A worker has no reader:
    its models are set to stream, as CrewAI would set them, and the crew is kicked off
    unstreamed."""
    if crew.stream:
        enable_agent_streaming(crew.agents)
        crew.stream = False
