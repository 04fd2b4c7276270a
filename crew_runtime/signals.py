"""Signals that stop ``Crew.kickoff()`` at once; the RunContext says why.

    HookAborted (crewai)
    └── RunSignal
        ├── PauseRun          a review must be answered first
        ├── RunRejected       a reviewer rejected the run
        └── RunAborted        the lease was lost (cancelled or taken over)

``HookAborted`` is in CrewAI's pass-through list (agent/core.py:144), so neither
the agent's retry loop nor the tool layer swallows these.
"""

from __future__ import annotations

from crewai.hooks.dispatch import HookAborted


class RunSignal(HookAborted):
    def __init__(self, reason: str) -> None:
        super().__init__(reason, source="countersign")


class PauseRun(RunSignal):
    pass


class RunRejected(RunSignal):
    pass


class RunAborted(RunSignal):
    pass
