"""CrewAI Flows whose steps kick off crews, for the tests: real flows, real crews, the
scripted model.

Each crew is built afresh in its step, as CrewAI's examples do. The side effects are the
tools of tests.support.crews (``search``, ``publish``), recorded in the effects file; a flow
step's own code runs again whenever the flow is replayed, so it records nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from crewai import Agent, Crew, Process, Task
from crewai.flow import Flow, human_feedback, listen, or_, router, start
from crewai.tools import BaseTool
from pydantic import BaseModel

from crew_runtime import ask_human, requires_approval
from crew_runtime.offline.scripted_llm import ScriptedLLM
from tests.support.crews import PublishTool, SearchTool, _pause_point


def _crew(
    role: str,
    description: str,
    *,
    plan: list[Any] | None = None,
    tools: list[BaseTool] | None = None,
    reviewed: bool = False,
) -> Crew:
    """One agent, one task; the agent's model is ``scripted/<role, lower case>``."""
    agent = Agent(
        role=role,
        goal=f"{role} work",
        backstory=f"A {role.lower()}.",
        llm=ScriptedLLM(model=f"scripted/{role.lower()}", label=role, tool_plan=plan or []),
        tools=tools or [],
        verbose=False,
    )
    task = Task(
        description=description,
        expected_output=f"The {role.lower()}'s text",
        agent=agent,
        human_input=reviewed,
    )
    return Crew(agents=[agent], tasks=[task], process=Process.sequential)


def _publisher(gated: bool) -> Crew:
    tool: BaseTool = requires_approval(PublishTool()) if gated else PublishTool()
    return _crew(
        "Publisher",
        "Publish the post on {topic}",
        plan=[("publish", {"text": "Post: {subject}"})],
        tools=[tool],
    )


def _researcher() -> Crew:
    """Searches once (a side effect: the search records each call)."""
    plan = [("search", {"query": "{subject}"})]
    return _crew("Researcher", "Research {topic}", plan=plan, tools=[SearchTool()])


class LoopState(BaseModel):
    topic: str = ""
    pauses: str = "yes"
    draft: str = ""
    feedback: str = "none"
    attempts: int = 0


class SelfEvaluationFlow(Flow[LoopState]):
    """CrewAI's self-evaluation loop example: a crew writes, a router has another crew
    judge it and loops back with the critique until it passes (here: on the second
    attempt), then a crew publishes. With ``pauses=yes`` the first writer asks a person
    (``ask_human``) and publishing is gated."""

    @start("retry")
    def write(self) -> None:
        self.state.attempts += 1
        _pause_point(f"write{self.state.attempts}")
        asks = self.state.pauses == "yes" and self.state.attempts == 1
        plan = [("ask_human", {"question": "Which angle on {subject}?"})] if asks else []
        crew = _crew(
            "Writer", "Write a post on {topic} (critique: {feedback})", plan=plan, tools=[ask_human]
        )
        inputs = {"topic": self.state.topic, "feedback": self.state.feedback}
        self.state.draft = crew.kickoff(inputs=inputs).raw

    @router(write)
    def evaluate(self) -> str:
        critic = _crew("Critic", "Judge this post: {draft}")
        self.state.feedback = critic.kickoff(inputs={"draft": self.state.draft}).raw
        return "retry" if self.state.attempts < 2 else "complete"

    @listen("complete")
    def publish(self) -> str:
        published = _publisher(self.state.pauses == "yes").kickoff(inputs={"topic": "otters"})
        return f"{self.state.draft}\n{published.raw}"


class FanOutState(BaseModel):
    topic: str = ""
    facts: str = ""
    angle: str = ""


class FanOutFlow(Flow[FanOutState]):
    """An async step runs two crews side by side (``kickoff_async`` and ``akickoff``; the
    second asks a person), then a step publishes on two topics with ``kickoff_for_each``,
    each publication gated."""

    @start()
    async def research(self) -> None:
        researcher = _researcher()
        strategist = _crew(
            "Strategist",
            "Choose an angle on {topic}",
            plan=[("ask_human", {"question": "Which angle on {subject}?"})],
            tools=[ask_human],
        )
        inputs = {"topic": self.state.topic}
        facts, angle = await asyncio.gather(
            researcher.kickoff_async(inputs=inputs), strategist.akickoff(inputs=inputs)
        )
        self.state.facts, self.state.angle = facts.raw, angle.raw

    @listen(research)
    def fan_out(self) -> str:
        outputs = _publisher(gated=True).kickoff_for_each([{"topic": "otters"}, {"topic": "seals"}])
        return "\n".join([self.state.facts, self.state.angle, *(o.raw for o in outputs)])


class ReviewedState(BaseModel):
    topic: str = ""
    notes: str = ""
    outline: str = ""


class ReviewedFlow(Flow[ReviewedState]):
    """Both kinds of review in one run: the flow's own ``@human_feedback`` on an outline
    (a crew writes it; "revise" loops back to it with the reviewer's words), then a crew
    whose task has ``human_input=True``."""

    @start()
    def research(self) -> None:
        self.state.notes = _researcher().kickoff(inputs={"topic": self.state.topic}).raw

    @listen(or_(research, "revise"))
    @human_feedback(message="Is this outline right?", emit=["approved", "revise"])
    def outline(self) -> str:
        feedback = self.last_human_feedback.feedback if self.last_human_feedback else "none"
        crew = _crew("Outliner", "Outline {topic} (feedback: {feedback})")
        self.state.outline = crew.kickoff(
            inputs={"topic": self.state.topic, "feedback": feedback}
        ).raw
        return self.state.outline

    @listen("approved")
    def write(self) -> str:
        crew = _crew("Editor", "Write the article on {topic} from: {outline}", reviewed=True)
        return crew.kickoff(inputs={"topic": self.state.topic, "outline": self.state.outline}).raw


class AsyncReviewedFlow(Flow[ReviewedState]):
    """A crew with a ``human_input`` task, kicked off with ``akickoff()``: reviewed through the
    provider's async path."""

    @start()
    async def write(self) -> str:
        crew = _crew("Editor", "Write the article on {topic}", reviewed=True)
        return (await crew.akickoff(inputs={"topic": self.state.topic})).raw


def _factory(flow: type[Flow[Any]]) -> Callable[[dict[str, str]], Flow[Any]]:
    """A factory for the configuration: a new flow per run, whatever the inputs."""
    return lambda inputs: flow()


self_evaluation = _factory(SelfEvaluationFlow)
fan_out = _factory(FanOutFlow)
reviewed = _factory(ReviewedFlow)
async_reviewed = _factory(AsyncReviewedFlow)
