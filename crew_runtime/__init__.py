"""Durable execution of CrewAI crews with people in the loop.

What users' crews import::

    from crew_runtime import ask_human, idempotency_key

Everything else (the journal, the review provider, the worker) is wired by
Countersign around an unmodified ``crewai.Crew``.
"""

from crew_runtime import _env  # noqa: F401  (must run before crewai is imported)
from crew_runtime.ask_human import AskHumanTool, ask_human
from crew_runtime.config import Config, ConfigError, CrewSpec, UnknownCrewError, load_config
from crew_runtime.context import idempotency_key
from crew_runtime.errors import CountersignError, CrewBuildError, UsageError
from crew_runtime.service import Countersign
from crew_runtime.worker import Worker, WorkerSettings

__all__ = [
    "AskHumanTool",
    "Config",
    "ConfigError",
    "Countersign",
    "CountersignError",
    "CrewBuildError",
    "CrewSpec",
    "UnknownCrewError",
    "UsageError",
    "Worker",
    "WorkerSettings",
    "ask_human",
    "idempotency_key",
    "load_config",
]
