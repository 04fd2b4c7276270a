"""Resume from a snapshot: a paused crew goes on from where it stood, without replaying its
journal; the journal stays the fallback and the check.

Crews run in a worker in the test's process, on SQLite (the storage they use is tested on both
backends below, and the killed worker's resume on both). What CrewAI's loop did in an
execution is read from the execution's counters: every LLM turn it ran goes through the
journal (``llm_replayed`` served from it, ``llm_live`` asked of the model), and ``snapshot``
counts the executors seeded from a snapshot.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import delete, update

from crew_runtime import journal_llm, snapshot
from crew_runtime.offline.drafts import parse_draft
from storage import (
    DecisionKind,
    LeaseLost,
    NewDecision,
    NewReview,
    ReviewKind,
    ReviewStatus,
    RunStatus,
    Snapshot,
    Store,
)
from storage.schema import snapshots
from tests.support.harness import ON_SQLITE, Bench

LONG_LOOP = """
[crews.long_loop]
factory = "tests.support.crews:long_loop"
description = "A long agentic task that asks a person, then a reviewed task"
"""


def _resume(bench: Bench, run_id: str) -> dict[str, Any]:
    """Work the run once more; the stats of its execution."""
    worker = bench.work_here()
    ((ran, outcome),) = list(worker.finished)
    assert ran == run_id
    return dict(outcome.stats)


def _no_turn_sent_twice(bench: Bench) -> None:
    hashes = [call["prompt_sha256"] for call in bench.llm_calls()]
    assert len(hashes) == len(set(hashes)), "a recorded turn was sent to the LLM again"


@ON_SQLITE  # its storage calls are those of the tests below, on both backends
def test_a_long_task_resumes_from_its_snapshot(bench: Bench) -> None:
    bench.add_crews(LONG_LOOP)
    run = bench.start("long_loop", topic="otters", turns="300")
    first = _resume(bench, run.id)
    assert first["llm_live"] == 301 and first["tool_live"] == 300
    assert bench.store.load_snapshot(run.id) is not None
    bench.decide(run.id, "answer", "casual")
    second = _resume(bench, run.id)
    # Only the turn before the question is served from the journal: CrewAI's loop ran one
    # recorded turn, no recorded tool call, and the model was asked nothing recorded.
    assert second["snapshot"] == 1
    assert second["llm_replayed"] == 1 and "tool_replayed" not in second
    assert second["llm_live"] == 3  # publish, the final answer, the editor's draft
    assert len(bench.effects("search")) == 300
    bench.decide(run.id, "approve")
    third = _resume(bench, run.id)  # the first task is skipped with its output
    assert third["snapshot"] == 1 and third["llm_replayed"] == 1 and "llm_live" not in third
    done = bench.run(run.id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    report = parse_draft(parse_draft(done.output or "").context or "")
    assert "ask_human: casual" in report.notes
    assert len(bench.effects("published")) == 1
    _no_turn_sent_twice(bench)


@ON_SQLITE
def test_a_changed_crew_replays_its_journal_and_diverges(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    bench.add_crews(LONG_LOOP)
    run = bench.start("long_loop", topic="otters", turns="4")
    _resume(bench, run.id)
    question = bench.pending(run.id)
    bench.decide(run.id, "answer", "casual")
    monkeypatch.setenv("COUNTERSIGN_TEST_CREW_VERSION", "2")  # another backstory
    resumed = _resume(bench, run.id)
    assert "snapshot" not in resumed
    # Replayed as before a snapshot existed: the first turn's prompt changed, the journal is
    # cut there, the answered question superseded, and the task runs live again.
    assert "llm_replayed" not in resumed and resumed["llm_live"] == 5
    assert bench.run(run.id).divergence is not None
    assert bench.store.get_review(question.id).status == ReviewStatus.SUPERSEDED
    assert bench.pending(run.id).kind == ReviewKind.QUESTION
    assert len(bench.effects("search")) == 8
    bench.decide(run.id, "answer", "formal")
    again = _resume(bench, run.id)  # the new recording has a snapshot of its own
    assert again["snapshot"] == 1 and again["llm_replayed"] == 1


@ON_SQLITE
def test_runs_recorded_with_the_earlier_digest_resume_without_diverging(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs paused by a release that digested prompts with ``json.dumps`` resume after an
    upgrade from their snapshot or their journal, with no turn taken for a changed one."""
    bench.add_crews(LONG_LOOP)
    earlier = journal_llm._stdlib_prompt_hash
    monkeypatch.setattr(journal_llm, "prompt_hash", earlier)
    monkeypatch.setattr(snapshot, "prompt_hash", earlier)
    runs = []
    for topic in ("otters", "kelp"):
        runs.append(bench.start("long_loop", topic=topic, turns="4"))
        _resume(bench, runs[-1].id)
    monkeypatch.undo()
    from_snapshot, from_journal = runs
    with bench.store.engine.begin() as conn:
        conn.execute(delete(snapshots).where(snapshots.c.run_id == from_journal.id))

    bench.decide(from_snapshot.id, "answer", "casual")
    resumed = _resume(bench, from_snapshot.id)
    assert resumed["snapshot"] == 1 and resumed["llm_replayed"] == 1
    bench.decide(from_journal.id, "answer", "casual")
    replayed = _resume(bench, from_journal.id)
    assert "snapshot" not in replayed and replayed["llm_replayed"] == 5
    for run in runs:
        assert bench.run(run.id).divergence is None
    assert len(bench.effects("search")) == 8  # each run's four searches, none again
    _no_turn_sent_twice(bench)


