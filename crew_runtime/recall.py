"""What a crew recalls, journaled: embeddings, knowledge searches (memory: ``memories``).

A run's recall calls go through the journal like its model and tool calls: a recorded call is
answered from the journal, so a resume never embeds, searches or saves again what an earlier
execution did, and a new call is made live under the lease and journaled. Each call is keyed
by what it asks (a digest: the texts to embed, the collection and query searched) and its
occurrence among identical calls (``streams.recall_stream``), not by its place in a task:
CrewAI embeds a crew's knowledge while building the crew, before any task runs, and saves
memories from a background thread.

Knowledge. CrewAI embeds a crew's ``knowledge_sources`` while the crew is being built
(``Crew``'s validator ``create_crew_knowledge``, crewai/crew.py, and again each time CrewAI
revalidates the crew), inside the factory, before the runtime has seen the crew. So the
storage of every ``Knowledge`` built in a worker is a :class:`JournaledKnowledgeStorage`,
through CrewAI's own seam (``set_knowledge_storage_factory``): it builds CrewAI's
``KnowledgeStorage`` (chromadb, in a folder of the run's crew under ``db_storage_path()``,
:func:`_folder`) with the crew's embedder journaled (:func:`journal_embedder`). Saving
chunks runs locally each time CrewAI does it (the collection needs them on any worker), its
embeddings from the journal after the first time; a search is journaled whole (its results).
Chunks saved while the factory builds the crew (outside the run) are held until the run
prepares the crew (:func:`prepare`), after its refusals. Outside a run the storage is
CrewAI's, saving lazily.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

from chromadb.config import Settings
from crewai.knowledge.storage import factory as knowledge_factory
from crewai.knowledge.storage.base_knowledge_storage import BaseKnowledgeStorage
from crewai.knowledge.storage.knowledge_storage import KnowledgeStorage
from crewai.rag.chromadb.config import ChromaDBConfig, _default_embedding_function
from crewai.rag.embeddings.factory import build_embedder
from crewai.rag.factory import create_client
from crewai_core.paths import db_storage_path
from pydantic import Field, PrivateAttr

from crew_runtime import streams
from crew_runtime.context import RunContext, current_run
from crew_runtime.signals import PauseRun

T = TypeVar("T")

# Journal kinds of recall calls.
EMBED = "embed"
KNOWLEDGE = "knowledge"

_lock = threading.Lock()
_installed = False


def digest(*parts: Any) -> str:
    """A short, stable digest of a call's arguments (the same in every process)."""
    blob = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def journaled(
    kind: str,
    key: str,
    live: Callable[[], T],
    encode: Callable[[T], Any],
    decode: Callable[[Any], T],
    what: str,
) -> T:
    """``live()``, journaled under a run: the recorded result of this occurrence of the call
    ``key``, else the live result, journaled once made (at least once: a worker killed between
    the call and its journal write makes it again). Outside a run: ``live()``."""
    ctx = current_run()
    if ctx is None:
        return live()
    stream = streams.recall_stream(kind, key)
    seq = ctx.next_seq(stream, kind)
    entry = ctx.recorded(stream, kind, seq)
    if entry is not None:
        ctx.stats[f"{kind}_replayed"] += 1
        return decode(entry.payload["result"])
    token = ctx.begin_live()
    if token is None:  # another task paused: this call is made on resume
        raise ctx.signal(PauseRun(f"the run is pausing before {what}"))
    try:
        ctx.hold_lease()  # a live call costs money: only under a lease held
        result = live()
        ctx.stats[f"{kind}_live"] += 1
        ctx.record(stream, kind, seq, {"result": encode(result)})
    finally:
        ctx.end_live(token)
    return result


# -- embeddings


def journal_embedder(function: Any) -> Any:
    """Make a chromadb embedding function journal its calls (in place; returns it).

    Its class becomes a subclass of its own whose ``__call__`` (and ``embed_query``, where
    the class has its own) is journaled, so chromadb sees the same function: the same
    ``name()`` and config, which it keeps with each collection.
    """
    cls = type(function)
    if getattr(cls, "_countersign_journaled", False):
        return function
    call = cls.__call__

    def embed(self: Any, input: Any) -> Any:
        return _embed("call", lambda: call(self, input), input)

    body: dict[str, Any] = {"__call__": embed, "_countersign_journaled": True}
    base = "chromadb.api.types"  # the protocol's own embed_query calls __call__
    own_query = next(
        (c for c in cls.__mro__ if "embed_query" in vars(c) and c.__module__ != base), None
    )
    if own_query is not None:
        query = cls.embed_query

        def embed_query(self: Any, input: Any) -> Any:
            return _embed("query", lambda: query(self, input), input)

        body["embed_query"] = embed_query
    function.__class__ = type(f"Journaled{cls.__name__}", (cls,), body)
    return function


def _embed(how: str, live: Callable[[], Any], texts: Any) -> Any:
    plain = [str(t) for t in texts] if isinstance(texts, list) else [str(texts)]
    return journaled(
        EMBED,
        digest(how, plain),
        live,
        lambda vectors: [[float(x) for x in v] for v in vectors],
        lambda stored: stored,
        f"embedding {len(plain)} text(s)",
    )


# -- knowledge


