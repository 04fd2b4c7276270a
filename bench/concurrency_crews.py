"""The crew of ``bench/concurrency.py``: three agents on CrewAI's real OpenAI provider.

Each agent is ``LLM(model="openai/gpt-4o-mini")``, sent by the worker's environment to the
benchmark's stand-in of the API (``tests/support/openai_standin.py``), which answers every
call after a fixed delay: HTTP, the ``openai`` SDK and the provider's own parsing run on every
call. Each of the three tasks makes ``lookups`` native tool calls (default 3) and a final
answer, the last task's reviewed by a person (``human_input=True``): 12 LLM calls and 9 tool
calls a run.
"""

from __future__ import annotations

from _common import LookupTool
from crewai import LLM, Agent, Crew, Process, Task

from tests.support.openai_standin import ModelScript

MODEL = "gpt-4o-mini"


def scripts(lookups: int) -> dict[str, ModelScript]:
    """What the stand-in answers: ``lookups`` tool calls in each task, then the answer."""
    plan = [("lookup", {"query": "{subject} #{step}"})] * lookups
    return {MODEL: ModelScript(label="Report", tool_plan=plan)}


def team(inputs: dict[str, str]) -> Crew:
    """Researcher, writer, editor: a task each, every one with the lookup tool; the editor's
    task is reviewed."""
    agents = [
        Agent(
            role=role,
            goal="Do your part of the report",
            backstory="Careful.",
            llm=LLM(model=f"openai/{MODEL}"),
            tools=[LookupTool()],
            verbose=False,
        )
        for role in ("Researcher", "Writer", "Editor")
    ]
    tasks: list[Task] = []
    for n, agent in enumerate(agents):
        tasks.append(
            Task(
                description=f"Step {n + 1} of a report on {{topic}}",
                expected_output="A text",
                agent=agent,
                context=list(tasks),
                human_input=n == len(agents) - 1,
            )
        )
    return Crew(agents=agents, tasks=tasks, process=Process.sequential, verbose=False)
