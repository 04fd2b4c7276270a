"""Resume in constant time: a snapshot of where a paused crew stands, instead of its replay.

Replaying the journal costs about what CrewAI's own loop costs per turn, so a run paused after
300 turns would pay 300 turns on every resume. At each suspension the execution also stores
a snapshot (plain JSON, never pickle), in the same transaction as the suspension itself:
the outputs of the tasks done, and for the paused task its agent executor as it asked for
its latest LLM turn (the conversation sent, the iteration count, native tools on or off, the
last tool used and CrewAI's count of repeated tool calls) with the seqs of that turn, and a
fingerprint of the crew (:func:`fingerprint`).

A resume whose crew still has the same fingerprint skips the tasks done with their outputs
(CrewAI's own start index: ``checkpoint_kickoff_event_id`` with ``task.output`` set) and
seeds the paused task's executor through the human-input provider's
``post_setup_messages`` (:func:`seed`), once CrewAI has set up the task's conversation as
usual and that matches the one the snapshot started from. The agent's first turn is then the
latest recorded one, served from the journal and checked against its recorded prompt hash
like any replayed turn; then the pause meets its decision, and the next turn is live. A
journal cut (a divergence, a revised task) drops the snapshot with the turns.

Anything else replays the whole journal as before: a flow, a hierarchical crew, parallel
(``async_execution``) or conditional tasks, delegation, planning, guardrails, tools with a
usage limit, a pause outside one top-level task, or a crew whose fingerprint or first
conversation changed.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
from contextlib import suppress
from typing import Any

from crewai import Agent, Crew, Process, Task
from crewai.tasks.conditional_task import ConditionalTask
from crewai.tasks.task_output import TaskOutput
from crewai.tools.tool_calling import ToolCalling
from pydantic import BaseModel, ValidationError

from crew_runtime import streams
from crew_runtime.compat import agent_executor as crewai_executor
from crew_runtime.context import RunContext, current_run
from crew_runtime.journal_llm import prompt_hash, same_prompt
from storage import Snapshot

VERSION = 1
# What CrewAI's checkpoint resume reads to start at the first task without an output.
_RESUMING = "countersign-snapshot"
_CREWAI = importlib.metadata.version("crewai")


def fingerprint(crew: Crew, inputs: dict[str, Any]) -> str:
    """A digest of what the crew's tasks were built from: CrewAI's version, the inputs, the
    prompt file, each task (its text, agent, tools, output model, context) and each agent (its
    text, model, tools, prompt templates and loop options). A resume skips the tasks done only
    while it is unchanged: a skipped task's prompt is not built again to be checked."""
    tasks = list(crew.tasks)
    shape = {
        "crewai": _CREWAI,
        "inputs": inputs,
        "process": str(crew.process),
        "prompt_file": crew.prompt_file,
        "tasks": [_task_shape(task, tasks) for task in tasks],
        "agents": [_agent_shape(agent) for agent in crew.agents],
    }
    blob = json.dumps(shape, sort_keys=True, default=_plain)
    return hashlib.sha256(blob.encode()).hexdigest()


def _task_shape(task: Task, tasks: list[Task]) -> dict[str, Any]:
    model = task.output_pydantic or task.output_json
    context = task.context if isinstance(task.context, list) else None
    return {
        "description": task.description,
        "expected_output": task.expected_output,
        "name": task.name,
        "agent": None if task.agent is None else task.agent.role,
        "human_input": task.human_input,
        "tools": [_tool_shape(tool) for tool in task.tools or []],
        "output": None if model is None else model.model_json_schema(),
        "context": None if context is None else [_place(t, tasks) for t in context],
    }


def _place(task: Task, tasks: list[Task]) -> int | None:
    return next((n for n, t in enumerate(tasks) if t is task), None)


# What else of an agent shapes its prompts and its loop.
_AGENT_OPTIONS = (
    "max_iter",
    "system_template",
    "prompt_template",
    "response_template",
    "use_system_prompt",
    "inject_date",
    "date_format",
    "reasoning",
    "multimodal",
    "respect_context_window",
)


def _agent_shape(agent: Any) -> dict[str, Any]:
    llm = getattr(agent, "llm", None)
    return {
        "role": agent.role,
        "goal": agent.goal,
        "backstory": agent.backstory,
        "model": getattr(getattr(llm, "inner", llm), "model", None),
        "tools": [_tool_shape(tool) for tool in agent.tools or []],
        **{option: getattr(agent, option, None) for option in _AGENT_OPTIONS},
    }


def _tool_shape(tool: Any) -> dict[str, Any]:
    schema = getattr(tool, "args_schema", None)
    return {
        "name": getattr(tool, "name", None),
        "description": getattr(tool, "description", None),
        "args": _schema(schema),
    }


def _schema(model: Any) -> Any:
    return model.model_json_schema() if isinstance(model, type(BaseModel)) else None


