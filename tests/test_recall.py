"""Knowledge sources and memory: nothing reaches the embedding provider unless it is journaled.

Every crew here embeds through CrewAI's OpenAI embedder pointed at a local stand-in of the
embeddings API (``tests/embeddings_standin.py``), which records each request: a test counts
the embedding calls a run made, or proves it made none.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from storage import RunStatus
from tests.embeddings_standin import KEY_ENV, EmbeddingsStandIn
from tests.harness import ON_SQLITE, Bench

pytestmark = [ON_SQLITE]

CONFIG = """
[crews.knowing]
factory = "tests.recall_crews:knowing"
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


@pytest.mark.parametrize("on", ["crew", "agent"])
def test_a_refused_knowledge_source_is_never_sent_to_the_embedder(
    recalling: Bench, api: EmbeddingsStandIn, on: str
) -> None:
    bench = recalling
    run = bench.start("knowing", topic="otters", on=on, embedder=api.base_url)
    bench.work_here()
    failed = bench.run(run.id)
    assert failed.status == RunStatus.FAILED
    assert failed.error is not None and "uses knowledge_sources" in failed.error
    assert api.requests() == []  # CrewAI's crew validator embeds while the factory builds
    assert api.problems == []
