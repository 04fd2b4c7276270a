"""Crews for ``bench/ack_latency.py``: real CrewAI crews on the scripted LLM.

``countersign serve`` loads them by name (``ack_crews:busy``, ``ack_crews:review``) with
``bench/`` on ``PYTHONPATH``; nothing here talks to a network.

- :func:`busy` keeps one worker thread executing for a long time: one task whose agent
  makes ``steps`` tool calls (every call a real CrewAI ReAct turn: prompt built, reply
  parsed, tool run, turn journaled in the database), then a human review at the very end,
  so the run stays ``running`` for the whole measurement. Two kinds of load:

  * ``load=cpu`` (the worst case for the event loop): the model answers at once and the
    ``crunch`` tool spins pure Python for ``crunch_ms``, so the thread holds the GIL
    except when CrewAI or the database releases it.
  * ``load=io`` (what real crews mostly do): the model "thinks" ``think`` seconds per turn
    with ``time.sleep`` (a provider's latency; the GIL is free meanwhile) and the tool
    is instant.

- :func:`review` reaches a task review on its first turn, so the bot posts a review
  message with buttons that the benchmark's clicks can target.
"""

from __future__ import annotations

import time

from crewai import Agent, Crew, Process, Task
from crewai.tools import BaseTool
from pydantic import BaseModel

from crew_runtime.offline.scripted_llm import ScriptedLLM

__all__ = ["CrunchTool", "busy", "review"]


class CrunchInput(BaseModel):
    step: str
    ms: str


class CrunchTool(BaseTool):
    """Spins pure Python for ``ms`` milliseconds: CPU work that holds the GIL."""

    name: str = "crunch"
    description: str = "Crunch numbers for one step of the analysis."
    args_schema: type[BaseModel] = CrunchInput

    def _run(self, step: str, ms: str) -> str:
        deadline = time.perf_counter() + float(ms) / 1000.0
        total = 0
        while time.perf_counter() < deadline:
            for i in range(500):
                total += i * i
        return f"step {step}: crunched ({total % 97})"


def busy(inputs: dict[str, str]) -> Crew:
    """``steps`` tool-calling turns, then a task review: a long-running, busy run.

    Inputs (all optional): ``steps`` (default 400), ``load`` (``cpu`` or ``io``, default
    ``cpu``), ``crunch_ms`` (default 20, cpu load), ``think`` (seconds, default 0.2, io load).
    """
    steps = int(inputs.get("steps", "400"))
    load = inputs.get("load", "cpu")
    crunch_ms = inputs.get("crunch_ms", "20") if load == "cpu" else "0"
    think = float(inputs.get("think", "0.2")) if load == "io" else 0.0
    llm = ScriptedLLM(
        model=f"scripted/busy-{load}",
        label="Analysis",
        tool_plan=[("crunch", {"step": "{step}", "ms": crunch_ms})] * steps,
        delay=think,
    )
    agent = Agent(
        role="Analyst",
        goal="Analyse the data step by step",
        backstory="Patient and thorough.",
        llm=llm,
        tools=[CrunchTool()],
        max_iter=steps + 5,
        verbose=False,
    )
    task = Task(
        description="Analyse {topic}",
        expected_output="An analysis",
        agent=agent,
        human_input=True,
    )
    return Crew(agents=[agent], tasks=[task], process=Process.sequential)


def review(inputs: dict[str, str]) -> Crew:
    """One reviewed task answered on the first turn: a review message with buttons."""
    agent = Agent(
        role="Writer",
        goal="Write short notes",
        backstory="Brief.",
        llm=ScriptedLLM(model="scripted/review", label="Note"),
        verbose=False,
    )
    task = Task(
        description="Write a note on {topic}",
        expected_output="A note",
        agent=agent,
        human_input=True,
    )
    return Crew(agents=[agent], tasks=[task], process=Process.sequential)
