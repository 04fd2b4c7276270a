"""Knowledge sources and memory: nothing reaches the embedding provider unless it is journaled.

Every crew here embeds through CrewAI's OpenAI embedder pointed at a local stand-in of the
embeddings API (``tests/embeddings_standin.py``), which records each request: a test counts
the embedding calls a run made, or proves it made none.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from crewai.knowledge.storage import factory as knowledge_factory
from crewai.rag.chromadb import config as chromadb_config

from storage import RunStatus
from tests.embeddings_standin import KEY_ENV, EmbeddingsStandIn
from tests.harness import ON_SQLITE, Bench
from tests.recall_crews import remembering

pytestmark = [ON_SQLITE]

_SCORE = re.compile(r"score=[0-9.]+")

CONFIG = """
[crews.knowing]
factory = "tests.recall_crews:knowing"

[crews.remembering]
factory = "tests.recall_crews:remembering"
"""


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[EmbeddingsStandIn]:
    monkeypatch.setenv(KEY_ENV, "sk-standin")
    with EmbeddingsStandIn() as standin:
        yield standin


@pytest.fixture
def recalling(bench: Bench) -> Bench:
    bench.add_crews(CONFIG)
    return bench


@pytest.mark.parametrize(
    ("refuse", "named"),
    [
        ("planning", "uses planning=True without a planning_llm"),
        ("storage", "has knowledge built with a storage of its own (the crew)"),
    ],
)
def test_a_refused_crew_sends_none_of_its_knowledge_to_the_embedder(
    recalling: Bench, api: EmbeddingsStandIn, refuse: str, named: str
) -> None:
    bench = recalling
    run = bench.start("knowing", topic="otters", refuse=refuse, embedder=api.base_url)
    bench.work_here()
    failed = bench.run(run.id)
    assert failed.status == RunStatus.FAILED
    assert failed.error is not None and f"crew 'knowing' {named}" in failed.error
    assert api.requests() == []  # CrewAI's crew validator embeds while the factory builds
    assert api.problems == []
    assert bench.llm_calls() == []


def _plain(api: EmbeddingsStandIn, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """The texts plain CrewAI embeds running the crew once (here, unreviewed, no journal)."""
    # Its stores in a folder of its own (CrewAI reads the knowledge folder at import).
    monkeypatch.setenv("CREWAI_STORAGE_DIR", str(tmp / "plain"))
    monkeypatch.setattr(chromadb_config, "DEFAULT_STORAGE_PATH", str(tmp / "plain"))
    held = knowledge_factory._factory
    knowledge_factory.set_knowledge_storage_factory(None)
    try:
        crew = remembering({"embedder": api.base_url, "topic": "otters", "review": "off"})
        crew.kickoff(inputs={"topic": "otters"})
    finally:
        knowledge_factory.set_knowledge_storage_factory(held)
    texts = _texts(api)
    api.clear()
    return texts


def _texts(api: EmbeddingsStandIn) -> Counter[str]:
    """The texts embedded so far; a memory's score in them (it decays with the memory's age,
    so differs between any two runs) left out."""
    return Counter(_SCORE.sub("score=", text) for request in api.requests() for text in request)


@pytest.mark.slow
def test_memory_and_knowledge_embed_once_across_a_pause_and_a_kill(
    recalling: Bench, api: EmbeddingsStandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bench = recalling
    plain = _plain(api, tmp_path, monkeypatch)
    plain_calls = len(bench.llm_calls())
    assert plain and sum(plain.values()) == 9, plain  # 3 chunk saves, and per task 3 calls

    run = bench.start("remembering", topic="otters", embedder=api.base_url)
    # Each worker has a store of its own, as on another machine: nothing is read back
    # from a folder an earlier execution wrote.
    bench.work(CREWAI_STORAGE_DIR=str(tmp_path / "first"))
    assert bench.run(run.id).status == RunStatus.WAITING
    first = api.requests()
    assert first, "the first task embeds its knowledge and recalls from memory"

    bench.decide(run.id, "approve")
    killed = bench.spawn(CREWAI_STORAGE_DIR=str(tmp_path / "second"), COUNTERSIGN_TEST_HOLD="note")
    bench.kill_when_holding(killed, "note")  # in the second task's tool call
    bench.work("--lease", "0.5", CREWAI_STORAGE_DIR=str(tmp_path / "third"))
    done = bench.run(run.id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    assert done.divergence is None

    embedded = _texts(api)
    assert embedded == plain  # not one more: no resume embedded anything again
    assert api.problems == []
    assert len(bench.llm_calls()) - plain_calls == plain_calls  # memory's model calls too
    notes = [e["pid"] for e in bench.effects("note") if e["pid"] != os.getpid()]
    assert len(notes) == 3  # the second task's note again after the kill (at least once)
