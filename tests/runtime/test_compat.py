"""What keeps Countersign working across CrewAI releases and providers, tested without a
process: the supported range, and the check that a replayed tool-call turn reads as one."""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pydantic
import pytest
from crewai import Agent, Crew, Process, Task

from crew_runtime.compat import agent_executor, install
from crew_runtime.offline.scripted_llm import ScriptedLLM
from crew_runtime.shapes import TurnUnreadable, check_readable

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = ROOT / "pyproject.toml"
MAKEFILE = ROOT / "Makefile"


def test_a_list_crewai_does_not_read_as_tool_calls_is_refused() -> None:
    """The check itself: Gemini's Part as a plain dict is what CrewAI read as no tool call."""
    part = {"function_call": {"name": "pay", "args": {"amount": 1}}, "text": None}
    with pytest.raises(TurnUnreadable, match="does not read as tool calls"):
        check_readable([part], None, "LLM turn 0 of task0:Clerk")
    call = {"id": "c1", "type": "function", "function": {"name": "pay", "arguments": "{}"}}
    check_readable([call], [call], "LLM turn 0 of task0:Clerk")


def test_the_supported_range_holds_the_release_ci_pins() -> None:
    """pyproject.toml's CrewAI range holds the release CI pins, ``make compat`` starts at its
    lowest release, and the CrewAI running these tests is inside it."""
    low, below = re.search(r'"crewai>=([0-9.]+),<([0-9.]+)"', PYPROJECT.read_text()).groups()
    makefile = MAKEFILE.read_text()
    ci = re.search(r"^CREWAI_CI := ([0-9.]+)$", makefile, re.MULTILINE).group(1)
    versions = re.search(r"^COMPAT_VERSIONS \?= (.+)$", makefile, re.MULTILINE).group(1).split()
    assert _key(low) <= _key(ci) < _key(below)
    assert versions[0] == low and versions[-1] == "newest"
    assert _key(low) <= _key(importlib.metadata.version("crewai")) < _key(below)


def test_the_default_agent_executor_is_found_wherever_the_release_keeps_it() -> None:
    assert isinstance(agent_executor.AgentExecutor, type)
    assert callable(agent_executor.handle_unknown_error)  # what crew_runtime.quiet wraps
    crewai = _key(importlib.metadata.version("crewai"))
    # What crew_runtime.snapshot wraps, from the release that counts repeated calls.
    assert hasattr(agent_executor, "check_repeated_tool_call") == (crewai >= (1, 15, 29))


@pytest.mark.slow
def test_crews_on_the_litellm_path_build_in_several_threads_at_once() -> None:
    """CrewAI's lazy LiteLLM import marks itself done before it is; the shim makes the
    threads of a fresh process (a worker's) wait for it instead of failing."""
    code = (
        "import threading, crew_runtime.journal_llm\n"
        "from crewai import LLM\n"
        "errors = []\n"
        "def build():\n"
        "    try: LLM(model='openai/gpt-4o-mini', is_litellm=True)\n"
        "    except Exception as exc: errors.append(repr(exc))\n"
        "threads = [threading.Thread(target=build) for _ in range(4)]\n"
        "[t.start() for t in threads]; [t.join() for t in threads]\n"
        "print(errors)\n"
    )
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=240
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.slow
def test_an_executors_flow_definition_is_built_once_in_several_threads_at_once() -> None:
    """CrewAI builds a Flow class's definition on first use, walking the class's ``__dict__``
    while another thread may store its own there; the shim builds each one at a time. Sixteen
    threads of a fresh process ask for the default executor's at once: one build, one
    definition, no error."""
    code = (
        "import threading, crew_runtime.journal_llm\n"
        "import crewai.flow.runtime as runtime\n"
        "from crew_runtime.compat import agent_executor\n"
        "built = []\n"
        "original = runtime.build_flow_definition\n"
        "def counted(cls):\n"
        "    built.append(cls)\n"
        "    return original(cls)\n"
        "runtime.build_flow_definition = counted\n"
        "executor = agent_executor.AgentExecutor\n"
        "start = threading.Barrier(16)\n"
        "found, errors = [], []\n"
        "def ask():\n"
        "    start.wait()\n"
        "    try: found.append(executor.flow_definition())\n"
        "    except Exception as exc: errors.append(repr(exc))\n"
        "threads = [threading.Thread(target=ask) for _ in range(16)]\n"
        "[t.start() for t in threads]; [t.join() for t in threads]\n"
        "print(errors, len(built), len({id(d) for d in found}))\n"
    )
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=240
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[] 1 1"


