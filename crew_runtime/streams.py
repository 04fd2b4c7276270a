"""The journal's stream keys: built here and read here, nowhere else.

A stream is the unit whose calls happen in a fixed order; a turn or a review is keyed by its
stream and its number in it. The forms, from the most common:

    task{n}:{role}                 task n (from 0) of the run's crew, worked by the agent role
    {place}>{seq}:{role}           work inside tool call seq of the stream at place (delegation)
    task{n}:guardrail[{i}]         the model of task n's LLM guardrail (the i-th of a list)
    {stream}~reasoning             the agent of {stream} reasoning before its work
    {stream}~observer              the observer of that agent's plan, after each step
    flow:{method}#{k}/{stream}     any of the above, in the k-th crew a flow step kicked off
    flow:{method}                  a flow's own ``@human_feedback`` on that method
    {stream}|{event}               a lifecycle event (task_started) of the stream
    {place}/console:input          ``input()`` called at place (a flow step, a tool call)
    flow                           the flow run itself (its flow id, where each leg starts)
    crew:Task Execution Planner    the model of the crew's planner (planning=True)
    crew:{role}                    anything else of the crew
    recall:{kind}:{digest}         an embedding, knowledge search or memory call, by what it asks

A key longer than the journal's column (:data:`MOST`; a role can be any length: CrewAI's own
``crewai create crew`` template interpolates an input into one) keeps its first characters
and ends with a digest of the whole (:func:`stream`), so it stays the same on every replay and
its task can still be read from it.

No import of CrewAI here: the bot reads streams too (which task a review belongs to).
"""

from __future__ import annotations

import hashlib
import re

FLOW = "flow"
OUTSIDE = "crew"  # the place of work outside any task
_FLOW_PREFIX = "flow:"
_TASK = re.compile(r"task(\d+):")


def task_place(n: int, prefix: str = "") -> str:
    """Where task ``n`` of a crew works: ``task{n}``, under a flow crew's ``prefix``."""
    return f"{prefix}task{n}"


MOST = 200
"""The longest stream key (the journal's and the reviews' ``stream`` columns)."""
_DIGEST = 16


def stream(place: str, role: str) -> str:
    """The stream of the agent ``role`` working at ``place``; one longer than :data:`MOST`
    is cut to fit, a digest of the whole at its end."""
    return _bounded(f"{place}:{role}")


def event_stream(place: str, name: str) -> str:
    """Where the lifecycle event ``name`` (``task_started``) of the stream ``place`` is
    numbered (``crew_runtime.options``), cut to fit as :func:`stream` is."""
    return _bounded(f"{place}|{name}")


def _bounded(key: str) -> str:
    if len(key) <= MOST:
        return key  # every key a journal holds already: unchanged
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:_DIGEST]
    return f"{key[: MOST - _DIGEST - 1]}~{digest}"


def nested_place(outer: str, seq: int) -> str:
    """Where work inside tool call ``seq`` of the stream ``outer`` happens."""
    return f"{outer}>{seq}"


def guardrail_stream(n: int, prefix: str = "", i: int | None = None) -> str:
    """The stream of the model of task ``n``'s LLM guardrail (the ``i``-th of a list)."""
    return stream(task_place(n, prefix), "guardrail" if i is None else f"guardrail{i}")


def reasoning_stream(of: str, step: str = "reasoning") -> str:
    """The stream of the agent of stream ``of`` planning its work (``Agent(reasoning=True)``
    or ``planning_config``): ``reasoning`` before it, ``observer`` after each step."""
    return f"{of}~{step}"


def planner_stream(prefix: str = "") -> str:
    """The stream of the model of a crew's planner (CrewAI's planning agent's role)."""
    return stream(prefix + OUTSIDE, "Task Execution Planner")


def feedback_stream(method: str) -> str:
    """The stream of a flow's own ``@human_feedback`` on ``method``."""
    return _FLOW_PREFIX + method


def is_feedback_stream(key: str) -> bool:
    """A flow's own ``@human_feedback`` point (``flow:<method>``), not a crew in a step."""
    return key.startswith(_FLOW_PREFIX) and "/" not in key


def console_stream(place: str) -> str:
    """The stream of the questions ``input()`` asks at ``place``: a flow step
    (``flow:<method>``) or a tool call (``task0:Writer>2``). Never a feedback stream."""
    return stream(f"{place}/console", "input")


def flow_step(method: str) -> str:
    """What a flow step's crews are counted by (``flow:<method>``)."""
    return _FLOW_PREFIX + method


def flow_crew_prefix(step: str, k: int) -> str:
    """The prefix of the streams of the ``k``-th crew the flow ``step`` kicked off."""
    return f"{step}#{k}/"


def task_index(key: str) -> int | None:
    """The task (from 0) of the run's own crew that a stream belongs to, else None."""
    found = _TASK.match(key)
    return int(found.group(1)) if found else None


def recall_stream(kind: str, digest: str) -> str:
    """The stream of the recall calls (``embed``, ``knowledge``, ``memory``) asking ``digest``:
    numbered by their occurrence among identical calls (``crew_runtime.recall``)."""
    return f"recall:{kind}:{digest}"
