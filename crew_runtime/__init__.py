"""Durable execution of CrewAI crews with people in the loop.

Users' crews import the names they need from the ``countersign`` package (its facade
re-exports them from here); Countersign's own code imports them from here.

Everything else (the journal, the review provider, the worker) is wired by
Countersign around an unmodified ``crewai.Crew``. Names are loaded on first use:
``import crewai`` costs seconds, and the configuration or the service must not
pay it (the CLI lists runs without it).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from crew_runtime import _env  # noqa: F401  (must run before crewai is imported)

if TYPE_CHECKING:
    from crew_runtime.config import Config, ConfigError, CrewSpec, UnknownCrewError, load_config
    from crew_runtime.context import idempotency_key
    from crew_runtime.errors import CountersignError, CrewBuildError, UsageError
    from crew_runtime.gates import GatedTool, requires_approval
    from crew_runtime.questions import AskHumanTool, ask_human
    from crew_runtime.service import Countersign
    from crew_runtime.worker import Worker, WorkerSettings

# Each name's module, relative to this package (which is ``countersign.crew_runtime`` once
# installed: docs/architecture.md, "The installed package").
_WHERE = {
    "AskHumanTool": ".questions",
    "ask_human": ".questions",
    "Config": ".config",
    "ConfigError": ".config",
    "CrewSpec": ".config",
    "UnknownCrewError": ".config",
    "load_config": ".config",
    "idempotency_key": ".context",
    "CountersignError": ".errors",
    "CrewBuildError": ".errors",
    "UsageError": ".errors",
    "GatedTool": ".gates",
    "requires_approval": ".gates",
    "Countersign": ".service",
    "Worker": ".worker",
    "WorkerSettings": ".worker",
}

__all__ = [
    "AskHumanTool",
    "Config",
    "ConfigError",
    "Countersign",
    "CountersignError",
    "CrewBuildError",
    "CrewSpec",
    "GatedTool",
    "UnknownCrewError",
    "UsageError",
    "Worker",
    "WorkerSettings",
    "ask_human",
    "idempotency_key",
    "load_config",
    "requires_approval",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module, __name__), name)
