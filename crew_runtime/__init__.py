"""Durable execution of CrewAI crews with people in the loop.

What users' crews import::

    from crew_runtime import ask_human, idempotency_key

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

_WHERE = {
    "AskHumanTool": "crew_runtime.questions",
    "ask_human": "crew_runtime.questions",
    "Config": "crew_runtime.config",
    "ConfigError": "crew_runtime.config",
    "CrewSpec": "crew_runtime.config",
    "UnknownCrewError": "crew_runtime.config",
    "load_config": "crew_runtime.config",
    "idempotency_key": "crew_runtime.context",
    "CountersignError": "crew_runtime.errors",
    "CrewBuildError": "crew_runtime.errors",
    "UsageError": "crew_runtime.errors",
    "GatedTool": "crew_runtime.gates",
    "requires_approval": "crew_runtime.gates",
    "Countersign": "crew_runtime.service",
    "Worker": "crew_runtime.worker",
    "WorkerSettings": "crew_runtime.worker",
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
        raise AttributeError(f"module 'crew_runtime' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