def _plain(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    return dump(mode="json") if callable(dump) else str(value)


def expressible(crew: Crew) -> bool:
    """Whether the crew's shape is one a snapshot describes exactly (see the module)."""
    tasks = list(crew.tasks)
    agents = [*crew.agents, *(t.agent for t in tasks if t.agent is not None)]
    owners: list[Any] = [*agents, *tasks]
    tools = [tool for owner in owners for tool in owner.tools or []]
    return (
        crew.process == Process.sequential
        and not crew.planning
        and all(isinstance(a, Agent) and not a.allow_delegation for a in agents)
        and not any(getattr(tool, "max_usage_count", None) is not None for tool in tools)
        and not any(
            t.async_execution or isinstance(t, ConditionalTask) or t.guardrail or t.guardrails
            for t in tasks
        )
    )


# -- what an execution keeps as it goes


def install_repeat_count() -> None:
    """Let the run see what CrewAI counts as repeated tool calls (idempotent).

    CrewAI keys its count by Python's ``hash()`` of a text, which differs between processes:
    the snapshot keeps the texts, and a resume hashes them again.
    """
    count = getattr(crewai_executor, "check_repeated_tool_call", None)
    if count is None or getattr(count, "countersign", False):
        return  # None: before CrewAI 1.15.29, which counts no repeated tool calls

    def counted(counts: dict[int, int], **call: Any) -> None:
        ctx = current_run()
        if ctx is not None:
            args = [call["tool_name"], call["tool_args"], str(call["result"])]
            ctx.note_repeat(counts, json.dumps(args, sort_keys=True, default=str))
        count(counts, **call)

    counted.countersign = True  # type: ignore[attr-defined]
    crewai_executor.check_repeated_tool_call = counted


def note_setup(ctx: RunContext, executor: Any) -> None:
    """CrewAI set up a task's conversation (``post_setup_messages``): keep its digest, and
    seed the paused task's executor from the snapshot if that conversation is the same."""
    stream = ctx.stream_for(executor.task, executor.agent)
    setup = prompt_hash(executor.state.messages, None)
    ctx.setups[stream] = setup
    plan = ctx.snapshot
    if plan is None or plan.payload["stream"] != stream:
        return
    if not same_prompt(plan.payload["setup"], setup, executor.state.messages, None):
        # the task's prompt changed: replay it from its start
        ctx.load_whole_journal()
        return
    _seed(ctx, executor, stream, plan.payload)
    ctx.snapshot = None  # one seed per execution
    ctx.stats["snapshot"] += 1


def _seed(ctx: RunContext, executor: Any, stream: str, payload: dict[str, Any]) -> None:
    state = executor.state
    state.messages = list(payload["messages"])
    state.iterations = payload["iterations"]
    state.use_native_tools = payload["native"]
    if payload["native"]:  # CrewAI sets them up on iteration 0 only
        executor._setup_native_tools()
    if executor.tools_handler is not None and payload["last_tool"] is not None:
        executor.tools_handler.last_used_tool = ToolCalling.model_validate(payload["last_tool"])
    counts = getattr(executor, "_tool_call_counts", None)  # from CrewAI 1.15.29 on
    if counts is not None:
        ctx.seed_repeats(counts, payload["repeats"])
    ctx.set_counters(stream, payload["counters"])


# -- at a pause, and on resume


def take(ctx: RunContext, crew: Crew, crew_print: str) -> Snapshot | None:
    """The snapshot of a crew pausing now, or None when it cannot describe the pause exactly
    (the resume then replays the journal)."""
    streams_asked = {ask.stream for ask in ctx.asks}
    if len(streams_asked) != 1 or not expressible(crew):
        return None
    (stream,) = streams_asked
    n = streams.task_index(stream)
    tasks = list(crew.tasks)
    agent = tasks[n].agent if n is not None and n < len(tasks) else None
    if n is None or agent is None or stream != streams.stream(streams.task_place(n), agent.role):
        return None  # not the task's own agent at work (nested work, a callback's agent)
    if any(t.output is None for t in tasks[:n]) or any(t.output is not None for t in tasks[n:]):
        return None
    turn, setup = ctx.turns.get(stream), ctx.setups.get(stream)
    entry = None if turn is None else ctx.recorded(stream, "llm", turn.seq)
    if turn is None or setup is None or entry is None:
        return None
    try:
        messages = json.loads(json.dumps(turn.messages))
        outputs = [_output_json(t.output) for t in tasks[:n] if t.output is not None]
    except (TypeError, ValueError):
        return None
    if not same_prompt(entry.prompt_hash, prompt_hash(messages, turn.tools), messages, turn.tools):
        return None  # changed in place since
    payload = {
        "version": VERSION,
        "crew": crew_print,
        "stream": stream,
        "task": n,
        "outputs": outputs,
        "setup": setup,
        "messages": messages,
        "counters": turn.counters,
        "iterations": turn.iterations,
        "native": turn.native,
        "last_tool": turn.last_tool,
        "repeats": turn.repeats,
    }
    return Snapshot(entry.pos, payload)


def restore(ctx: RunContext, crew: Crew, crew_print: str) -> None:
    """Skip the tasks the snapshot has outputs for, and leave the paused task's executor to
    be seeded (:func:`note_setup`); read the whole journal instead when it does not fit."""
    plan = ctx.snapshot
    if plan is None:
        return
    payload = plan.payload
    tasks = list(crew.tasks)
    outputs = None
    if (
        payload.get("version") == VERSION
        and payload["crew"] == crew_print
        and payload["task"] < len(tasks)
        and expressible(crew)
    ):
        with suppress(ValidationError):  # an output its model no longer takes
            outputs = [_output_of(t, o) for t, o in zip(tasks, payload["outputs"], strict=False)]
    if outputs is None:
        ctx.load_whole_journal()
        return
    for task, output in zip(tasks, outputs, strict=False):
        task.output = output
    crew.checkpoint_kickoff_event_id = _RESUMING


def _output_json(output: TaskOutput) -> dict[str, Any]:
    data = output.model_dump(mode="json", exclude={"pydantic"})
    data["pydantic"] = None if output.pydantic is None else output.pydantic.model_dump(mode="json")
    json.dumps(data)  # plain JSON, or TypeError
    return data


def _output_of(task: Task, data: dict[str, Any]) -> TaskOutput:
    model = task.output_pydantic
    typed = data["pydantic"]
    pydantic = model.model_validate(typed) if model is not None and typed is not None else None
    return TaskOutput.model_validate({**data, "pydantic": pydantic})
