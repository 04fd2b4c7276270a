"""CrewAI Flows with ``@human_feedback``, reviewed through Countersign.

A flow method decorated with CrewAI's own ``@human_feedback(message=..., emit=[...])``
pauses into a task review in the run's thread (same buttons as a crew task). The flow's
state and its pending feedback live in the Countersign database (``FlowStore``); any
worker resumes it with ``Flow.from_pending(...).resume(feedback)``. Three CrewAI
pitfalls are handled here:

- outcomes come from the reviewer's button, mapped by fixed rules, never from an LLM
  (``_collapse_to_outcome`` would call one, in another process from a serialised model);
- the pending feedback is cleared only once the flow has moved past it: CrewAI clears it
  before running the listeners, so a worker dying there would lose the flow;
- announcing the review goes through the outbox, after the pending row is saved.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from crewai.flow import Flow
from crewai.flow.async_feedback import (
    HumanFeedbackPending,
    HumanFeedbackProvider,
    PendingFeedbackContext,
)
from crewai.flow.persistence.base import FlowPersistence
from pydantic import BaseModel, ConfigDict, Field

from crew_runtime.context import RunContext, current_run
from crew_runtime.signals import RunRejected
from storage import Decision, DecisionKind, FlowStore, NewReview, ReviewKind

FLOW_STREAM = "flow:"


class StoredFlowPersistence(FlowPersistence):
    """CrewAI's ``FlowPersistence`` on Countersign's database.

    ``clear_pending_feedback`` does nothing: the executor clears the pending row itself
    once the resumed flow has finished or paused again.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    persistence_type: str = "countersign"
    flows: FlowStore = Field(exclude=True)

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
        self.flows.save_pending(flow_uuid, context.to_dict(), state)

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
        stream = FLOW_STREAM + context.method_name
        ctx.ask(
            NewReview(
                kind=ReviewKind.TASK_REVIEW,
                stream=stream,
                seq=ctx.next_review_seq(ReviewKind.TASK_REVIEW, stream),
                prompt=str(context.method_output),
                details={
                    "task": context.method_name,
                    "description": context.message,
                    "agent": type(flow).__name__,
                    "flow_id": context.flow_id,
                    "outcomes": list(context.emit or []),
                },
            )
        )
        raise HumanFeedbackPending(context=context)


def outcome_for(decision: Decision, outcomes: Sequence[str]) -> str:
    """The flow outcome a reviewer's button means, by plain rules (no LLM).

    Approve (and approve-with-edit) picks the outcome that reads as approval
    (``approve``, ``approved``, ``accept``…), else the first; reject picks one that
    reads as rejection, else the last; request changes picks one that reads as a
    revision, else a rejection, else the last.
    """
    if not outcomes:
        return ""

    def first(*stems: str) -> str | None:
        return next((o for o in outcomes if any(s in o.lower() for s in stems)), None)

    if decision.kind in (DecisionKind.APPROVE, DecisionKind.EDIT):
        return first("approv", "accept", "ok", "yes", "publish") or outcomes[0]
    if decision.kind == DecisionKind.CHANGES:
        return first("revis", "change", "edit", "retry", "reject") or outcomes[-1]
    return first("reject", "deny", "decline", "no") or outcomes[-1]


def route_by_decision(flow: object, decision: Decision) -> None:
    """Make the resumed flow take the clicked outcome; CrewAI would ask an LLM
    (``_collapse_to_outcome``, flow/runtime/__init__.py:3886)."""

    def collapse(feedback: str, outcomes: Sequence[str], llm: Any) -> str:
        return outcome_for(decision, outcomes)

    object.__setattr__(flow, "_collapse_to_outcome", collapse)


def feedback_text(decision: Decision) -> str:
    """What the flow reads in ``last_human_feedback.feedback``."""
    return decision.text or decision.kind.value


def resume_point(ctx: RunContext) -> Decision | None:
    """The latest decided flow review of the run: the answer the paused flow waits for."""
    reviews = [r for r in ctx.reviews() if r.stream.startswith(FLOW_STREAM)]
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


def _plain(state: dict[str, Any] | BaseModel) -> dict[str, Any]:
    return state.model_dump(mode="json") if isinstance(state, BaseModel) else dict(state)
