"""A crew project as ``crewai create crew newsroom`` lays it out, registered with Countersign.

Agents and tasks come from ``config/agents.yaml`` and ``config/tasks.yaml``; the YAML names
the researcher's model as a provider string and the editor's as the ``@llm`` method
``house_model``, and its tools as ``@tool`` methods. ``countersign.toml`` names
``newsroom.crew:factory``, with ``src/`` on the worker's import path, as an installed
project has it.
"""

from __future__ import annotations

from typing import Any

from crewai import LLM, Agent, Crew, Process, Task
from crewai.agents.agent_builder.base_agent import BaseAgent
from crewai.project import CrewBase, agent, before_kickoff, crew, llm, task, tool
from crewai.tools import BaseTool

from countersign import ask_human as ask_a_person
from tests.support.crews import SearchTool


@CrewBase
class Newsroom:
    """Research a topic (asking an editor when unsure), then write a reviewed report."""

    agents: list[BaseAgent]
    tasks: list[Task]

    @llm
    def house_model(self) -> LLM:
        return LLM(model="openai/gpt-4o-mini", stream=True)

    @tool
    def search(self) -> BaseTool:
        return SearchTool()

    @tool
    def ask_human(self) -> BaseTool:
        return ask_a_person

    @before_kickoff
    def default_desk(self, inputs: dict[str, Any]) -> dict[str, Any]:
        inputs.setdefault("desk", "Science")
        return inputs

    @agent
    def researcher(self) -> Agent:
        return Agent(config=self.agents_config["researcher"], verbose=True)  # type: ignore[index]

    @agent
    def editor(self) -> Agent:
        return Agent(config=self.agents_config["editor"], verbose=True)  # type: ignore[index]

    @task
    def research_task(self) -> Task:
        return Task(config=self.tasks_config["research_task"])  # type: ignore[index]

    @task
    def report_task(self) -> Task:
        return Task(config=self.tasks_config["report_task"])  # type: ignore[index]

    @crew
    def crew(self) -> Crew:
        return Crew(agents=self.agents, tasks=self.tasks, process=Process.sequential, verbose=True)


def factory(inputs: dict[str, str]) -> Crew:
    """What ``countersign.toml`` names: a fresh crew for each execution of a run."""
    return Newsroom().crew()