@ON_SQLITE
def test_callbacks_and_dates_are_kept_on_a_resume_from_a_snapshot(bench: Bench) -> None:
    bench.add_crews('[crews.options]\nfactory = "tests.support.crews:options"\n')
    run = bench.start("options", topic="otters", planning="off")
    _resume(bench, run.id)
    assert bench.pending(run.id).stream == "task1:Writer"
    bench.decide(run.id, "answer", "the playful side")
    resumed = _resume(bench, run.id)
    assert resumed["snapshot"] == 1 and resumed["llm_replayed"] == 1
    done = bench.run(run.id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    assert done.divergence is None  # the run's date came from the journal, as recorded
    # Each step and task reported once: the researcher's before the pause, the writer's
    # after it; the skipped task's callbacks did not run again.
    reported = Counter((e["which"], e["what"]) for e in bench.effects("callback"))
    assert reported == Counter(
        {("step", "ToolResult"): 2, ("step", "AgentAction"): 2, ("task", "Researcher"): 1}
        | {("crew_task", "Researcher"): 1, ("crew_task", "Writer"): 1}
    )


@ON_SQLITE
def test_review_rounds_resume_from_snapshots(bench: Bench) -> None:
    run = bench.start("writer", topic="otters")
    _resume(bench, run.id)
    for n in range(3):
        bench.decide(run.id, "changes", f"shorter please ({n})")
        stats = _resume(bench, run.id)
        assert stats["snapshot"] == 1 and stats["llm_replayed"] == 1 and stats["llm_live"] == 1
    bench.decide(run.id, "approve")
    assert _resume(bench, run.id)["snapshot"] == 1
    assert bench.pending(run.id).stream == "task1:Editor"
    bench.decide(run.id, "approve")
    last = _resume(bench, run.id)
    assert last["snapshot"] == 1 and "llm_live" not in last
    done = bench.run(run.id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    outline = parse_draft(parse_draft(done.output or "").context or "")
    assert outline.feedback == tuple(f"shorter please ({n})" for n in range(3))
    _no_turn_sent_twice(bench)


@ON_SQLITE
def test_revise_drops_the_snapshot_and_replays(bench: Bench) -> None:
    run = bench.start("trilogy", topic="otters")
    _resume(bench, run.id)
    for _ in range(2):
        bench.decide(run.id, "approve")
        assert _resume(bench, run.id)["snapshot"] == 1
    assert bench.pending(run.id).stream == "task2:Editor"
    bench.service.revise(run.id, 0, "add facts about otters", by="U_EDITOR")
    assert bench.store.load_snapshot(run.id) is None
    revised = _resume(bench, run.id)
    assert "snapshot" not in revised and revised["llm_replayed"] == 1
    assert bench.pending(run.id).stream == "task0:Planner"
    for stream in ("task1:Drafter", "task2:Editor"):
        bench.decide(run.id, "approve")
        assert _resume(bench, run.id)["snapshot"] == 1
        assert bench.pending(run.id).stream == stream
    bench.decide(run.id, "approve")
    _resume(bench, run.id)
    done = bench.run(run.id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    assert len(bench.llm_calls()) == 6  # as without snapshots: 3 drafts, 1 revision, 2 redone


@ON_SQLITE
@pytest.mark.parametrize("crew", ["delegation", "parallel"])
def test_shapes_a_snapshot_cannot_describe_replay(bench: Bench, crew: str) -> None:
    run = bench.start(crew, topic="otters")
    _resume(bench, run.id)
    assert bench.run(run.id).status == RunStatus.WAITING
    assert bench.store.load_snapshot(run.id) is None


def _claimed(store: Store) -> tuple[str, str]:
    run = store.create_run("writer", {})
    claim = store.claim_run("w1", timedelta(seconds=30))
    assert claim is not None and claim.lease_token is not None
    return run.id, claim.lease_token


def _ask(seq: int) -> NewReview:
    return NewReview(kind=ReviewKind.TASK_REVIEW, stream="task0:W", seq=seq, prompt="draft")


def test_a_snapshot_is_written_with_its_suspension_only(store: Store) -> None:
    run_id, token = _claimed(store)
    store.append_journal(run_id, token, stream="task0:W", kind="llm", seq=0, payload={})
    (review,) = store.suspend_run(run_id, token, [_ask(0)], snapshot=Snapshot(0, {"at": 0}))
    store.decide(review.id, NewDecision(DecisionKind.CHANGES, "U1", "more"))
    claim = store.claim_run("w2", timedelta(seconds=30))
    assert claim is not None and claim.lease_token is not None
    store.append_journal(run_id, claim.lease_token, stream="task0:W", kind="llm", seq=1, payload={})
    # An execution that lost its claim suspends nothing: the snapshot stays the one that
    # matches the last suspension, never one ahead of it.
    with pytest.raises(LeaseLost):
        store.suspend_run(run_id, token, [_ask(1)], snapshot=Snapshot(1, {"at": 1}))
    assert store.load_snapshot(run_id) == Snapshot(0, {"at": 0})
    # A resume from it reads the turns from its position on, and everything not a turn.
    store.append_journal(run_id, claim.lease_token, stream="crew", kind="clock", seq=0, payload={})
    kept = store.load_journal(run_id, turns_from=1, turn_kinds=("llm", "tool"))
    assert [(e.kind, e.seq) for e in kept] == [("llm", 1), ("clock", 0)]
    # A suspension without a snapshot drops the previous one.
    store.suspend_run(run_id, claim.lease_token, [_ask(1)])
    assert store.load_snapshot(run_id) is None


def test_a_cut_of_the_journal_drops_the_snapshot(store: Store) -> None:
    run_id, token = _claimed(store)
    store.append_journal(run_id, token, stream="task0:W", kind="llm", seq=0, payload={})
    (review,) = store.suspend_run(run_id, token, [_ask(0)], snapshot=Snapshot(0, {}))
    store.decide(review.id, NewDecision(DecisionKind.APPROVE, "U1"))
    claim = store.claim_run("w2", timedelta(seconds=30))
    assert claim is not None and claim.lease_token is not None
    store.record_divergence(run_id, claim.lease_token, 0, "changed")
    assert store.load_snapshot(run_id) is None
    store.append_journal(run_id, claim.lease_token, stream="task0:W", kind="llm", seq=0, payload={})
    again, _ = store.suspend_run(
        run_id, claim.lease_token, [_ask(0), _ask(1)], snapshot=Snapshot(1, {})
    )
    store.decide(again.id, NewDecision(DecisionKind.APPROVE, "U1"))  # the run still waits
    store.reopen_review(again.id, NewDecision(DecisionKind.CHANGES, "U1", "redo"))
    assert store.load_snapshot(run_id) is None


@pytest.mark.parametrize("end", ["finished", "cancelled"])
def test_a_run_that_ends_keeps_no_snapshot(store: Store, end: str) -> None:
    run_id, token = _claimed(store)
    store.append_journal(run_id, token, stream="task0:W", kind="llm", seq=0, payload={})
    (review,) = store.suspend_run(run_id, token, [_ask(0)], snapshot=Snapshot(0, {}))
    if end == "cancelled":
        store.cancel_run(run_id, by="U1")
    else:
        store.decide(review.id, NewDecision(DecisionKind.APPROVE, "U1"))
        claim = store.claim_run("w2", timedelta(seconds=30))
        assert claim is not None and claim.lease_token is not None
        store.finish_run(run_id, claim.lease_token, RunStatus.SUCCEEDED, output="done")
    assert store.load_snapshot(run_id) is None


@pytest.mark.slow
def test_a_worker_killed_after_a_resume_leaves_a_snapshot_that_still_fits(bench: Bench) -> None:
    bench.add_crews(LONG_LOOP)
    run = bench.start("long_loop", topic="otters", turns="3")
    bench.work()
    bench.decide(run.id, "answer", "casual")
    # Resumed from the snapshot, it publishes (journaled), then dies asking the model for
    # its final answer: the journal is past the snapshot, which still describes the pause.
    doomed = bench.spawn(COUNTERSIGN_TEST_HOLD="llm")
    bench.kill_when_holding(doomed, "llm")
    assert len(bench.effects("published")) == 1
    last = bench.work()  # from the snapshot: the publish turn and result come from the journal
    assert bench.pending(run.id).stream == "task1:Editor"
    assert len(bench.effects("published")) == 1
    assert bench.llm_calls_by_pid()[last] == 2  # the final answer, the editor's draft
    _no_turn_sent_twice(bench)


@ON_SQLITE
def test_a_native_turn_of_gated_calls_resumes_from_its_snapshot(bench: Bench) -> None:
    run = bench.start("parallel_payments")
    _resume(bench, run.id)
    reviews = bench.store.list_reviews(run_id=run.id)
    assert len(reviews) == 2
    for review in reviews:
        bench.service.decide(review.id, DecisionKind.APPROVE, None, by="U1")
    resumed = _resume(bench, run.id)
    # The native turn is served from the journal (its calls keep their places and reviews),
    # then both approved calls run once.
    assert resumed["snapshot"] == 1 and resumed["llm_replayed"] == 1
    assert bench.run(run.id).status == RunStatus.SUCCEEDED
    paid = sorted((e["amount"], e["to"]) for e in bench.effects("paid"))
    assert paid == [(1500, "ACME"), (2000, "GLOBEX")]


@ON_SQLITE
def test_a_task_whose_first_conversation_changed_is_replayed_from_its_start(
    bench: Bench,
) -> None:
    """The crew's fingerprint matches, but CrewAI now sets the paused task up differently
    (here: the stored digest of its first conversation no longer matches): that task is
    replayed from the whole journal instead of seeded."""
    bench.add_crews(LONG_LOOP)
    run = bench.start("long_loop", topic="otters", turns="4")
    _resume(bench, run.id)
    snapshot = bench.store.load_snapshot(run.id)
    assert snapshot is not None
    with bench.store.engine.begin() as conn:
        conn.execute(
            update(snapshots)
            .where(snapshots.c.run_id == run.id)
            .values(payload={**snapshot.payload, "setup": "another conversation"})
        )
    bench.decide(run.id, "answer", "casual")
    resumed = _resume(bench, run.id)
    assert "snapshot" not in resumed
    assert resumed["llm_replayed"] == 5 and resumed["tool_replayed"] == 4  # from its start
    assert len(bench.effects("search")) == 4
    assert bench.run(run.id).divergence is None
    assert bench.pending(run.id).stream == "task1:Editor"


@ON_SQLITE
def test_crewais_count_of_repeated_calls_survives_resumes(bench: Bench) -> None:
    """The same run resumed from its snapshots and from its journal ends the same way: CrewAI
    stops the fifth identical search, four of them made before the last resume."""
    bench.add_crews('[crews.repeating]\nfactory = "tests.support.crews:repeating"\n')
    endings = []
    for path in ("snapshot", "journal"):
        run = bench.start("repeating", topic="otters")
        _resume(bench, run.id)
        for n in range(4):
            if path == "journal":
                with bench.store.engine.begin() as conn:
                    conn.execute(delete(snapshots).where(snapshots.c.run_id == run.id))
            bench.decide(run.id, "answer", f"answer {n}")
            assert ("snapshot" in _resume(bench, run.id)) == (path == "snapshot")
        done = bench.run(run.id)
        endings.append((done.status, done.error))
    assert endings[0] == endings[1]
    assert endings[0][0] == RunStatus.FAILED and "5 times" in (endings[0][1] or "")
    assert len(bench.effects("search")) == 2 * 5  # the fifth ran, then CrewAI stopped
