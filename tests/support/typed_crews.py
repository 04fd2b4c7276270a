"""Crews for typed task outputs and guardrails under review (``tests/runtime/test_typed.py``).

``typed``: an outliner whose reviewed task outputs an :class:`Outline` (``output=pydantic``,
the default, or ``output=json``; ``output=text`` for none), then an editor writing the article
from it (not reviewed). ``tools=yes`` gives the outliner a search first (``native=yes``: as a
native tool call); its answer is then text, not structured output. ``guard=function`` or
``guard=llm`` puts a guardrail on the outline, a function or a string description (CrewAI's
``LLMGuardrail``, which asks the outliner's own model): both apply :func:`verdict`. Every
``TaskOutput`` of the outline CrewAI settles on is written to the effects file (``outline``).
"""

from __future__ import annotations

import json
import re
from contextlib import suppress
from typing import Any

from crewai import Agent, Crew, Process, Task
from crewai.tasks.llm_guardrail import LLMGuardrailResult
from crewai.tasks.task_output import TaskOutput
from pydantic import BaseModel, field_validator

from crew_runtime.offline.drafts import parse_draft
from crew_runtime.offline.script import ScriptedReply
from crew_runtime.offline.scripted_llm import ScriptedLLM
from tests.support.crews import SearchTool, _append

CONFIG = """
[crews.typed]
factory = "tests.support.typed_crews:typed"
description = "A typed outline, reviewed, then an article from it"
"""

FIRST_ATTEMPT = "cite your sources"
TODO = "the outline still has a TODO"


class Outline(BaseModel):
    """The outline's output type; a blank headline is refused by code, not by the schema."""

    headline: str
    sections: int

    @field_validator("headline")
    @classmethod
    def _not_blank(cls, headline: str) -> str:
        if not headline.strip():
            raise ValueError("the headline is blank")
        return headline


def verdict(raw: str) -> tuple[bool, str]:
    """The guardrail: no TODO anywhere, and a scripted draft must have been written after the
    guardrail's first refusal (CrewAI retries with it as context). A person's text passes."""
    text = raw
    with suppress(ValueError, TypeError, KeyError):
        text = str(json.loads(raw)["headline"])
    if "TODO" in text:
        return False, TODO
    try:
        draft = parse_draft(text)
    except ValueError:
        return True, raw
    if FIRST_ATTEMPT not in (draft.context or ""):
        return False, FIRST_ATTEMPT
    return True, raw


def checked(output: TaskOutput):  # type: ignore[no-untyped-def]
    """The function guardrail. Unannotated: CrewAI compares the annotation with
    ``Tuple[bool, Any]``, and this module's annotations are strings."""
    return verdict(output.raw)


_TASK_RESULT = re.compile(r"Task result:\n(?P<raw>.*?)\n\s*Guardrail:", re.DOTALL)


class JudgingLLM(ScriptedLLM):
    """The scripted model, answering an ``LLMGuardrail``'s question with :func:`verdict`; those
    calls are logged with ``reply_kind`` ``"verdict"``."""

    def reply(
        self,
        messages: Any,
        response_model: type[BaseModel] | None = None,
        tools: Any = None,
    ) -> ScriptedReply:
        if response_model is not LLMGuardrailResult:
            return super().reply(messages, response_model, tools)
        found = _TASK_RESULT.search(str(messages[-1]["content"]))
        assert found is not None, "not CrewAI's guardrail prompt"
        valid, feedback = verdict(found["raw"].strip())
        answer = {"valid": valid, "feedback": None if valid else feedback}
        return ScriptedReply("verdict", json.dumps(answer))  # type: ignore[arg-type]


def _record(output: TaskOutput) -> None:
    pydantic = output.pydantic.model_dump() if output.pydantic is not None else None
    _append({"kind": "outline", "raw": output.raw, "pydantic": pydantic, "json": output.json_dict})


def typed(inputs: dict[str, str]) -> Crew:
    tools = inputs.get("tools") == "yes"
    outliner = Agent(
        role="Outliner",
        goal="Outline articles",
        backstory="Structured.",
        llm=JudgingLLM(
            model="scripted/outline-1",
            label="Outline",
            native=inputs.get("native") == "yes",
            tool_plan=[("search", {"query": "{subject}"})] if tools else [],
        ),
        tools=[SearchTool()] if tools else [],
        verbose=False,
    )
    editor = Agent(
        role="Editor",
        goal="Write articles",
        backstory="Writes.",
        llm=ScriptedLLM(model="scripted/article-1", label="Article"),
        verbose=False,
    )
    guard = inputs.get("guard")
    outline = Task(
        description="Outline {topic}",
        expected_output="An outline",
        agent=outliner,
        human_input=True,
        callback=_record,
        guardrail_max_retries=2,
        guardrail=checked if guard == "function" else "No TODO; sources cited." if guard else None,
    )
    output = inputs.get("output", "pydantic")
    if output == "pydantic":
        outline.output_pydantic = Outline
    elif output == "json":
        outline.output_json = Outline
    article = Task(
        description="Write the article about {topic}",
        expected_output="An article",
        agent=editor,
        context=[outline],
    )
    return Crew(agents=[outliner, editor], tasks=[outline, article], process=Process.sequential)
