"""Task guardrails under review: journaled LLM guardrails, and the check a draft passes first.

CrewAI runs a task's guardrails on the output ``agent.execute_task()`` returns, which is
after the ``human_input`` review: a reviewer would be shown drafts the guardrail then throws
away. Countersign checks a draft against the task's guardrails before it opens a review
(:func:`guardrail_refusal`); a draft that fails is handed back unreviewed, CrewAI's guardrail
fails it too and retries the agent with the guardrail's error, as it would without a review.
What the reviewer approves or edits then goes through the same guardrails, as CrewAI runs
them.

A string guardrail is CrewAI's ``LLMGuardrail``, which asks the model of the task's agent as
it was when the task was built (before the journal wrapped it). :func:`journal_guardrails`
puts that model behind the journal in a stream of its own, ``task{n}:guardrail{i}``, and
gives each verdict once per output text in an execution: the check before the review and
CrewAI's after it ask the model once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from crewai import Task
from crewai.tasks.llm_guardrail import LLMGuardrail
from crewai.tasks.task_output import TaskOutput
from pydantic import BaseModel

from crew_runtime import streams
from crew_runtime.context import RunContext
from crew_runtime.journal_llm import JournalLLM


class JournaledGuardrail(LLMGuardrail):
    """An ``LLMGuardrail`` whose model is journaled, remembering its verdict per output text."""

    def __init__(self, original: LLMGuardrail, llm: JournalLLM) -> None:
        super().__init__(description=original.description, llm=llm)
        self._verdicts: dict[str, tuple[bool, Any]] = {}

    def __call__(self, task_output: TaskOutput) -> tuple[bool, Any]:
        verdict = self._verdicts.get(task_output.raw)
        if verdict is None:
            verdict = self._verdicts[task_output.raw] = super().__call__(task_output)
        return verdict


def journal_guardrails(tasks: Sequence[Task], ctx: RunContext, prefix: str = "") -> None:
    """Put the model of every LLM guardrail of ``tasks`` behind the journal (the streams of a
    crew kicked off in a flow step are under its ``prefix``, as its tasks' are)."""
    for n, task in enumerate(tasks):
        task._guardrails = [
            _journaled(guardrail, ctx, streams.guardrail_stream(n, prefix, i))
            for i, guardrail in enumerate(task._guardrails)
        ]
        if task._guardrail is not None:
            task._guardrail = _journaled(task._guardrail, ctx, streams.guardrail_stream(n, prefix))


def _journaled(guardrail: Any, ctx: RunContext, stream: str) -> Any:
    if isinstance(guardrail, LLMGuardrail) and not isinstance(guardrail, JournaledGuardrail):
        return JournaledGuardrail(guardrail, JournalLLM.wrap(guardrail.llm, ctx, stream=stream))
    return guardrail


def guardrail_refusal(task: Any, agent: Any, output: Any) -> str | None:
    """Why the guardrails of ``task`` refuse ``output`` (text or a model instance, as the
    agent's answer would reach CrewAI), or None when every one passes. Each guardrail sees
    what the one before it made of the output, as in CrewAI."""
    guardrails = [*getattr(task, "_guardrails", []), getattr(task, "_guardrail", None)]
    guardrails = [g for g in guardrails if g is not None]
    if not guardrails:
        return None
    checked = task_output(task, agent, output)
    for guardrail in guardrails:
        passed, result = guardrail(checked)
        if not passed:
            return str(result)
        if isinstance(result, TaskOutput):
            checked = result
        elif isinstance(result, str):
            checked = checked.model_copy(update={"raw": result})
    return None


def task_output(task: Any, agent: Any, output: Any) -> TaskOutput:
    """The ``TaskOutput`` CrewAI builds from an answer before running the guardrails."""
    typed = output if isinstance(output, BaseModel) else None
    return TaskOutput(
        name=task.name or task.description,
        description=task.description,
        expected_output=task.expected_output,
        raw=typed.model_dump_json() if typed is not None else str(output),
        pydantic=typed if typed is not None and task.output_pydantic else None,
        json_dict=typed.model_dump() if typed is not None and task.output_json else None,
        agent=getattr(agent, "role", ""),
        output_format=task._get_output_format(),
    )
