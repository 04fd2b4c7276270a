"""Re-opening an approved task: the run rewinds to it, and every later task runs again."""

from __future__ import annotations

import pytest

from bot.cli.main import main
from crew_runtime.errors import UsageError
from crew_runtime.offline.drafts import parse_draft
from storage import NotWaiting, ReviewStatus, RunStatus
from tests.support.harness import Bench


def _at_task_three(bench: Bench) -> str:
    run = bench.start("trilogy", topic="otters")
    bench.work_here()
    bench.decide(run.id, "approve")  # task 1
    bench.work_here()
    bench.decide(run.id, "approve")  # task 2
    bench.work_here()
    assert bench.pending(run.id).stream == "task2:Editor"
    return run.id


def test_revise_task_one_from_task_three(bench: Bench) -> None:
    run_id = _at_task_three(bench)
    before = {r.id for r in bench.store.list_reviews(run_id=run_id, status=None)}
    assert bench.service.revisable_tasks(run_id) == [
        (0, "Task 1: Plan otters"),
        (1, "Task 2: Draft otters"),
    ]
    bench.service.revise(run_id, 0, "add facts about otters", by="U_EDITOR")
    bench.work_here()

    plan = bench.pending(run_id)
    assert plan.stream == "task0:Planner"
    revised = parse_draft(plan.prompt)
    assert revised.feedback == ("add facts about otters",) and revised.saw_previous_draft
    bench.decide(run_id, "approve")
    bench.work_here()
    draft = bench.pending(run_id)
    assert draft.stream == "task1:Drafter"
    assert parse_draft(draft.prompt).context == plan.prompt
    bench.decide(run_id, "approve")
    bench.work_here()
    final = bench.pending(run_id)
    assert parse_draft(final.prompt).context == draft.prompt
    bench.decide(run_id, "approve")
    bench.work_here()
    done = bench.run(run_id)
    assert done.status == RunStatus.SUCCEEDED
    assert parse_draft(done.output or "").context == draft.prompt

    # What the tasks did before is kept: the earlier reviews are superseded, not deleted.
    everything = {r.id: r for r in bench.store.list_reviews(run_id=run_id, status=None)}
    assert before <= set(everything)
    assert {everything[i].status for i in before} == {ReviewStatus.SUPERSEDED}
    # Each turn went to the model once: 3 first drafts, the revision, 2 redone tasks.
    assert len(bench.llm_calls()) == 6


def test_only_an_approved_task_of_a_waiting_run_can_be_reopened(bench: Bench) -> None:
    run_id = _at_task_three(bench)
    with pytest.raises(UsageError, match=r"task 3 of run .*approved tasks: 1, 2"):
        bench.service.revise(run_id, 2, "more", by="U1")
    with pytest.raises(UsageError, match="needs feedback"):
        bench.service.revise(run_id, 0, "  ", by="U1")
    bench.service.cancel(run_id, by="U1")
    with pytest.raises(NotWaiting):
        bench.service.revise(run_id, 0, "more", by="U1")
    assert bench.service.revisable_tasks(run_id) == []


def test_revise_from_the_command_line(bench: Bench, capsys: pytest.CaptureFixture[str]) -> None:
    run_id = _at_task_three(bench)
    argv = ["--config", str(bench.config_path), "--database-url", bench.db_url]
    assert main([*argv, "runs", "revise", run_id, "1", "shorter", "--by", "alice"], {}) == 0
    assert "task 1 reopened by alice" in capsys.readouterr().out
    assert bench.run(run_id).status == RunStatus.QUEUED
    assert main([*argv, "runs", "revise", run_id, "1", "again", "--by", "alice"], {}) == 2
    assert "not waiting" in capsys.readouterr().err