def test_an_executors_state_is_dumped_as_crewai_would_without_its_deep_copy() -> None:
    """CrewAI deep-copies an executor's state (its conversation) to dump it for the event its
    flow's end emits; the shim dumps it directly, to the same JSON."""
    install()  # as crew_runtime.journal_llm does on import
    agent = Agent(
        role="Summariser",
        goal="Summarise",
        backstory="Brief.",
        llm=ScriptedLLM(model="scripted/compat", label="Compat"),
    )
    task = Task(description="Summarise otters", expected_output="A line", agent=agent)
    Crew(agents=[agent], tasks=[task], process=Process.sequential).kickoff()
    executor = agent.agent_executor
    assert isinstance(executor, agent_executor.AgentExecutor)
    assert len(executor.state.messages) >= 2  # a conversation to copy
    dump = type(executor)._copy_and_serialize_state
    assert getattr(dump, "__countersign_shim__", False)
    assert dump(executor) == dump.__wrapped__(executor)


def test_every_executor_gets_a_state_of_its_own_from_one_state_class() -> None:
    """CrewAI declares a new class for every agent executor's initial state (pydantic builds
    its schema each time: ~5 ms an executor); the shim declares it once and still gives each
    executor a fresh state with its own id, and the crew runs as before."""
    install()  # as crew_runtime.journal_llm does on import
    agents = [
        Agent(
            role=f"Writer {n}",
            goal="Write",
            backstory="Brief.",
            llm=ScriptedLLM(model="scripted/compat", label="Compat"),
        )
        for n in range(2)
    ]
    tasks = [
        Task(description=f"Line {n} about otters", expected_output="A line", agent=agent)
        for n, agent in enumerate(agents)
    ]
    Crew(agents=agents, tasks=tasks, process=Process.sequential).kickoff()
    first, second = (agent.agent_executor for agent in agents)
    create = type(first)._create_initial_state
    assert getattr(create, "__countersign_shim__", False)
    assert first.state.messages and second.state.messages
    assert first.state.messages != second.state.messages  # each its own task's conversation
    made = [create(first), create(second), create(first)]
    assert len({type(state) for state in made}) == 1
    assert all(isinstance(state, agent_executor.AgentExecutorState) for state in made)
    assert len({state.id for state in made}) == 3 and all(state.id for state in made)
    made[0].messages.append({"role": "user", "content": "only mine"})
    assert made[1].messages == [] and made[2].messages == []
    assert made[0].model_dump().keys() == create.__wrapped__(first).model_dump().keys()


def test_models_built_on_first_use_are_built_once_in_several_threads_at_once() -> None:
    """pydantic (before 2.13) rebuilds a deferred model in whichever thread instantiates it
    first, and two rebuilding at once leave a third thread with the parent's validator
    ("BaseModel cannot be instantiated directly"): OpenAI's and LiteLLM's response types, in a
    fresh worker's first concurrent answers. Eight threads instantiate each of 150 new deferred
    models at once, switching every microsecond; without the shim about one model in ten
    fails."""
    install()  # as crew_runtime.journal_llm does on import
    errors: list[str] = []
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for _ in range(150):
            model = pydantic.create_model(
                "Deferred",
                __config__=pydantic.ConfigDict(defer_build=True),
                a=(int, 1),
                b=(str, "x"),
                c=(list[int], []),
            )
            start = threading.Barrier(8)
            threads = [
                threading.Thread(target=_instantiate, args=(model, start, errors)) for _ in range(8)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert errors == []


def _instantiate(
    model: type[pydantic.BaseModel], start: threading.Barrier, errors: list[str]
) -> None:
    start.wait()
    try:
        for _ in range(3):
            model()
    except Exception as exc:  # what the race raises is the finding
        errors.append(repr(exc))


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))
