"""A pause is not an error: no ERROR line and no failure panel for it; real errors keep both.

CrewAI reports whatever leaves a tool, a task or a crew as a failure; a verbose crew prints
panels for it. The crew here is verbose and runs in this process, so what it prints and logs
is captured.
"""

from __future__ import annotations

import logging

import pytest

from storage import ReviewKind, RunStatus
from tests.support.harness import Bench

FAILURE_WORDS = ("Crew Execution Failed", "Task Failure", "An unknown error occurred")


def test_a_pause_logs_one_info_line_and_prints_no_failure(
    bench: Bench, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    run = bench.start("verbose", topic="otters")
    bench.work_here()
    assert bench.pending(run.id).kind == ReviewKind.QUESTION
    printed = capsys.readouterr().out
    assert "Agent Started" in printed or "Reporter" in printed  # the crew is verbose indeed
    assert not [word for word in FAILURE_WORDS if word in printed]
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    waits = [r.getMessage() for r in caplog.records if "waiting for a person" in r.getMessage()]
    assert waits == [f"run {run.id}: waiting for a person (question) {{'llm_live': 1}}"]


def test_a_real_error_keeps_its_lines(
    bench: Bench, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    run = bench.start("verbose", topic="otters", fail="yes")
    bench.work_here()
    failed = bench.run(run.id)
    assert failed.status == RunStatus.FAILED and "the provider is down" in (failed.error or "")
    printed = capsys.readouterr().out
    assert "Crew Execution Failed" in printed
