"""A pause is not an error: CrewAI must not report one as a failure.

A run pauses by raising through ``Crew.kickoff()`` (see ``crew_runtime.signals``), and CrewAI
reports every exception it sees leave a tool, a task or a crew as a failure: an ``ERROR``
line from its flow runtime (its agent executor is a Flow), and, for verbose crews, "An unknown
error occurred", "Task Failure" and "Crew Failure" panels. For a pause, a rejection or a lost
lease those are noise that reads like an incident; the worker logs the pause at INFO in one
line instead. Real errors keep every line and panel.

A crew kicked off inside a Flow's step adds the Flow's own reports: "Flow Method Failed" and
"Flow Failure" panels (printed for every flow, verbose or not) when the pause leaves the step
and the flow, and the "Tool Failure" panel of ``ask_human``'s ``AWAITING_HUMAN`` result.

How: while the execution in this context stops on purpose (:attr:`RunContext.stopping_on_purpose`:
it queued a review, was rejected, or lost its lease), a logging filter drops CrewAI's error
records, and CrewAI's failure reporters skip their output (a failed status only: a flow's
"paused" and "completed" panels are kept). CrewAI runs its event handlers
and tool calls in copies of the caller's context, so the run is known wherever they run. The
reporters are wrapped once per process, by :func:`install`; CrewAI is pinned to the version
whose reporters these are (crewai/events/utils/console_formatter.py, ``handle_crew_status``,
``handle_task_status``, ``handle_flow_status``, ``handle_method_status`` and
``handle_tool_failure_detected``; crewai/utilities/agent_utils.py, ``handle_unknown_error``, as
imported by crewai/agents/agent_executor.py and crewai/lite_agent.py).
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from typing import Any

from crewai import lite_agent
from crewai.events.event_listener import EventListener

from crew_runtime.compat import agent_executor
from crew_runtime.context import current_run

_lock = threading.Lock()
_installed = False
_LOGGERS = ("crewai.flow.runtime",)


def stopping_on_purpose() -> bool:
    """Whether the execution in this context is stopping for a person (or has lost its run)."""
    ctx = current_run()
    return ctx is not None and ctx.stopping_on_purpose


class _NotForPauses(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno < logging.ERROR or not stopping_on_purpose()


def _unless_pausing(
    report: Callable[..., None], failed: Callable[..., bool]
) -> Callable[..., None]:
    @functools.wraps(report)
    def quiet(*args: Any, **kwargs: Any) -> None:
        if failed(*args, **kwargs) and stopping_on_purpose():
            return
        report(*args, **kwargs)

    return quiet


def _status_failed(*args: Any, **kwargs: Any) -> bool:
    status = kwargs.get("status", args[2] if len(args) > 2 else "completed")
    return bool(status != "completed")


def _flow_failed(*args: Any, **kwargs: Any) -> bool:
    status = kwargs.get("status", args[2] if len(args) > 2 else "completed")
    return bool(status == "failed")


def _method_failed(*args: Any, **kwargs: Any) -> bool:
    status = kwargs.get("status", args[1] if len(args) > 1 else "running")
    return bool(status == "failed")


def install() -> None:
    """Quiet CrewAI's failure reports for pauses, once per process (idempotent)."""
    global _installed
    with _lock:
        if _installed:
            return
        for name in _LOGGERS:
            logging.getLogger(name).addFilter(_NotForPauses())
        formatter = EventListener().formatter
        reporters: dict[str, Callable[..., bool]] = {
            "handle_crew_status": _status_failed,
            "handle_task_status": _status_failed,
            "handle_flow_status": _flow_failed,
            "handle_method_status": _method_failed,
            "handle_tool_failure_detected": lambda *args, **kwargs: True,
        }
        for method, failed in reporters.items():
            setattr(formatter, method, _unless_pausing(getattr(formatter, method), failed))
        for module in (agent_executor, lite_agent):
            module.handle_unknown_error = _unless_pausing(  # type: ignore[union-attr]
                module.handle_unknown_error, lambda *args, **kwargs: True
            )
        _installed = True