class JournaledKnowledgeStorage(BaseKnowledgeStorage):
    """A knowledge collection's storage: CrewAI's, with its embedder and searches journaled.

    CrewAI's ``KnowledgeStorage`` is built on first use, and chunks saved outside a run (the
    factory building the crew) are held until then: a crew refused before it runs touches
    nothing (no embedder, no folder, no network).
    """

    collection_name: str | None = None
    embedder: Any = Field(default=None, exclude=True)
    _inner: BaseKnowledgeStorage | None = PrivateAttr(default=None)
    _inner_lock: Any = PrivateAttr(default_factory=threading.RLock)
    # Chunks saved outside a run (while the factory builds the crew), saved at first use.
    _held: list[list[str]] = PrivateAttr(default_factory=list)

    def _storage(self) -> BaseKnowledgeStorage:
        with self._inner_lock:
            if self._inner is None:
                function = (
                    build_embedder(self.embedder)
                    if self.embedder
                    else _default_embedding_function()
                )
                settings = Settings(
                    persist_directory=_folder(),
                    allow_reset=True,
                    is_persistent=True,
                    anonymized_telemetry=False,
                )
                inner = KnowledgeStorage(collection_name=self.collection_name)
                config = ChromaDBConfig(
                    settings=settings, embedding_function=journal_embedder(function)
                )
                inner._client = create_client(config)
                self._inner = inner
            held, self._held = self._held, []
        for documents in held:
            self._inner.save(documents)
        return self._inner

    def _collection(self) -> str:
        return f"knowledge_{self.collection_name}" if self.collection_name else "knowledge"

    def search(
        self,
        query: list[str],
        limit: int = 5,
        metadata_filter: dict[str, Any] | None = None,
        score_threshold: float = 0.6,
    ) -> list[Any]:
        key = digest(self._collection(), query, limit, metadata_filter, score_threshold)
        return journaled(
            KNOWLEDGE,
            key,
            lambda: self._storage().search(query, limit, metadata_filter, score_threshold),
            lambda results: json.loads(json.dumps(results, default=str)),
            lambda stored: cast(list[Any], stored),
            f"a search of knowledge {self._collection()!r}",
        )

    async def asearch(
        self,
        query: list[str],
        limit: int = 5,
        metadata_filter: dict[str, Any] | None = None,
        score_threshold: float = 0.6,
    ) -> list[Any]:
        return self.search(query, limit, metadata_filter, score_threshold)

    def flush(self) -> None:
        """Save the chunks held since the crew was built (its knowledge's first use)."""
        with self._inner_lock:
            held = bool(self._held)
        if held:
            self._storage()

    def save(self, documents: list[str]) -> None:
        if not documents:
            return
        if current_run() is None:  # the factory is building the crew: nothing is sent yet
            with self._inner_lock:
                self._held.append(list(documents))
            return
        self._storage().save(documents)

    async def asave(self, documents: list[str]) -> None:
        self.save(documents)

    def reset(self) -> None:
        with self._inner_lock:
            self._held.clear()
        self._storage().reset()

    async def areset(self) -> None:
        self.reset()


def _folder() -> str:
    """Where a collection is kept: CrewAI's folder (read now; CrewAI reads it at import), and
    under a run a folder of the run's crew in it, since one worker runs many crews and CrewAI
    names a crew's collection ``knowledge_crew`` whatever the crew."""
    ctx = current_run()
    if ctx is None:
        return db_storage_path()
    crew = re.sub(r"[^A-Za-z0-9_.-]", "_", ctx.run.crew)
    return str(Path(db_storage_path()) / "countersign-knowledge" / crew)


def is_journaled(knowledge: Any) -> bool:
    """Whether a ``Knowledge`` keeps its chunks in a journaled storage."""
    return isinstance(getattr(knowledge, "storage", None), JournaledKnowledgeStorage)


def refusal(crew: Any, agents: list[Any], name: str) -> str | None:
    """Why the crew's knowledge cannot be journaled (a storage of the author's), or None."""
    knowing = [
        f"agent {a.role!r}"
        for a in agents
        if getattr(a, "knowledge", None) is not None and not is_journaled(a.knowledge)
    ]
    if crew.knowledge is not None and not is_journaled(crew.knowledge):
        knowing.insert(0, "the crew")
    if not knowing:
        return None
    return (
        f"crew {name!r} has knowledge built with a storage of its own ({', '.join(knowing)}), "
        "whose searches Countersign cannot journal. Give the crew knowledge_sources and "
        "leave the storage to CrewAI."
    )


def prepare(crew: Any, agents: list[Any], ctx: RunContext) -> None:
    """Save, under the run, the chunks CrewAI gave the crew's knowledge as the factory built
    it (held until now, so a refused crew sent none), as CrewAI saved them then.

    A crew with knowledge resumes by replaying its whole journal, not from a snapshot
    (``crew_runtime.snapshot``): before each task CrewAI asks the agent's model for a search
    query (``Agent._get_knowledge_search_query``), a turn outside the paused task's stream,
    which a snapshot does not bring back.
    """
    if crew.knowledge is not None or any(getattr(a, "knowledge_sources", None) for a in agents):
        ctx.load_whole_journal()
    with ctx.active():
        for knowledge in [crew.knowledge, *(getattr(a, "knowledge", None) for a in agents)]:
            storage = getattr(knowledge, "storage", None)
            if isinstance(storage, JournaledKnowledgeStorage):
                storage.flush()


# A knowledge storage factory the application registered before Countersign's.
_theirs: knowledge_factory.KnowledgeStorageFactory | None = None


def _knowledge_storage(embedder: Any, collection_name: str | None) -> BaseKnowledgeStorage:
    theirs = _theirs(embedder, collection_name) if _theirs is not None else None
    if theirs is not None:  # the application's own: its searches are not journaled (refused)
        return theirs
    return JournaledKnowledgeStorage(collection_name=collection_name, embedder=embedder)


def install() -> None:
    """Journal the knowledge and memory of every crew built in this process (idempotent)."""
    global _installed, _theirs
    from crew_runtime import memories

    with _lock:
        if _installed:
            return
        _theirs = knowledge_factory._factory
        knowledge_factory.set_knowledge_storage_factory(_knowledge_storage)
        memories.install()
        _installed = True
