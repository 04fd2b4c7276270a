"""A crew's memory, journaled: each recall, extraction and save is made once per run.

CrewAI's unified ``Memory`` (crewai/memory/unified_memory.py) is asked by the agent before a
task (``recall`` of the task's description, ``Agent._retrieve_memory_context``) and after it
(``extract_memories`` of the task and its result, then ``remember_many``, in
``BaseAgentExecutor._save_to_memory``); an agent's memory tools call the same methods. Each
of those calls embeds, asks the memory's own model (the crew's first agent's, asked
directly: the call is journaled whole, :func:`_own_model`) and reads or writes its store
(LanceDB in ``$CREWAI_STORAGE_DIR/memory``). A store changes between executions, so a
replayed recall would find what a later task saved, and a replayed save would save again:
each method is journaled whole, by what it was asked (``crew_runtime.recall.journaled``). A
replay hands back the recorded matches, memories and records, and saves nothing; a live call
runs CrewAI's method and journals its result. A save (``remember_many``, which CrewAI runs
in a background thread) is journaled once it is stored: under a run it waits for its write,
so a worker killed before the write saves it again on resume, and one killed after it does
not.

The methods are wrapped once per process on CrewAI's ``Memory`` class (:func:`install`), so
scopes and slices of a memory, which call them, are journaled too; outside a run they are
CrewAI's.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from crewai.memory.types import MemoryMatch, MemoryRecord
from crewai.memory.unified_memory import Memory

from crew_runtime.context import current_run
from crew_runtime.journal_llm import JournalLLM
from crew_runtime.recall import digest, journaled

MEMORY = "memory"


def _own_model(memory: Memory) -> Memory:
    """The memory, asking its model directly: a call of it is journaled whole, so its model
    turns must not be journaled again (a replay, which asks no model, would shift them).

    CrewAI builds a crew's memory again when it revalidates the crew at kickoff, by then
    with the agent's model, which Countersign has put behind the journal.
    """
    llm = memory._llm_instance
    if isinstance(llm, JournalLLM):
        memory._llm_instance = llm.inner
    return memory


def _recall(original: Callable[..., list[MemoryMatch]]) -> Callable[..., list[MemoryMatch]]:
    @functools.wraps(original)
    def recall(self: Memory, query: str, *args: Any, **kwargs: Any) -> list[MemoryMatch]:
        return journaled(
            MEMORY,
            digest("recall", self.root_scope, query, args, kwargs),
            lambda: original(_own_model(self), query, *args, **kwargs),
            lambda matches: [m.model_dump(mode="json") for m in matches],
            lambda stored: [MemoryMatch.model_validate(m) for m in stored],
            "a recall from memory",
        )

    return recall


def _extract(original: Callable[..., list[str]]) -> Callable[..., list[str]]:
    @functools.wraps(original)
    def extract_memories(self: Memory, content: str) -> list[str]:
        return journaled(
            MEMORY,
            digest("extract", content),
            lambda: original(_own_model(self), content),
            list,
            lambda stored: [str(s) for s in stored],
            "extracting memories",
        )

    return extract_memories


def _remember_many(original: Callable[..., list[MemoryRecord]]) -> Callable[..., Any]:
    @functools.wraps(original)
    def remember_many(
        self: Memory, contents: list[str], *args: Any, **kwargs: Any
    ) -> list[MemoryRecord]:
        if current_run() is None:
            return original(self, contents, *args, **kwargs)

        def save() -> list[MemoryRecord]:
            records = original(_own_model(self), contents, *args, **kwargs)
            self.drain_writes()  # journaled once stored, not once queued
            return records

        journaled(
            MEMORY,
            digest("remember_many", self.root_scope, contents, args, kwargs),
            save,
            lambda records: [],
            lambda stored: [],
            "saving to memory",
        )
        return []  # as CrewAI's: records are not available from a background save

    return remember_many


def _remember(original: Callable[..., MemoryRecord | None]) -> Callable[..., Any]:
    @functools.wraps(original)
    def remember(self: Memory, content: str, *args: Any, **kwargs: Any) -> MemoryRecord | None:
        return journaled(
            MEMORY,
            digest("remember", self.root_scope, content, args, kwargs),
            lambda: original(_own_model(self), content, *args, **kwargs),
            lambda record: None if record is None else record.model_dump(mode="json"),
            lambda stored: None if stored is None else MemoryRecord.model_validate(stored),
            "saving to memory",
        )

    return remember


def install() -> None:
    """Journal ``Memory``'s recalls and saves under a run (called once, by ``recall.install``)."""
    Memory.recall = _recall(Memory.recall)  # type: ignore[method-assign]
    Memory.extract_memories = _extract(Memory.extract_memories)  # type: ignore[method-assign]
    Memory.remember_many = _remember_many(Memory.remember_many)  # type: ignore[method-assign]
    Memory.remember = _remember(Memory.remember)  # type: ignore[method-assign]
