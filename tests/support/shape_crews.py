"""Crews and flows of shapes users write, for ``tests/runtime/test_shapes_reasoning.py``,
``test_flow_pauses_quiet.py``, ``test_flow_outcomes.py`` and ``test_console_input.py``:
an agent that reasons before it works, flows whose steps pause inside crews, a
``@human_feedback`` with CrewAI's documented outcomes, and crews written for the console
(``input()`` in a flow step and in a tool). All on the scripted model; side effects go to
the effects file, as in ``tests/support/crews.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import warnings
from typing import Any

from crewai import Agent, Crew, Process, Task
from crewai.agent.planning_config import PlanningConfig
from crewai.flow import Flow, human_feedback, listen, or_, router, start
from crewai.tools import BaseTool
from pydantic import BaseModel

from crew_runtime import ask_human
from crew_runtime.offline.script import ScriptedReply
from crew_runtime.offline.scripted_llm import ScriptedLLM
from tests.support.crews import _append

READY = "READY: I am ready to execute the task."


class ReasoningLLM(ScriptedLLM):
    """The scripted model, answering CrewAI's reasoning prompts as a model would: a first
    plan it is not ready with, then a refined plan it is ready with (two model calls, as
    ``Agent(reasoning=True)`` makes on a model that refines once)."""

    def reply(self, messages: Any, response_model: Any = None, tools: Any = None) -> ScriptedReply:
        text = messages if isinstance(messages, str) else str(messages)
        if "Your previous plan:" in text:
            return ScriptedReply("final", f"1. Read the brief.\n2. Write.\n{READY}")
        if "Create an execution plan for the following task" in text:
            return ScriptedReply("final", "1. Read the brief.\nNOT READY: I need the angle.")
        return super().reply(messages, response_model, tools)


def reasoning(inputs: dict[str, str]) -> Crew:
    """One reviewed task whose agent reasons first: ``Agent(reasoning=True)`` (CrewAI
    warns that it is deprecated), or ``planning_config=PlanningConfig()`` (``how=config``),
    which it stands for."""
    how: dict[str, Any] = (
        {"planning_config": PlanningConfig()}
        if inputs.get("how") == "config"
        else {"reasoning": True}
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        agent = Agent(
            role="Writer",
            goal="Write clear notes",
            backstory="Plans before writing.",
            llm=ReasoningLLM(model="scripted/reasoned", label="Note"),
            verbose=False,
            **how,
        )
    task = Task(
        description="Write a note on {topic}",
        expected_output="A note",
        agent=agent,
        human_input=True,
    )
    return Crew(agents=[agent], tasks=[task], process=Process.sequential)


# -- flows whose crews pause


def _asking_crew(role: str, label: str) -> Crew:
    """A crew whose one agent asks a person first (``ask_human``), then answers."""
    agent = Agent(
        role=role,
        goal="Ask, then answer",
        backstory="Careful.",
        llm=ScriptedLLM(
            model=f"scripted/{label.lower()}",
            label=label,
            tool_plan=[("ask_human", {"question": "Which angle for {subject}?"})],
        ),
        tools=[ask_human],
        verbose=True,
    )
    task = Task(description="Write about {topic}", expected_output="A text", agent=agent)
    return Crew(agents=[agent], tasks=[task], process=Process.sequential, verbose=True)


class TopicState(BaseModel):
    topic: str = "otters"
    text: str = ""


class PlainStepFlow(Flow[TopicState]):
    """A crew in a plain step pauses (a question), as lead-score-flow's crews do."""

    @start()
    def write(self) -> str:
        out = _asking_crew("Writer", "Text").kickoff(inputs={"topic": self.state.topic})
        self.state.text = str(out)
        return str(out)


class GatheredFlow(Flow[TopicState]):
    """Crews gathered with ``asyncio.gather`` of ``kickoff_async`` in an async step, as
    lead-score-flow scores its leads; one of them pauses."""

    @start()
    async def score(self) -> str:
        crews = [_asking_crew("Scorer", "Score"), _plain_crew("Summary")]
        outs = await asyncio.gather(
            *(crew.kickoff_async(inputs={"topic": self.state.topic}) for crew in crews)
        )
        self.state.text = " | ".join(str(out) for out in outs)
        return self.state.text


def _plain_crew(label: str) -> Crew:
    agent = Agent(
        role="Summariser",
        goal="Summarise",
        backstory="Brief.",
        llm=ScriptedLLM(model=f"scripted/{label.lower()}", label=label),
        verbose=True,
    )
    task = Task(description="Summarise {topic}", expected_output="A line", agent=agent)
    return Crew(agents=[agent], tasks=[task], process=Process.sequential, verbose=True)


def plain_step_flow(inputs: dict[str, str]) -> PlainStepFlow:
    return PlainStepFlow()


def gathered_flow(inputs: dict[str, str]) -> GatheredFlow:
    return GatheredFlow()


# -- @human_feedback with CrewAI's documented outcomes


class DocState(BaseModel):
    topic: str = "otters"
    rounds: int = 0
    draft: str = ""


