"""Errors of the runtime, the ``CrewRuntimeError`` subtree of ``CountersignError`` (the whole
tree is drawn in ``storage.errors``; the control signals that stop a crew are in ``signals``).

    CrewRuntimeError
    ├── UsageError            bad input from a person (CLI or Slack): say it, change nothing
    ├── CrewBuildError        the crew's factory failed or returned something else
    └── ConfigError           (crew_runtime.config)
        └── UnknownCrewError

This module does not import crewai, so the CLI and the bot can use it cheaply.
"""

from __future__ import annotations

from storage.errors import CountersignError

__all__ = ["CountersignError", "CrewBuildError", "CrewRuntimeError", "UsageError"]


class CrewRuntimeError(CountersignError):
    """Base class of the runtime's errors."""


class UsageError(CrewRuntimeError):
    """A person asked for something that cannot be done; the message says why."""


class CrewBuildError(CrewRuntimeError):
    """The crew factory raised or did not return a ``crewai.Crew``."""
