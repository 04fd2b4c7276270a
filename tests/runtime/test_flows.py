"""CrewAI Flows with @human_feedback: paused in one process, resumed in another, routed by
the reviewer's button (never by an LLM)."""

from __future__ import annotations

import pytest

from storage import ReviewKind, RunStatus
from tests.support.harness import Bench


def _paused(bench: Bench) -> str:
    run = bench.start("article", topic="otters")
    bench.work_here()
    assert bench.run(run.id).status == RunStatus.WAITING
    review = bench.pending(run.id)
    assert review.kind == ReviewKind.TASK_REVIEW
    assert review.prompt == "Draft on otters (round 0)"
    assert review.details.description == "Publish this draft?"
    assert review.details.outcomes == ("approved", "rejected")
    return run.id


def test_approve_routes_to_the_approved_listener(bench: Bench) -> None:
    run_id = _paused(bench)
    bench.decide(run_id, "approve")
    bench.work_here()
    done = bench.run(run_id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    assert done.output == "PUBLISHED: Draft on otters (round 0)"
    assert len(bench.effects("flow_published")) == 1


def test_reject_routes_to_the_rejected_listener_with_the_reason(bench: Bench) -> None:
    run_id = _paused(bench)
    bench.decide(run_id, "reject", "not our tone")
    bench.work_here()
    done = bench.run(run_id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    assert done.output == "SHELVED: Draft on otters (round 0) (not our tone)"
    assert bench.effects("flow_published") == []


@pytest.mark.slow
def test_flow_resumes_in_another_process_and_survives_a_kill_after_the_reply(
    bench: Bench,
) -> None:
    run = bench.start("article", topic="otters")
    paused_in = bench.work()
    assert bench.run(run.id).status == RunStatus.WAITING
    bench.decide(run.id, "approve")
    doomed = bench.spawn(COUNTERSIGN_TEST_HOLD="publish")
    bench.kill_when_holding(doomed, "publish")
    finished_in = bench.work()
    done = bench.run(run.id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    assert done.output == "PUBLISHED: Draft on otters (round 0)"
    (published,) = bench.effects("flow_published")
    assert published["pid"] == finished_in != paused_in
