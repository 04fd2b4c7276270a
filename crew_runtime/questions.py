"""``ask_human``: a CrewAI tool that asks a person and suspends the run until they answer.

Give it to an agent like any tool::

    from crew_runtime import ask_human
    Agent(role="Researcher", tools=[ask_human], ...)

With no answer recorded it returns ``ToolFailure(code="AWAITING_HUMAN")`` under the
``raise`` policy, which stops ``kickoff()`` at once (an exception raised in ``_run`` would be
swallowed, or retried by the agent loop);
the worker then suspends the run. When the run is resumed, the same call returns
the person's answer and the agent carries on in the same turn.
"""

from __future__ import annotations

from crewai.tools import BaseTool
from crewai.tools.tool_failure import ToolFailure, ToolFailurePolicy
from pydantic import BaseModel, Field

from crew_runtime.context import current_run
from crew_runtime.people import reviewer
from crew_runtime.tool_journal import AWAITING_HUMAN
from storage import DecisionKind, NewReview, QuestionDetails, ReviewKind, ReviewStatus

NO_ANSWER_IN_TIME = (
    "No reviewer answered in time. Carry on with your best judgement and say what you assumed."
)


class AskHumanInput(BaseModel):
    question: str = Field(description="The question for the human, complete and self-contained.")


class AskHumanTool(BaseTool):
    """Asks the run's reviewers a question; the answer is the tool's result."""

    name: str = "ask_human"
    description: str = (
        "Ask a human reviewer a question and get their answer. Use it when you need a "
        "decision, a preference or a fact that only a person can give."
    )
    args_schema: type[BaseModel] = AskHumanInput
    tool_failure_policy: ToolFailurePolicy | None = ToolFailurePolicy.RAISE

    def _run(self, question: str) -> str | ToolFailure:
        ctx = current_run()
        slot = None if ctx is None else ctx.tool_slot()
        if ctx is None or slot is None:
            return ToolFailure(
                message="ask_human only works in a crew run by Countersign (countersign worker).",
                code="NOT_UNDER_COUNTERSIGN",
            )
        key = slot.key
        review = ctx.find_review(ReviewKind.QUESTION, key.stream, key.seq)
        if review is None or review.status == ReviewStatus.PENDING:
            if review is None:
                ctx.ask(
                    NewReview(
                        kind=ReviewKind.QUESTION,
                        stream=key.stream,
                        seq=key.seq,
                        prompt=question,
                        details=QuestionDetails(agent=slot.agent),
                    )
                )
            return ToolFailure(message="Waiting for a human answer.", code=AWAITING_HUMAN)
        decision = review.decision
        if decision is None or decision.kind == DecisionKind.EXPIRE:
            return NO_ANSWER_IN_TIME
        if decision.kind == DecisionKind.REJECT:
            ctx.reject(decision.text or f"rejected by {reviewer(decision)}")
            return ToolFailure(message="The reviewer rejected the run.", code="REJECTED")
        return decision.text or ""


ask_human = AskHumanTool()
