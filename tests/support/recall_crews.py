"""Crews that recall: knowledge sources and memory, embedded by a local stand-in.

The embedder of each crew is the one named by the run's ``embedder`` input, the base URL of
``tests.support.embeddings_standin`` (CrewAI's OpenAI embedder, the real HTTP path), so a test
counts what reached the embedding provider.
"""

from __future__ import annotations

import os
from typing import Any

from crewai import Agent, Crew, Process, Task
from crewai.flow.flow import Flow, start
from crewai.knowledge.knowledge import Knowledge
from crewai.knowledge.source.string_knowledge_source import StringKnowledgeSource
from crewai.knowledge.storage.knowledge_storage import KnowledgeStorage
from crewai.memory.unified_memory import Memory
from crewai.tools import BaseTool
from pydantic import BaseModel

from crew_runtime.offline.scripted_llm import ScriptedLLM
from tests.support.crews import _append, _pause_point

FACTS = "Otters hold hands while they sleep, so that they do not drift apart."


def embedder(base_url: str) -> dict[str, Any]:
    """CrewAI's OpenAI embedder, sending every request to ``base_url``."""
    config = {"api_base": base_url, "model_name": "standin"}
    return {"provider": "openai", "config": config}


def knowing(inputs: dict[str, str]) -> Crew:
    """One task whose crew has a knowledge source, refused for ``refuse``: ``planning`` (no
    planning_llm, on a worker without an OpenAI key) or ``storage`` (its knowledge built
    with a storage of its own, which Countersign cannot journal)."""
    agent = Agent(
        role="Clerk",
        goal="File",
        backstory="Files.",
        llm=ScriptedLLM(model="scripted/clerk", label="Filed"),
        verbose=False,
    )
    task = Task(description="File {topic}", expected_output="A file", agent=agent)
    sources = [StringKnowledgeSource(content=FACTS)]
    extra: dict[str, Any] = {"planning": True, "knowledge_sources": sources}
    if inputs["refuse"] == "storage":
        storage = KnowledgeStorage(embedder=embedder(inputs["embedder"]), collection_name="own")
        extra = {"knowledge": Knowledge(collection_name="own", sources=sources, storage=storage)}
    return Crew(
        agents=[agent],
        tasks=[task],
        process=Process.sequential,
        embedder=embedder(inputs["embedder"]),
        **extra,
    )


class NoteInput(BaseModel):
    text: str


class NoteTool(BaseTool):
    name: str = "note"
    description: str = "Write a note in the clerk's notebook."
    args_schema: type[BaseModel] = NoteInput

    def _run(self, text: str) -> str:
        _append({"kind": "note", "text": text, "pid": os.getpid()})
        _pause_point("note")  # a test kills the worker here
        return f"noted {text}"


def remembering(inputs: dict[str, str]) -> Crew:
    """Memory and a knowledge source, on the crew (``on=crew``) or its agent (``on=agent``): a
    reviewed task (``review=off``: not reviewed, for plain CrewAI), then one that uses it;
    each takes a note (a tool call)."""
    llm = ScriptedLLM(
        model="scripted/clerk", label="Filed", tool_plan=[("note", {"text": "otters"})]
    )
    sources = [StringKnowledgeSource(content=FACTS)]
    on_agent = inputs.get("on", "crew") == "agent"
    recalls: dict[str, Any] = {
        "memory": True,
        "knowledge_sources": sources,
        "embedder": embedder(inputs["embedder"]),
    }
    if on_agent:  # an agent's memory=True would embed with OpenAI's default embedder
        recalls["memory"] = Memory(llm=llm, embedder=embedder(inputs["embedder"]))
    agent = Agent(
        role="Clerk",
        goal="File notes about animals",
        backstory="Files.",
        llm=llm,
        tools=[NoteTool()],
        verbose=False,
        **(recalls if on_agent else {}),
    )
    first = Task(
        description="File what is known about {topic}",
        expected_output="A file",
        agent=agent,
        human_input=inputs.get("review", "on") == "on",
    )
    second = Task(
        description="Summarise {topic} for the newsletter",
        expected_output="A summary",
        agent=agent,
        context=[first],
    )
    return Crew(
        agents=[agent],
        tasks=[first, second],
        process=Process.sequential,
        **({} if on_agent else recalls),
    )


class RememberingState(BaseModel):
    topic: str = ""
    embedder: str = ""


class RememberingFlow(Flow[RememberingState]):
    """A flow step that kicks off :func:`remembering` (memory and knowledge on the crew)."""

    @start()
    def file(self) -> str:
        crew = remembering({"embedder": self.state.embedder, "topic": self.state.topic})
        return crew.kickoff(inputs={"topic": self.state.topic}).raw


def remembering_flow(inputs: dict[str, str]) -> RememberingFlow:
    return RememberingFlow()
