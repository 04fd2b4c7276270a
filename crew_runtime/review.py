"""Task reviews: CrewAI's own ``Task(human_input=True)``, answered through Countersign.

CrewAI asks on the console through a ``HumanInputProvider`` held in a ContextVar
(core/providers/human_input.py:445). Ours never blocks: with no decision recorded
for this round it opens a review and raises ``PauseRun`` (a ``HookAborted``, so it
leaves ``kickoff()`` without the agent's retry loop). On replay it applies the
recorded decisions round by round, exactly as the reviewer gave them. A crew kicked off with
``akickoff()`` asks through ``handle_feedback_async``: the same rounds, the agent revising on
its async loop.

A typed task (``output_pydantic`` or ``output_json``) is reviewed as the object it will
output: the draft is shown as its model's JSON, the model's JSON schema goes with the review
(the service checks an edit against it), an approval hands CrewAI the object shown and an
edit the object typed. A draft reaches a reviewer only once it passes the task's guardrails
(``crew_runtime/guardrails.py``). An edit the model or a guardrail refuses is not taken: the
same draft is reviewed again, saying why.
"""

from __future__ import annotations

import json
import re
from collections.abc import Generator
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from crewai.agents.parser import AgentFinish
from crewai.core.providers.human_input import SyncHumanInputProvider
from pydantic import BaseModel, ValidationError
from pydantic.errors import PydanticUserError

from crew_runtime.context import RunContext, current_run
from crew_runtime.digests import draft_digest
from crew_runtime.guardrails import guardrail_refusal
from crew_runtime.people import reviewer
from crew_runtime.signals import PauseRun, RunRejected
from crew_runtime.snapshot import note_setup
from storage import (
    DecisionKind,
    NewReview,
    Review,
    ReviewKind,
    ReviewStatus,
    TaskReviewDetails,
)

# CrewAI's own way to find the JSON in an answer with text around it (utilities/converter.py).
_JSON_IN_TEXT = re.compile(r"({.*})", re.DOTALL)


class ReviewProvider(SyncHumanInputProvider):
    """Turns each review round of a task into a durable Countersign review."""

    def post_setup_messages(self, context: Any) -> None:
        """CrewAI set up a task's conversation: a resume seeds the paused one from its
        snapshot here (``crew_runtime.snapshot``), CrewAI's own resumption seam."""
        ctx = current_run()
        if ctx is not None:
            note_setup(ctx, context)

    def handle_feedback(self, formatted_answer: AgentFinish, context: Any) -> AgentFinish:
        ctx = current_run()
        if ctx is None:  # a crew outside Countersign keeps CrewAI's console behaviour
            return super().handle_feedback(formatted_answer, context)
        rounds = _rounds(ctx, formatted_answer, context)
        try:
            asked = next(rounds)
            while True:
                feed_back(*asked, context)
                asked = rounds.send(context._invoke_loop())
        except StopIteration as done:
            final: AgentFinish = done.value
            return final

    async def handle_feedback_async(
        self, formatted_answer: AgentFinish, context: Any
    ) -> AgentFinish:
        """The same rounds for a crew kicked off with ``akickoff()``: the agent revises on
        its async loop."""
        ctx = current_run()
        if ctx is None:
            return await super().handle_feedback_async(formatted_answer, context)
        rounds = _rounds(ctx, formatted_answer, context)
        try:
            asked = next(rounds)
            while True:
                feed_back(*asked, context)
                asked = rounds.send(await context._ainvoke_loop())
        except StopIteration as done:
            final: AgentFinish = done.value
            return final


def _rounds(
    ctx: RunContext, formatted_answer: AgentFinish, context: Any
) -> Generator[tuple[AgentFinish, str], AgentFinish, AgentFinish]:
    """The review rounds of a task's answer, as recorded decisions say or a new review asks.

    Yields ``(draft, feedback)`` when a reviewer asked for changes, and is sent the agent's
    revised answer (the caller runs the agent, on its sync or async loop); returns the
    answer CrewAI goes on with.
    """
    task, agent = context.task, context.agent
    stream = ctx.stream_for(task, agent)
    answer = formatted_answer
    refused: str | None = None  # why the reviewer's last edit was not taken
    while True:
        draft = Draft.of(task, answer.output)
        if guardrail_refusal(task, agent, draft.output) is not None:
            # CrewAI's guardrail refuses it too and retries the agent: nobody reviews it.
            return answer
        seq = ctx.next_seq(stream, "review")
        review = ctx.find_review(ReviewKind.TASK_REVIEW, stream, seq)
        if review is None or review.status == ReviewStatus.PENDING:
            if review is None:
                ctx.ask(_task_review(context, stream, seq, draft, refused))
            raise ctx.signal(PauseRun(f"waiting for a review of {stream} round {seq}"))
        decision = review.decision
        if decision is None:
            raise ctx.signal(RunRejected(f"the review of {stream} was {review.status}"))
        if not _as_approved(ctx, review, draft, stream, seq):
            # Not what was approved (a changed replay, an edit lost): not passed on, the
            # refusal recorded, the draft reviewed again.
            ctx.ask(_task_review(context, stream, seq, draft, None))
            raise ctx.signal(PauseRun(f"waiting for a review of {stream} round {seq}"))
        if decision.kind == DecisionKind.APPROVE:
            return _finish(answer, draft.output)
        if decision.kind == DecisionKind.EDIT:
            edited, refused = _edited(task, agent, decision.text or draft.text)
            if refused is None:
                return _finish(answer, edited)
            continue  # the same draft again, with why the edit was not taken
        if decision.kind == DecisionKind.CHANGES:
            answer = yield answer, decision.text or ""
            refused = None
            continue
        reason = decision.text or f"rejected by {reviewer(decision)}"
        if decision.kind == DecisionKind.EXPIRE:
            reason = "the review expired before anyone decided"
        ctx.reject(reason)
        raise RunRejected(reason)