class CollapseLLM(ScriptedLLM):
    """A model for ``@human_feedback(llm=...)``: reads the reviewer's words in CrewAI's
    collapse prompt and answers with the outcome, as structured output."""

    def reply(self, messages: Any, response_model: Any = None, tools: Any = None) -> ScriptedReply:
        text = str(messages).lower()
        words = text.split("feedback:", 1)[-1]
        outcome = (
            "needs_revision"
            if any(w in words for w in ("again", "rework", "mention"))
            else "rejected"
            if "bin it" in words
            else "approved"
        )
        return ScriptedReply("final", json.dumps({"outcome": outcome}))


def _documented(llm: Any) -> type[Flow[DocState]]:
    """CrewAI's documented example: ``emit=["approved", "rejected", "needs_revision"]``,
    one listener per outcome; the ``needs_revision`` one is the step itself, drafting again
    (as CrewAI's self-evaluation loop does); ``llm`` reads a free reply."""

    class DocumentedFeedbackFlow(Flow[DocState]):
        @start()
        def begin(self) -> None:
            self.state.rounds = 0

        @listen(or_(begin, "needs_revision"))
        @human_feedback(
            message="Review this draft:",
            emit=["approved", "rejected", "needs_revision"],
            llm=llm,
        )
        def draft(self) -> str:
            last = self.last_human_feedback
            if last is not None:  # run again by the needs_revision outcome
                _append(
                    {"kind": "flow_outcome", "outcome": last.outcome, "feedback": last.feedback}
                    | {"pid": os.getpid()}
                )
            self.state.rounds += 1
            self.state.draft = f"Draft {self.state.rounds} on {self.state.topic}"
            return self.state.draft

        @listen("approved")
        def publish(self) -> str:
            _append({"kind": "flow_outcome", "outcome": "approved", "pid": os.getpid()})
            return f"PUBLISHED: {self.state.draft}"

        @listen("rejected")
        def handle_rejection(self) -> str:
            _append({"kind": "flow_outcome", "outcome": "rejected", "pid": os.getpid()})
            return f"DISCARDED: {self.state.draft}"

    return DocumentedFeedbackFlow


DocumentedFeedbackFlow = _documented("gpt-4o-mini")
ReadFeedbackFlow = _documented(CollapseLLM(model="scripted/collapse", label="Outcome"))


def read_feedback_flow(inputs: dict[str, str]) -> Flow[DocState]:
    return ReadFeedbackFlow()


def documented_feedback_flow(inputs: dict[str, str]) -> DocumentedFeedbackFlow:
    return DocumentedFeedbackFlow()


# -- crews written for the console


class ConsoleState(BaseModel):
    topic: str = ""
    angle: str = ""
    result: str = ""


class ConsoleFlow(Flow[ConsoleState]):
    """CrewAI's "Human Feedback in Flows" example asks its topic with ``input()`` in
    ``@start``; lead-score-flow's router asks the console what to do next."""

    @start()
    def ask_topic(self) -> None:
        self.state.topic = input("What topic should the crew write about? ").strip()
        _append({"kind": "console_topic", "topic": self.state.topic, "pid": os.getpid()})

    @router(ask_topic)
    def choose(self) -> str:
        answer = input(f"Write about {self.state.topic} now? (yes/no) ")
        return "write" if answer.strip().lower().startswith("y") else "stop"

    @listen("write")
    def write_story(self) -> str:
        crew = _console_tool_crew()
        out = crew.kickoff(inputs={"topic": self.state.topic})
        self.state.result = str(out)
        return str(out)

    @listen("stop")
    def stopped(self) -> str:
        return "stopped"


class ConsoleAngleInput(BaseModel):
    topic: str


class ConsoleAngleTool(BaseTool):
    """A tool written for the console: it asks the person at the keyboard."""

    name: str = "choose_angle"
    description: str = "Ask the person at the console which angle to take on a topic."
    args_schema: type[BaseModel] = ConsoleAngleInput

    def _run(self, topic: str) -> str:
        angle = input(f"Which angle on {topic}? ")
        _append({"kind": "console_angle", "angle": angle, "pid": os.getpid()})
        return f"angle: {angle}"


def _console_tool_crew() -> Crew:
    agent = Agent(
        role="Writer",
        goal="Write",
        backstory="Asks the console.",
        llm=ScriptedLLM(
            model="scripted/console",
            label="Story",
            tool_plan=[("choose_angle", {"topic": "{subject}"})],
        ),
        tools=[ConsoleAngleTool()],
        verbose=False,
    )
    task = Task(description="Write about {topic}", expected_output="A story", agent=agent)
    return Crew(agents=[agent], tasks=[task], process=Process.sequential)


def console_flow(inputs: dict[str, str]) -> ConsoleFlow:
    return ConsoleFlow()


def console_crew(inputs: dict[str, str]) -> Crew:
    """A plain crew whose tool calls ``input()``."""
    return _console_tool_crew()


def console_factory_crew(inputs: dict[str, str]) -> Crew:
    """A factory that asks the console before building its crew: nothing to ask there."""
    topic = input("Topic? ")
    crew = _console_tool_crew()
    crew.tasks[0].description += f" ({topic})"
    return crew
