"""A crew's knowledge sources do no I/O of their own before Countersign has seen the crew.

CrewAI embeds a crew's ``knowledge_sources`` while the crew is being built: ``Crew``'s
validator ``create_crew_knowledge`` (crewai/crew.py) calls ``Knowledge.add_sources``, which
sends every chunk to the embedder, inside the factory, before the runtime can look at the
crew. So the storage of every ``Knowledge`` built in a worker is Countersign's, through
CrewAI's own seam for it (``crewai.knowledge.storage.factory.set_knowledge_storage_factory``):
it holds the chunks it is given and touches nothing (no embedder, no folder, no network).
:func:`install` registers it once per process. A ``Memory`` does no network before its first
recall or save, which a refused run never reaches.
"""

from __future__ import annotations

import threading
from typing import Any

from crewai.knowledge.storage import factory as knowledge_factory
from crewai.knowledge.storage.base_knowledge_storage import BaseKnowledgeStorage
from pydantic import Field

_lock = threading.Lock()
_installed = False


class HeldKnowledgeStorage(BaseKnowledgeStorage):
    """A knowledge collection's storage that keeps the chunks it is given and embeds nothing.

    A run using knowledge is refused before it starts (``crew_runtime.options.refusal``), so
    nothing ever searches it.
    """

    collection_name: str | None = None
    documents: list[str] = Field(default_factory=list)

    def search(
        self,
        query: list[str],
        limit: int = 5,
        metadata_filter: dict[str, Any] | None = None,
        score_threshold: float = 0.6,
    ) -> list[Any]:
        return []

    async def asearch(
        self,
        query: list[str],
        limit: int = 5,
        metadata_filter: dict[str, Any] | None = None,
        score_threshold: float = 0.6,
    ) -> list[Any]:
        return []

    def save(self, documents: list[str]) -> None:
        self.documents.extend(documents)

    async def asave(self, documents: list[str]) -> None:
        self.save(documents)

    def reset(self) -> None:
        self.documents.clear()

    async def areset(self) -> None:
        self.reset()


def _knowledge_storage(embedder: Any, collection_name: str | None) -> BaseKnowledgeStorage:
    return HeldKnowledgeStorage(collection_name=collection_name)


def install() -> None:
    """Make every knowledge collection built in this process hold its chunks (idempotent)."""
    global _installed
    with _lock:
        if _installed:
            return
        knowledge_factory.set_knowledge_storage_factory(_knowledge_storage)
        _installed = True
