"""Text the database refuses, met by a run: its run fails at once, saying so.

A draft holding a NUL (PostgreSQL's text refuses it) or a lone surrogate (no UTF-8
encoder takes one) would be refused again on every replay; taken for a crash, the run
was replayed until it "gave up: the worker running it stopped 4 times".
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from crew_runtime import Worker, WorkerSettings
from storage import RunStatus
from tests.support.harness import Bench


@pytest.mark.parametrize("reviewed", ["yes", "no"], ids=["review", "output"])
@pytest.mark.parametrize("poison", ["nul", "surrogate"])
def test_a_draft_the_database_refuses_fails_its_run_after_one_attempt(
    bench: Bench, poison: str, reviewed: str
) -> None:
    if poison == "nul" and bench.db_url.startswith("sqlite"):
        pytest.skip("SQLite stores a NUL; PostgreSQL refuses it")
    run = bench.start("unstorable", poison=poison, reviewed=reviewed)
    # A short lease: were the run left running, it would be retried within seconds.
    settings = WorkerSettings(
        concurrency=1,
        lease=timedelta(seconds=1),
        poll=timedelta(seconds=0.05),
    )
    Worker(bench.store, bench.config, settings).run(until_idle=True)

    ended = bench.run(run.id)
    assert ended.status == RunStatus.FAILED, ended.error
    what = "the review it asked for" if reviewed == "yes" else "its output"
    assert (ended.error or "").startswith(f"{what} could not be stored: the database refused")
    assert ended.attempts == 0
    assert len(bench.llm_calls()) == 1
    assert bench.store.list_reviews(run_id=run.id, status=None) == []
