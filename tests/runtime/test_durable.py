"""Runs pause in one worker process and resume in another; workers die and others take over.

Every worker here is a real ``countersign worker`` process. The scripted LLM logs
each live call with its process id and prompt hash, so "no recorded turn is sent
to the LLM again" is checked on what the model actually received.
"""

from __future__ import annotations

import subprocess

import pytest

from crew_runtime.offline.drafts import parse_draft
from storage import ReviewKind, ReviewStatus, RunStatus
from tests.support.harness import Bench

pytestmark = pytest.mark.slow


def _no_turn_sent_twice(bench: Bench) -> None:
    hashes = [call["prompt_sha256"] for call in bench.llm_calls()]
    assert len(hashes) == len(set(hashes)), "a recorded turn was sent to the LLM again"


def test_question_pauses_in_one_process_and_resumes_in_another(bench: Bench) -> None:
    run = bench.start("research", topic="otters")
    first = bench.work()
    question = bench.pending(run.id)
    assert question.kind == ReviewKind.QUESTION
    assert bench.run(run.id).status == RunStatus.WAITING
    bench.decide(run.id, "answer", "casual")
    second = bench.work()
    done = bench.run(run.id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    assert "ask_human: casual" in parse_draft(done.output or "").notes
    # Two turns before the question (search, ask), two after (publish, final answer).
    assert bench.llm_calls_by_pid() == {first: 2, second: 2}
    _no_turn_sent_twice(bench)
    assert [e["pid"] for e in bench.effects("search")] == [first]
    assert [e["pid"] for e in bench.effects("published")] == [second]


def test_task_reviews_pause_and_resume_across_processes(bench: Bench) -> None:
    run = bench.start("writer", topic="otters")
    pids = [bench.work()]
    bench.decide(run.id, "changes", "shorter please")
    pids.append(bench.work())
    bench.decide(run.id, "approve")
    pids.append(bench.work())
    bench.decide(run.id, "approve")
    pids.append(bench.work())
    done = bench.run(run.id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    by_pid = bench.llm_calls_by_pid()
    assert [by_pid.get(pid, 0) for pid in pids] == [1, 1, 1, 0]
    _no_turn_sent_twice(bench)
    outline = parse_draft(parse_draft(done.output or "").context or "")
    assert outline.feedback == ("shorter please",) and outline.saw_previous_draft


def test_worker_killed_during_an_llm_call(bench: Bench) -> None:
    run = bench.start("research", topic="otters")
    doomed = bench.spawn(COUNTERSIGN_TEST_HOLD="llm")
    bench.kill_when_holding(doomed, "llm")
    assert bench.run(run.id).status == RunStatus.RUNNING
    bench.work()  # waits for the dead worker's lease to expire, then replays
    assert bench.pending(run.id).kind == ReviewKind.QUESTION
    bench.decide(run.id, "answer", "formal")
    bench.work()
    done = bench.run(run.id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    assert done.attempts == 1
    assert len(bench.effects("search")) == 1
    assert len(bench.effects("published")) == 1
    _no_turn_sent_twice(bench)


def test_worker_killed_right_after_a_side_effect(bench: Bench) -> None:
    run = bench.start("research", topic="otters")
    bench.work()
    bench.decide(run.id, "answer", "casual")
    doomed = bench.spawn(COUNTERSIGN_TEST_HOLD="after_publish")
    bench.kill_when_holding(doomed, "after_publish")
    bench.work()
    done = bench.run(run.id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    # The effect was not journaled before the kill, so the tool ran again, with the
    # same idempotency key, and the external service applied it once.
    executions = bench.effects("execution")
    assert len(executions) == 2 and len({e["key"] for e in executions}) == 1
    assert len(bench.effects("published")) == 1
    assert len(bench.effects("search")) == 1
    _no_turn_sent_twice(bench)


def test_worker_killed_right_after_a_decision_is_recorded(bench: Bench) -> None:
    run = bench.start("writer", topic="otters")
    bench.work()
    bench.decide(run.id, "approve")
    doomed = bench.spawn(COUNTERSIGN_TEST_HOLD="factory")
    bench.kill_when_holding(doomed, "factory")
    assert bench.run(run.id).status == RunStatus.RUNNING
    bench.work()
    assert bench.pending(run.id).stream == "task1:Editor"
    bench.decide(run.id, "approve")
    bench.work()
    done = bench.run(run.id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    assert len(bench.llm_calls()) == 2
    _no_turn_sent_twice(bench)


def test_two_workers_never_execute_one_run_at_once(bench: Bench) -> None:
    runs = [bench.start("plain", topic=f"topic {n}") for n in range(20)]
    # A long lease: on a loaded machine a heartbeat can be late, and a takeover is not
    # what this test is about (the kill tests are).
    workers = [bench.spawn("--concurrency", "2", lease=20) for _ in range(2)]
    for proc in workers:
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, out
    for run in runs:
        assert bench.run(run.id).status == RunStatus.SUCCEEDED
    searches = bench.effects("keyed_search")
    keys = [e["key"] for e in searches]
    assert len(keys) == 20 and len(set(keys)) == 20, "a tool call ran twice"
    assert len({e["pid"] for e in searches}) == 2, "both workers should have taken runs"
    assert len(bench.llm_calls()) == 40
    _no_turn_sent_twice(bench)


def test_racing_decisions_from_two_processes(bench: Bench) -> None:
    run = bench.start("writer", topic="otters")
    bench.work_here()
    review = bench.pending(run.id)
    procs = [
        subprocess.Popen(
            [
                *bench.cli_command(),
                "reviews",
                "decide",
                review.id,
                kind,
                *([] if kind == "approve" else ["too long"]),
                "--by",
                user,
            ],
            env=bench.worker_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for kind, user in (("approve", "U_A"), ("reject", "U_B"))
    ]
    outputs = [p.communicate(timeout=60) for p in procs]
    results = [(p.returncode, err) for p, (_, err) in zip(procs, outputs, strict=True)]
    codes = sorted(code for code, _ in results)
    assert codes == [0, 2], results
    (late,) = [err for code, err in results if code == 2]
    decided = bench.store.get_review(review.id)
    assert decided.status == ReviewStatus.DECIDED and decided.decision is not None
    assert f"already decided ({decided.decision.kind}) by {decided.decision.decided_by}" in late
    assert bench.run(run.id).status == RunStatus.QUEUED


def test_divergence_is_recorded_and_the_run_goes_on_live(bench: Bench) -> None:
    run = bench.start("writer", topic="otters")
    bench.work()
    old = bench.pending(run.id)
    bench.decide(run.id, "approve")
    changed = bench.work(COUNTERSIGN_TEST_CREW_VERSION="2")
    diverged = bench.run(run.id)
    assert diverged.divergence is not None and "task0:Writer" in diverged.divergence
    assert bench.store.get_review(old.id).status == ReviewStatus.SUPERSEDED
    fresh = bench.pending(run.id)
    assert (fresh.stream, fresh.seq) == ("task0:Writer", 0) and fresh.id != old.id
    assert bench.llm_calls_by_pid()[changed] == 1
    bench.decide(run.id, "approve")
    bench.work(COUNTERSIGN_TEST_CREW_VERSION="2")
    bench.decide(run.id, "approve")
    bench.work(COUNTERSIGN_TEST_CREW_VERSION="2")
    assert bench.run(run.id).status == RunStatus.SUCCEEDED