def _as_approved(ctx: RunContext, review: Review, draft: Draft, stream: str, seq: int) -> bool:
    """Whether what the run would go on with has the digest ``review``'s approval covers:
    the draft as replayed now, or an edit's text (``crew_runtime.digests``). Where it has
    another, the decision is voided (the review superseded, ``digest_mismatch`` audited) and
    False returned. A decision with no digest (an older row), or one that does not pass a
    draft on (changes asked, a rejection), is not checked."""
    decision = review.decision
    if decision is None or decision.digest is None:
        return True
    if decision.kind == DecisionKind.APPROVE:
        going_on = draft.text
    elif decision.kind == DecisionKind.EDIT:
        going_on = decision.text or draft.text
    else:
        return True
    found = draft_digest(ctx.run.id, stream, seq, going_on, draft.model is not None)
    if found == decision.digest:
        return True
    ctx.void(review, {"task": stream, "round": seq, "approved": decision.digest, "found": found})
    return False


def feed_back(answer: AgentFinish, feedback: str, context: Any) -> None:
    """Put the draft and the reviewer's feedback in the agent's conversation, to revise.

    On the ReAct path CrewAI leaves the draft out of the history
    (agents/agent_executor.py:2557-2629), so the agent would rewrite blind;
    put it back before the feedback.
    """
    messages = context.messages
    last = messages[-1] if messages else None
    if not (last and last.get("role") == "assistant" and answer.text in str(last["content"])):
        messages.append({"role": "assistant", "content": answer.text})
    messages.append(context._format_feedback_message(feedback))


@dataclass(frozen=True)
class Draft:
    """A draft as the reviewer sees it (``text``) and as CrewAI gets it if approved
    (``output``: a typed task's model instance, else the agent's answer)."""

    text: str
    output: Any
    model: type[BaseModel] | None = None
    problem: str | None = None  # a typed draft that does not fit its model: why

    @classmethod
    def of(cls, task: Any, output: Any) -> Draft:
        model = _output_model(task)
        if model is None:
            return cls(str(output), output)
        try:
            instance = _as_model(model, output)
        except ValidationError as exc:
            return cls(str(output), output, model, _summary(exc))
        shown = json.dumps(instance.model_dump(mode="json"), indent=2, ensure_ascii=False)
        return cls(shown, instance, model)


def _output_model(task: Any) -> type[BaseModel] | None:
    model = getattr(task, "output_pydantic", None) or getattr(task, "output_json", None)
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _as_model(model: type[BaseModel], output: Any) -> BaseModel:
    """The agent's answer as an instance of ``model``, read as CrewAI reads it: an instance
    (a provider's structured output), JSON, or JSON with text around it.

    Raises:
        ValidationError: it is none of those.
    """
    if isinstance(output, model):
        return output
    if isinstance(output, BaseModel):
        return model.model_validate(output.model_dump())
    text = str(output)
    try:
        return model.model_validate_json(text)
    except ValidationError:
        found = _JSON_IN_TEXT.search(text)
        if found is None or found.group() == text.strip():
            raise
        return model.model_validate_json(found.group())


def _summary(exc: ValidationError) -> str:
    """A pydantic refusal in one line: each field and what is wrong with it."""
    problems = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(step) for step in error["loc"]) or "(the output)"
        problems.append(f"{where}: {error['msg']}")
    return "; ".join(problems)


def _edited(task: Any, agent: Any, text: str) -> tuple[Any, str | None]:
    """The output a reviewer's edit makes, or why it cannot be taken: a typed task's model
    refuses it (a validator the schema cannot express), or a guardrail does."""
    edited: Any = text
    model = _output_model(task)
    if model is not None:
        try:
            edited = model.model_validate_json(text)
        except ValidationError as exc:
            return None, f"it does not fit {model.__name__}: {_summary(exc)}"
    refusal = guardrail_refusal(task, agent, edited)
    if refusal is not None:
        return None, f"the task's guardrail refused it: {refusal}"
    return edited, None


def _finish(answer: AgentFinish, output: Any) -> AgentFinish:
    if output is answer.output:
        return answer
    text = output.model_dump_json() if isinstance(output, BaseModel) else str(output)
    return AgentFinish(thought=answer.thought, output=output, text=text)


def _task_review(
    context: Any, stream: str, seq: int, draft: Draft, refused: str | None
) -> NewReview:
    task, model = context.task, draft.model
    schema = None
    if model is not None:
        # A field JSON cannot describe leaves the edit to be checked by the model on resume.
        with suppress(PydanticUserError):
            schema = model.model_json_schema()
    details = TaskReviewDetails(
        task=getattr(task, "name", None) or "",
        description=str(getattr(task, "description", "")),
        expected_output=str(getattr(task, "expected_output", "")),
        agent=getattr(context.agent, "role", ""),
        round=seq,
        output_model=None if model is None else model.__name__,
        output_schema=schema,
        output_problem=None if model is None else draft.problem,
        refused_edit=refused,
    )
    return NewReview(
        kind=ReviewKind.TASK_REVIEW, stream=stream, seq=seq, prompt=draft.text, details=details
    )
