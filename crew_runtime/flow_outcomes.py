"""Which outcome a ``@human_feedback(emit=[...])`` decision routes the flow to.

A flow's outcomes are its author's words, so the reviewer is offered them (one button per
outcome in Slack, ``--outcome`` wherever a decision is typed) and the outcome chosen is kept
with the decision (``details["outcome"]``); the resumed flow takes exactly that one.

A decision that names none (a thread reply, a decision typed without one) is mapped the way
CrewAI documents: when the decorator sets ``llm=``, CrewAI's own collapse
(``Flow._collapse_to_outcome``) asks that model to read the reviewer's words, through the
journal (stream ``flow:<method>~collapse``), so a later execution replays the answer instead
of asking again. Without ``llm=``, a decision whose kind reads as one of the outcome names
(``approve`` → ``approved``, changes → ``needs_revision``, reject → ``rejected``) takes it;
one that reads as none is refused at the door (:func:`refusal`), and the person is asked to
choose.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from crew_runtime import streams
from storage import Decision, DecisionKind, FlowFeedbackDetails

if TYPE_CHECKING:  # the service checks decisions with this module: no CrewAI import for it
    from crewai.llms.base_llm import BaseLLM

    from crew_runtime.context import RunContext

OUTCOME = "outcome"
"""The key of a decision's details that names the outcome the reviewer chose."""

# What each kind of decision reads as, in order of preference: the first stem any outcome
# name holds wins (so "needs_revision" is a change request before "rejected" is).
_STEMS: dict[DecisionKind, tuple[str, ...]] = {
    DecisionKind.APPROVE: ("approv", "accept", "publish", "ok", "yes"),
    DecisionKind.EDIT: ("approv", "accept", "publish", "ok", "yes"),
    DecisionKind.CHANGES: ("revis", "change", "edit", "retry", "redo"),
    DecisionKind.REJECT: ("reject", "deny", "declin", "discard", "no"),
}


def chosen(decision: Decision, outcomes: Sequence[str]) -> str | None:
    """The outcome the reviewer chose, if the decision names one of ``outcomes``."""
    named = chosen_name(decision)
    return named if named in outcomes else None


def chosen_name(decision: Decision) -> str | None:
    """The outcome the decision names, whatever the flow's outcomes."""
    named = decision.details.get(OUTCOME) if isinstance(decision.details, dict) else None
    return named if isinstance(named, str) else None


def by_kind(kind: DecisionKind, outcomes: Sequence[str]) -> str | None:
    """The outcome whose name reads as a decision of ``kind``, else None."""
    for stem in _STEMS.get(kind, ()):
        found = next((o for o in outcomes if stem in o.lower()), None)
        if found is not None:
            return found
    return None


def kind_for(outcome: str, outcomes: Sequence[str]) -> DecisionKind:
    """The kind of decision a reviewer's choice of ``outcome`` is recorded as (what the
    review policy, a quorum and the decision's line read): an approval when it is the
    outcome an approval reads as, a rejection when it is the one a rejection reads as, else
    a change request (which carries the reviewer's feedback). The flow takes ``outcome``
    itself, whatever its kind."""
    if by_kind(DecisionKind.APPROVE, outcomes) == outcome:
        return DecisionKind.APPROVE
    if by_kind(DecisionKind.REJECT, outcomes) == outcome:
        return DecisionKind.REJECT
    return DecisionKind.CHANGES


def refusal(details: FlowFeedbackDetails, kind: DecisionKind, outcome: str | None) -> str | None:
    """Why a decision cannot route the flow (None: it can): an outcome that is not the
    flow's, or none named where neither the flow's model nor the decision's kind says one."""
    outcomes = details.outcomes
    if not outcomes:
        return None if outcome is None else "this review has no outcomes to choose from"
    listed = ", ".join(outcomes)
    if outcome is not None:
        return None if outcome in outcomes else f"{outcome!r} is not one of its outcomes: {listed}"
    if details.reads_feedback or by_kind(kind, outcomes) is not None:
        return None
    return f"choose one of the flow's outcomes: {listed}"


def collapse_model(flow: Any, method: str) -> BaseLLM | None:
    """The model the flow's ``@human_feedback`` on ``method`` names with ``llm=``, if any."""
    from crewai.llm import LLM
    from crewai.llms.base_llm import BaseLLM

    config = getattr(getattr(type(flow), method, None), "__human_feedback_config__", None)
    llm = getattr(config, "llm", None)
    if isinstance(llm, str):
        made = LLM(model=llm)
        return made if isinstance(made, BaseLLM) else None
    return llm if isinstance(llm, BaseLLM) else None


def route(flow: Any, decision: Decision, ctx: RunContext, method: str) -> None:
    """Make the resumed ``flow`` take the outcome ``decision`` means (see the module)."""
    from crew_runtime.journal_llm import JournalLLM

    crewai_collapse = flow._collapse_to_outcome

    def collapse(feedback: str, outcomes: Sequence[str], llm: Any) -> str:
        picked = chosen(decision, outcomes)
        if picked is not None:
            return picked
        model = collapse_model(flow, method)
        if model is not None and decision.text:
            stream = streams.reasoning_stream(streams.feedback_stream(method), "collapse")
            journaled = JournalLLM.wrap(model, ctx, stream=stream)
            return str(crewai_collapse(feedback, outcomes, journaled))
        return by_kind(decision.kind, outcomes) or outcomes[-1]

    object.__setattr__(flow, "_collapse_to_outcome", collapse)
