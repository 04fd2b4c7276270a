"""CrewAI Flows with ``@human_feedback``, reviewed through Countersign.

A flow method decorated with CrewAI's own ``@human_feedback(message=..., emit=[...])``
pauses into a task review in the run's thread (same buttons as a crew task). The flow's
state and its pending feedback live in the Countersign database (``FlowStore``); any
worker resumes it with ``Flow.from_pending(...).resume(feedback)``. Three CrewAI
pitfalls are handled here:

- outcomes come from the reviewer's choice (one button per ``emit`` outcome), or from the
  flow's own ``llm=`` reading a free-text reply through the journal
  (``crew_runtime.flow_outcomes``), never from a model CrewAI rebuilds in another process
  from its serialised name;
- the pending feedback is cleared only once the flow has moved past it: CrewAI clears it
  before running the listeners, so a worker dying there would lose the flow;
- the pending feedback is saved in the transaction that suspends the run and opens its
  review (``Store.suspend_run``), not when CrewAI saves it: a worker dying in between would
  leave a pending row newer than the last decision, and the next execution would resume it
  with that older decision, skipping a review.

A crew kicked off inside a flow step (``Crew(...).kickoff()``, ``kickoff_async``,
``akickoff``, ``kickoff_for_each``) is prepared like a run's own crew as it starts
(:class:`InnerCrews`, on CrewAI's execution-start hook): models behind the journal, its
tools journaled and gated, ``human_input`` reviewed, and its streams under a prefix of its
own, ``flow:<method>#<k>/``, the k-th crew that step kicked off in the run.
"""

from __future__ import annotations

import functools
import threading
from collections import Counter
from collections.abc import Callable
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from crewai import Crew
from crewai.flow import Flow
from crewai.flow.async_feedback import (
    HumanFeedbackPending,
    HumanFeedbackProvider,
    PendingFeedbackContext,
)
from crewai.flow.flow_context import current_flow_method_name
from crewai.flow.persistence.base import FlowPersistence
from crewai.hooks.dispatch import HookAborted, InterceptionPoint, register_scoped
from pydantic import BaseModel, ConfigDict, Field

from crew_runtime import flow_outcomes, streams
from crew_runtime.context import RunContext, current_run
from crew_runtime.signals import RunAborted, RunRejected, RunSignal
from storage import (
    Decision,
    DecisionKind,
    FlowFeedbackDetails,
    FlowPause,
    FlowStore,
    LeaseLost,
    NewEntry,
    NewReview,
    ReviewKind,
)

# The inner crews of the flow run executing in this context, and the prefix reserved for
# the crew that ``Crew.kickoff_async`` is about to kick off in a thread.
_running: ContextVar[InnerCrews | None] = ContextVar("countersign_flow_crews", default=None)
_reserved: ContextVar[str | None] = ContextVar("countersign_flow_crew_prefix", default=None)
_install_lock = threading.Lock()
_installed = False


class StoredFlowPersistence(FlowPersistence):
    """CrewAI's ``FlowPersistence`` on Countersign's database.

    ``save_pending_feedback`` keeps the pending feedback as :attr:`pending` for the executor
    to save with the suspension; ``clear_pending_feedback`` does nothing: the executor clears
    the pending row itself once the resumed flow has finished (see the module docstring).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    persistence_type: str = "countersign"
    flows: FlowStore = Field(exclude=True)
    pending: FlowPause | None = Field(default=None, exclude=True)

    def init_db(self) -> None:
        """The schema comes with Countersign's migrations."""

    def save_state(
        self, flow_uuid: str, method_name: str, state_data: dict[str, Any] | BaseModel
    ) -> None:
        self.flows.save_state(flow_uuid, method_name, _plain(state_data))

    def load_state(self, flow_uuid: str) -> dict[str, Any] | None:
        return self.flows.load_state(flow_uuid)

    def save_pending_feedback(
        self,
        flow_uuid: str,
        context: PendingFeedbackContext,
        state_data: dict[str, Any] | BaseModel,
    ) -> None:
        state = _plain(state_data)
        self.flows.save_state(flow_uuid, context.method_name, state)
        self.pending = FlowPause(flow_uuid, context.to_dict(), state)

    def load_pending_feedback(
        self, flow_uuid: str
    ) -> tuple[dict[str, Any], PendingFeedbackContext] | None:
        found = self.flows.load_pending(flow_uuid)
        if found is None:
            return None
        state, context = found
        return state, PendingFeedbackContext.from_dict(context)

    def clear_pending_feedback(self, flow_uuid: str) -> None:
        """Deferred on purpose (see the module docstring)."""


class ReviewFeedbackProvider(HumanFeedbackProvider):
    """Turns a ``@human_feedback`` pause into a Countersign task review, then pauses."""

    def request_feedback(self, context: PendingFeedbackContext, flow: Flow[Any]) -> str:
        ctx = current_run()
        if ctx is None:
            raise RuntimeError("this flow asks for feedback outside a Countersign run")
        stream = streams.feedback_stream(context.method_name)
        ctx.ask(
            NewReview(
                kind=ReviewKind.TASK_REVIEW,
                stream=stream,
                seq=ctx.next_review_seq(ReviewKind.TASK_REVIEW, stream),
                prompt=str(context.method_output),
                details=FlowFeedbackDetails(
                    task=context.method_name,
                    description=context.message,
                    agent=type(flow).__name__,
                    flow_id=context.flow_id,
                    outcomes=tuple(context.emit or ()),
                    reads_feedback=flow_outcomes.collapse_model(flow, context.method_name)
                    is not None
                    or None,
                ),
            )
        )
        raise HumanFeedbackPending(context=context)


