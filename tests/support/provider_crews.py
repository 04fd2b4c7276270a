"""Crews on CrewAI's real OpenAI provider, for the tests against its stand-in
(``tests/support/openai_standin.py``).

Each agent is built the way users build theirs, ``LLM(model="openai/<name>")``, and the
worker's environment (``OPENAI_BASE_URL``, ``OPENAI_API_KEY``) sends its calls to the
stand-in. Inputs choose the model (``model``: ``gpt-4o-mini`` calls tools natively,
``o1-mini`` is a model CrewAI drives in ReAct text) and ``stream=yes`` streams its answers;
``crew_stream=yes`` makes the research crew a streaming one (``Crew(stream=True)``), and
``structured`` asks the writer's outline for structured output: ``task`` through the task
(``output_pydantic``), ``llm`` through the model (``LLM(response_format=...)``).
"""

from __future__ import annotations

from typing import Any

from crewai import LLM, Agent, Crew, Process, Task
from pydantic import BaseModel

from crew_runtime import ask_human, requires_approval
from tests.support.crews import PayTool, PublishTool, SearchTool
from tests.support.openai_standin import ModelScript

# What every model of the stand-in does, in each round: the steps whose tool an agent does
# not have are skipped, so one plan serves every crew below.
PLAN = [
    ("search", {"query": "{subject}"}),
    ("ask_human", {"question": "Formal or casual tone for {subject}?"}),
    ("publish", {"text": "Report on {subject}"}),
    ("pay", {"amount": 1500, "to": "ACME"}),
]

# The models a test's stand-in serves; o1-mini's ReAct replies run on past the action, as a
# model's do when no stop sequence is sent (CrewAI cuts them on its side).
SCRIPTS = {
    "gpt-4o-mini": ModelScript(label="Report", tool_plan=PLAN),
    "o1-mini": ModelScript(label="Report", tool_plan=PLAN, runs_on=True),
}

CONFIG = """
[crews.provider_research]
factory = "tests.support.provider_crews:research"
description = "Searches, asks a human, publishes; on the OpenAI provider"

[crews.provider_payments]
factory = "tests.support.provider_crews:payments"
description = "Pays ACME, gated; on the OpenAI provider"

[crews.provider_writer]
factory = "tests.support.provider_crews:writer"
description = "Outline then article, both reviewed; on the OpenAI provider"
"""


def _llm(inputs: dict[str, str], **options: Any) -> LLM:
    """``provider`` (default ``openai``) picks CrewAI's native provider: ``anthropic``,
    ``gemini``, or ``litellm`` (the OpenAI model through CrewAI's LiteLLM path)."""
    provider = inputs.get("provider", "openai")
    model = (
        f"{'openai' if provider == 'litellm' else provider}/{inputs.get('model', 'gpt-4o-mini')}"
    )
    stream = inputs.get("stream") == "yes"
    return LLM(model=model, stream=stream, is_litellm=provider == "litellm", **options)


def research(inputs: dict[str, str]) -> Crew:
    """One task: search, ask a human, publish; ``crew_stream=yes`` streams the crew."""
    researcher = Agent(
        role="Researcher",
        goal="Research and publish",
        backstory="Thorough.",
        llm=_llm(inputs),
        tools=[SearchTool(), ask_human, PublishTool()],
        verbose=False,
    )
    task = Task(description="Research {topic}", expected_output="A report", agent=researcher)
    return Crew(
        agents=[researcher],
        tasks=[task],
        process=Process.sequential,
        stream=inputs.get("crew_stream") == "yes",
    )


def payments(inputs: dict[str, str]) -> Crew:
    """One task: pay ACME 1500, a call that waits for a reviewer's approval."""
    clerk = Agent(
        role="Clerk",
        goal="Pay suppliers",
        backstory="Careful with money.",
        llm=_llm(inputs),
        tools=[requires_approval(PayTool())],
        verbose=False,
    )
    task = Task(description="Pay ACME", expected_output="A receipt", agent=clerk)
    return Crew(agents=[clerk], tasks=[task], process=Process.sequential)


class Outline(BaseModel):
    """The writer's outline as structured output."""

    headline: str
    sections: int


def writer(inputs: dict[str, str]) -> Crew:
    """Two reviewed tasks without tools (CrewAI's text path), the second on the first; with
    ``structured`` the outline is an :class:`Outline`, asked of the model as structured output
    (``response_format``)."""
    structured = inputs.get("structured")
    outliner = _llm(inputs, response_format=Outline) if structured == "llm" else _llm(inputs)
    agents = [
        Agent(role="Writer", goal="Write", backstory="Writes.", llm=outliner, verbose=False),
        Agent(role="Editor", goal="Write", backstory="Writes.", llm=_llm(inputs), verbose=False),
    ]
    outline = Task(description="Outline {topic}", expected_output="An outline", agent=agents[0])
    article = Task(
        description="Write the article about {topic}",
        expected_output="An article",
        agent=agents[1],
        context=[outline],
    )
    if structured == "task":
        outline.output_pydantic = Outline
    outline.human_input = article.human_input = True
    return Crew(agents=agents, tasks=[outline, article], process=Process.sequential)
