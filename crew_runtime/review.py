"""Task reviews: CrewAI's own ``Task(human_input=True)``, answered through Countersign.

CrewAI asks on the console through a ``HumanInputProvider`` held in a ContextVar
(core/providers/human_input.py:445). Ours never blocks: with no decision recorded
for this round it opens a review and raises ``PauseRun`` (a ``HookAborted``, so it
leaves ``kickoff()`` without the agent's retry loop). On replay it applies the
recorded decisions round by round, exactly as the reviewer gave them.
"""

from __future__ import annotations

from typing import Any

from crewai.agents.parser import AgentFinish
from crewai.core.providers.human_input import SyncHumanInputProvider

from crew_runtime.context import current_run
from crew_runtime.people import reviewer
from crew_runtime.signals import PauseRun, RunRejected
from storage import DecisionKind, NewReview, ReviewKind, ReviewStatus


class ReviewProvider(SyncHumanInputProvider):
    """Turns each review round of a task into a durable Countersign review."""

    def handle_feedback(self, formatted_answer: AgentFinish, context: Any) -> AgentFinish:
        ctx = current_run()
        if ctx is None:  # a crew outside Countersign keeps CrewAI's console behaviour
            return super().handle_feedback(formatted_answer, context)
        stream = ctx.stream_for(context.task, context.agent)
        answer = formatted_answer
        while True:
            seq = ctx.next_seq(stream, "review")
            draft = str(answer.output)
            review = ctx.find_review(ReviewKind.TASK_REVIEW, stream, seq)
            if review is None or review.status == ReviewStatus.PENDING:
                if review is None:
                    ctx.ask(_task_review(context, stream, seq, draft))
                raise ctx.signal(PauseRun(f"waiting for a review of {stream} round {seq}"))
            decision = review.decision
            if decision is None:
                raise ctx.signal(RunRejected(f"the review of {stream} was {review.status}"))
            if decision.kind == DecisionKind.APPROVE:
                return answer
            if decision.kind == DecisionKind.EDIT:
                text = decision.text or draft
                return AgentFinish(thought=answer.thought, output=text, text=text)
            if decision.kind == DecisionKind.CHANGES:
                answer = self._revise(answer, decision.text or "", context)
                continue
            reason = decision.text or f"rejected by {reviewer(decision)}"
            if decision.kind == DecisionKind.EXPIRE:
                reason = "the review expired before anyone decided"
            ctx.reject(reason)
            raise RunRejected(reason)

    @staticmethod
    def _revise(answer: AgentFinish, feedback: str, context: Any) -> AgentFinish:
        """Run the agent again with its draft and the feedback in the conversation.

        On the ReAct path CrewAI leaves the draft out of the history
        (agents/agent_executor.py:2557-2629), so the agent would rewrite blind;
        put it back before the feedback.
        """
        messages = context.messages
        last = messages[-1] if messages else None
        if not (last and last.get("role") == "assistant" and answer.text in str(last["content"])):
            messages.append({"role": "assistant", "content": answer.text})
        messages.append(context._format_feedback_message(feedback))
        revised: AgentFinish = context._invoke_loop()
        return revised


def _task_review(context: Any, stream: str, seq: int, draft: str) -> NewReview:
    task = context.task
    return NewReview(
        kind=ReviewKind.TASK_REVIEW,
        stream=stream,
        seq=seq,
        prompt=draft,
        details={
            "task": getattr(task, "name", None) or "",
            "description": str(getattr(task, "description", "")),
            "expected_output": str(getattr(task, "expected_output", "")),
            "agent": getattr(context.agent, "role", ""),
            "round": seq,
        },
    )