def route_by_decision(flow: Any, decision: Decision, ctx: RunContext) -> None:
    """Make the resumed flow take the outcome the decision means (``crew_runtime.flow_outcomes``);
    CrewAI would ask an LLM (``_collapse_to_outcome``, flow/runtime/__init__.py:3886)."""
    pending = getattr(flow, "_pending_feedback_context", None)
    flow_outcomes.route(flow, decision, ctx, str(getattr(pending, "method_name", "")))
    # CrewAI would rebuild the model from its serialised name before collapsing, which fails
    # for a model it cannot name (a BaseLLM of the author's own); the collapse above asks the
    # decorator's own model instead, so CrewAI's rebuilt one is never used.
    if pending is not None:
        pending.llm = None


def feedback_text(decision: Decision) -> str:
    """What the flow reads in ``last_human_feedback.feedback``: the reviewer's words, else
    the outcome they chose, else their decision's kind."""
    return decision.text or flow_outcomes.chosen_name(decision) or decision.kind.value


def resume_point(ctx: RunContext) -> Decision | None:
    """The latest decided flow review of the run: the answer the paused flow waits for."""
    reviews = [r for r in ctx.reviews() if streams.is_feedback_stream(r.stream)]
    if not reviews:
        return None
    latest = max(reviews, key=lambda r: (r.journal_pos, r.created_at))
    if latest.decision is None:
        return None
    if latest.decision.kind == DecisionKind.EXPIRE:
        reason = "the review expired before anyone decided"
        ctx.reject(reason)
        raise RunRejected(reason)
    return latest.decision


class InnerCrews:
    """Prepares each crew kicked off inside the flow's steps, under a stable prefix.

    The prefix is ``flow:<method>#<k>/``: the k-th crew the step ``method`` kicked off in
    the run, counted per step, so steps running side by side do not race for numbers. It
    must name the same crew on every execution, though an execution does not always run
    the flow from its start: after a ``@human_feedback`` decision CrewAI runs on from the
    paused method, and the earlier steps (and their crews) are not run again. So the run
    is cut into legs, one per feedback pause: leg n starts after the n-th decision, from
    the counts the flow had reached when it paused there (journaled as ``flow``/
    ``kickoffs``/n-1), and every execution of a leg numbers its crews alike.

    ``prepare(crew, prefix)`` does the preparing (the executor's, as for a run's crew).
    """

    def __init__(self, ctx: RunContext, prepare: Callable[[Crew, str], None]) -> None:
        self.ctx = ctx
        self._prepare = prepare
        self.leg = sum(1 for r in ctx.reviews() if streams.is_feedback_stream(r.stream))
        start = ctx.recorded(streams.FLOW, "kickoffs", self.leg - 1) if self.leg else None
        self._counts: Counter[str] = Counter(start.payload["counts"] if start else {})
        self._lock = threading.Lock()

    @contextmanager
    def active(self) -> Any:
        """Prepare the crews kicked off in this context (inside ``scoped_hooks()``)."""
        install()
        register_scoped(InterceptionPoint.EXECUTION_START, self._starting)
        token = _running.set(self)
        try:
            yield self
        finally:
            _running.reset(token)

    def reserve(self) -> str:
        """The prefix of the next crew of the flow step running in this context."""
        where = streams.flow_step(current_flow_method_name.get())
        with self._lock:
            k = self._counts[where]
            self._counts[where] += 1
        return streams.flow_crew_prefix(where, k)

    def end_leg(self) -> NewEntry:
        """The flow paused for feedback: the journal entry saying where the next leg's
        numbering starts (written with the suspension)."""
        with self._lock:
            counts = dict(self._counts)
        return NewEntry(streams.FLOW, "kickoffs", self.leg, {"counts": counts})

    def _starting(self, hook: Any) -> None:
        """CrewAI's execution-start hook: a crew (or the flow itself) begins."""
        crew = hook.crew
        if not isinstance(crew, Crew):  # the flow's own start
            return
        prefix = _reserved.get() or self.reserve()
        _reserved.set(None)  # taken: a crew this one kicks off numbers itself
        # Another exception would be swallowed by CrewAI's hook dispatch, and the crew
        # would run without its journal: stop the run instead.
        try:
            self._prepare(crew, prefix)
        except RunSignal:
            raise
        except LeaseLost:
            self.ctx.abort()
            raise RunAborted(f"run {self.ctx.run.id}: lease lost") from None
        except Exception as exc:
            raise HookAborted(f"the crew of {prefix} could not be prepared: {exc!r}") from exc


def install() -> None:
    """Number the crews ``Crew.kickoff_async`` kicks off before their thread starts.

    ``kickoff_async`` runs ``kickoff`` in a thread, where the crew would take its number:
    crews gathered side by side (``asyncio.gather``, ``kickoff_for_each_async``) would
    take them in whatever order their threads happen to start. Reserved in the coroutine,
    the numbers follow the order the step started them in. Once per process; outside a
    flow run the method is CrewAI's own.
    """
    global _installed
    with _install_lock:
        if _installed:
            return
        original = Crew.kickoff_async

        @functools.wraps(original)
        async def kickoff_async(self: Crew, *args: Any, **kwargs: Any) -> Any:
            crews = _running.get()
            token = _reserved.set(crews.reserve() if crews is not None else None)
            try:
                return await original(self, *args, **kwargs)
            finally:
                _reserved.reset(token)

        Crew.kickoff_async = kickoff_async  # type: ignore[method-assign]
        _installed = True


def _plain(state: dict[str, Any] | BaseModel) -> dict[str, Any]:
    return state.model_dump(mode="json") if isinstance(state, BaseModel) else dict(state)
