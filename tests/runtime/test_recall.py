"""Knowledge sources and memory: nothing reaches the embedding provider unless it is journaled.

Every crew here embeds through CrewAI's OpenAI embedder pointed at a local stand-in of the
embeddings API (``tests/support/embeddings_standin.py``), which records each request: a test counts
the embedding calls a run made, or proves it made none.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from crewai import CrewOutput
from crewai.knowledge.storage import factory as knowledge_factory
from crewai.rag.chromadb import config as chromadb_config

from storage import RunStatus
from tests.support.embeddings_standin import KEY_ENV, EmbeddingsStandIn
from tests.support.harness import ON_SQLITE, Bench
from tests.support.recall_crews import remembering

pytestmark = [ON_SQLITE]

_SCORE = re.compile(r"score=[0-9.]+")

CONFIG = """
[crews.knowing]
factory = "tests.support.recall_crews:knowing"

[crews.remembering]
factory = "tests.support.recall_crews:remembering"

[flows.remembering_flow]
factory = "tests.support.recall_crews:remembering_flow"
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


def _plain(
    api: EmbeddingsStandIn, tmp: Path, monkeypatch: pytest.MonkeyPatch, on: str
) -> tuple[Counter[str], str]:
    """The texts plain CrewAI embeds running the crew once (here, unreviewed, no journal),
    and its output."""
    # Its stores in a folder of its own (CrewAI reads the knowledge folder at import).
    monkeypatch.setenv("CREWAI_STORAGE_DIR", str(tmp / "plain"))
    monkeypatch.setattr(chromadb_config, "DEFAULT_STORAGE_PATH", str(tmp / "plain"))
    held = knowledge_factory._factory
    knowledge_factory.set_knowledge_storage_factory(None)
    try:
        inputs = {"embedder": api.base_url, "topic": "otters", "review": "off", "on": on}
        crew = remembering(inputs)
        result = crew.kickoff(inputs={"topic": "otters"})
    finally:
        knowledge_factory.set_knowledge_storage_factory(held)
    assert isinstance(result, CrewOutput)
    texts = _texts(api)
    api.clear()
    return texts, _SCORE.sub("score=", result.raw)


def _texts(api: EmbeddingsStandIn) -> Counter[str]:
    """The texts embedded so far; a memory's score in them (it decays with the memory's age,
    so differs between any two runs) left out."""
    return Counter(_SCORE.sub("score=", text) for request in api.requests() for text in request)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("on", "embeddings"),
    # Per task: the memory recall's query, the knowledge search's, the memory saved. Then the
    # source's chunk: CrewAI saves a crew's sources each time it validates the crew (3
    # times), an agent's once.
    [("crew", 3 * 2 + 3), ("agent", 3 * 2 + 1)],
)
def test_memory_and_knowledge_embed_once_across_a_pause_and_a_kill(
    recalling: Bench,
    api: EmbeddingsStandIn,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    on: str,
    embeddings: int,
) -> None:
    bench = recalling
    plain, plain_output = _plain(api, tmp_path, monkeypatch, on)
    plain_calls = len(bench.llm_calls())
    assert sum(plain.values()) == embeddings, plain

    run = bench.start("remembering", topic="otters", embedder=api.base_url, on=on)
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
    assert done.output is not None and _SCORE.sub("score=", done.output) == plain_output

    embedded = _texts(api)
    # The knowledge of each crew in a folder of its own (CrewAI names it "knowledge_crew").
    assert (tmp_path / "third" / "countersign-knowledge" / "remembering").is_dir()
    assert embedded == plain  # not one more: no resume embedded anything again
    assert api.problems == []
    assert len(bench.llm_calls()) - plain_calls == plain_calls  # memory's model calls too
    notes = [e["pid"] for e in bench.effects("note") if e["pid"] != os.getpid()]
    assert len(notes) == 3  # the second task's note again after the kill (at least once)


@pytest.mark.slow
def test_a_flow_steps_crew_with_memory_and_knowledge_embeds_once_across_a_pause(
    recalling: Bench, api: EmbeddingsStandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bench = recalling
    plain, plain_output = _plain(api, tmp_path, monkeypatch, "crew")
    run = bench.start("remembering_flow", topic="otters", embedder=api.base_url)
    bench.work(CREWAI_STORAGE_DIR=str(tmp_path / "first"))
    assert bench.run(run.id).status == RunStatus.WAITING
    bench.decide(run.id, "approve")
    bench.work(CREWAI_STORAGE_DIR=str(tmp_path / "second"))
    done = bench.run(run.id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    assert done.divergence is None
    assert done.output is not None and _SCORE.sub("score=", done.output) == plain_output
    assert _texts(api) == plain
