"""Errors and control signals of the runtime.

CountersignError
├── UsageError            bad input from a person (CLI or Slack): say it, change nothing
│   └── (ConfigError and UnknownCrewError live in crew_runtime.config)
└── CrewBuildError        the crew's factory failed or returned something else

HookAborted (crewai)      passes straight out of ``Crew.kickoff()``, skipping retries
└── RunSignal             the run must stop now; the RunContext says why
    ├── PauseRun          a review must be answered first
    ├── RunRejected       a reviewer rejected the run
    └── RunAborted        the lease was lost (cancelled or taken over)
"""

from __future__ import annotations

from crewai.hooks.dispatch import HookAborted


class CountersignError(Exception):
    """Base class of the runtime's errors."""


class UsageError(CountersignError):
    """A person asked for something that cannot be done; the message says why."""


class CrewBuildError(CountersignError):
    """The crew factory raised or did not return a ``crewai.Crew``."""


class RunSignal(HookAborted):
    """Stops ``kickoff()`` at once. ``HookAborted`` is in CrewAI's pass-through list
    (agent/core.py:144), so neither the agent's retry loop nor the tool layer eats it."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason, source="countersign")


class PauseRun(RunSignal):
    pass


class RunRejected(RunSignal):
    pass


class RunAborted(RunSignal):
    pass
