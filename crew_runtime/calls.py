"""Where the calls of a run sit, and what is kept of one in progress: a call's key, the
native tool calls of one LLM turn, a tool call under way, and an LLM turn as the agent's
executor asked it (what a snapshot keeps). ``crew_runtime.context`` keeps them per execution.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Turn:
    """What an agent's executor held as it asked the model for an LLM turn: its conversation
    (the list as sent, copied), and the counters that place the turn. A snapshot of a paused
    run is the latest turn of its paused stream (``crew_runtime.snapshot``)."""

    seq: int
    messages: list[Any]
    tools: Any
    counters: dict[str, int]  # the stream's next seq per kind as the turn was asked
    iterations: int
    native: bool
    last_tool: dict[str, Any] | None
    repeats: dict[str, int]  # CrewAI's count of identical tool calls, by what it hashes


@dataclass(frozen=True)
class CallKey:
    """Where a call sits in a run: ``(run, stream, seq)``; stable across replays."""

    run_id: str
    stream: str
    seq: int

    def __str__(self) -> str:
        return f"{self.run_id}/{self.stream}/{self.seq}"


@dataclass
class ToolBatch:
    """The native tool calls of one LLM turn, which CrewAI may run in parallel threads.

    Their seqs are reserved in the order of the response (``base + position``), so a call
    keeps its seq, and its review, whichever thread reaches the hooks first. ``expected``
    counts the calls whose hooks will run (CrewAI skips the hooks of unparsable arguments).
    """

    base: int
    calls: list[tuple[str, Any]]  # (tool name, parsed arguments or None if unparsable)
    expected: int
    claimed: set[int] = field(default_factory=set)
    finished: int = 0
    held: int = 0


@dataclass
class ToolSlot:
    """A tool call in progress: its place, its recorded result if replayed, and what a
    gate decided (wait, replace the result, or add a note)."""

    key: CallKey
    recorded: str | None
    awaiting_approval: bool = False
    override: str | None = None
    note: str | None = None
    batch: ToolBatch | None = None
    # A pause or rejection was raised inside this call (and caught by the tool, as
    # CrewAI's delegation tools do), or the call was refused because the run is stopping:
    # what the tool returned is not a result.
    interrupted: bool = False
    live: int | None = None  # its place among the live calls, while it runs
    agent: str = ""  # the role of the agent making the call
