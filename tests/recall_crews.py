"""Crews that recall: knowledge sources and memory, embedded by a local stand-in.

The embedder of each crew is the one named by the run's ``embedder`` input, the base URL of
``tests.embeddings_standin`` (CrewAI's OpenAI embedder, the real HTTP path), so a test counts
what reached the embedding provider.
"""

from __future__ import annotations

from typing import Any

from crewai import Agent, Crew, Process, Task
from crewai.knowledge.source.string_knowledge_source import StringKnowledgeSource

from crew_runtime.offline.scripted_llm import ScriptedLLM

FACTS = "Otters hold hands while they sleep, so that they do not drift apart."


def embedder(base_url: str) -> dict[str, Any]:
    """CrewAI's OpenAI embedder, sending every request to ``base_url``."""
    config = {"api_base": base_url, "model_name": "standin"}
    return {"provider": "openai", "config": config}


def knowing(inputs: dict[str, str]) -> Crew:
    """One task whose crew (``on=crew``) or agent (``on=agent``) has a knowledge source."""
    sources = [StringKnowledgeSource(content=FACTS)]
    on_agent = inputs.get("on") == "agent"
    own = {"knowledge_sources": sources, "embedder": embedder(inputs["embedder"])}
    agent = Agent(
        role="Clerk",
        goal="File",
        backstory="Files.",
        llm=ScriptedLLM(model="scripted/clerk", label="Filed"),
        verbose=False,
        **(own if on_agent else {}),
    )
    task = Task(description="File {topic}", expected_output="A file", agent=agent)
    crew_extra: dict[str, Any] = {} if on_agent else {"knowledge_sources": sources}
    return Crew(
        agents=[agent],
        tasks=[task],
        process=Process.sequential,
        embedder=embedder(inputs["embedder"]),
        **crew_extra,
    )
