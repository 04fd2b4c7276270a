"""Errors of the runtime (the control signals that stop a crew are in ``signals``).

    CountersignError
    ├── UsageError            bad input from a person (CLI or Slack): say it, change nothing
    └── CrewBuildError        the crew's factory failed or returned something else

``ConfigError`` and ``UnknownCrewError`` live in ``crew_runtime.config``. This module
does not import crewai, so the CLI and the bot can use it cheaply.
"""

from __future__ import annotations


class CountersignError(Exception):
    """Base class of the runtime's errors."""


class UsageError(CountersignError):
    """A person asked for something that cannot be done; the message says why."""


class CrewBuildError(CountersignError):
    """The crew factory raised or did not return a ``crewai.Crew``."""
