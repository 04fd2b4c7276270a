"""An operator's log says what happened and what went wrong, and nothing else: a failed run
is logged with its reason, a first start creates the schema in one line (not Alembic's
twenty), and a crew started wrongly is the user's mistake (told to them), not a WARNING."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from crew_runtime.executor import Outcome
from crew_runtime.worker import ended
from storage import RunStatus, Store
from tests.support.harness import ON_SQLITE, Bench


@ON_SQLITE
def test_a_failed_run_is_logged_with_its_reason(
    bench: Bench, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="crew_runtime.worker")
    run = bench.start("broken")
    bench.work_here()
    assert bench.run(run.id).status is RunStatus.FAILED
    [line] = [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"run {run.id}:")]
    assert line.startswith(f"run {run.id}: failed: ")
    assert "the crew could not be built" in line
    assert "{}" not in line


def test_how_an_execution_ended_reads_as_one_line() -> None:
    reason = "ValueError: no\nmore " + "x" * 900
    said = ended(Outcome(RunStatus.FAILED, error=reason))
    assert said.startswith("failed: ValueError: no more xxx") and said.endswith("…")
    assert "\n" not in said and len(said) < 600
    assert ended(Outcome(RunStatus.SUCCEEDED, stats={"llm_live": 2})) == (
        "succeeded {'llm_live': 2}"
    )


def test_a_first_start_logs_one_line_for_the_schema(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    store = Store.open(f"sqlite:///{tmp_path / 'fresh.db'}")
    store.close()
    said = [r for r in caplog.records if r.levelno >= logging.INFO]
    assert [r.name for r in said if r.name.startswith("alembic")] == []
    [line] = [r.getMessage() for r in said if r.name == "storage.migrate"]
    assert line.startswith("database schema created: 00")
    caplog.clear()
    Store.open(f"sqlite:///{tmp_path / 'fresh.db'}").close()  # up to date: nothing to say
    assert [r for r in caplog.records if r.name in ("storage.migrate", "alembic")] == []
