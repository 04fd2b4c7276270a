"""A crew whose lifecycle is watched by listeners on CrewAI's event bus, as a user would
register them (at import of their crew's module): each event a listener sees is written to
the test's effects file with the process that saw it."""

from __future__ import annotations

import os
from typing import Any

from crewai import Crew
from crewai.events.event_bus import crewai_event_bus
from crewai.events.types.agent_events import (
    AgentExecutionCompletedEvent,
    AgentExecutionStartedEvent,
)
from crewai.events.types.crew_events import CrewKickoffCompletedEvent, CrewKickoffStartedEvent
from crewai.events.types.task_events import TaskCompletedEvent, TaskStartedEvent

from tests.support.crews import _append, writer

WATCHED = (
    CrewKickoffStartedEvent,
    CrewKickoffCompletedEvent,
    TaskStartedEvent,
    TaskCompletedEvent,
    AgentExecutionStartedEvent,
    AgentExecutionCompletedEvent,
)


def _seen(source: Any, event: Any) -> None:
    task = getattr(event, "task", None)
    described = str(getattr(task, "description", "") or "")[:20] if task is not None else ""
    _append({"kind": "event", "type": type(event).__name__, "task": described, "pid": os.getpid()})


for _event in WATCHED:
    crewai_event_bus.on(_event)(_seen)


def listened(inputs: dict[str, str]) -> Crew:
    """The writer crew (two reviewed tasks), watched."""
    return writer(inputs)
