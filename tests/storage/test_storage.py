"""Storage on real SQLite and PostgreSQL: compare-and-set transitions, leases, the journal."""

from __future__ import annotations

import threading
from collections.abc import Collection
from datetime import timedelta
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from storage import (
    AlreadyDecided,
    AlreadyFinal,
    DecisionKind,
    DecisionNotAllowed,
    FlowPause,
    FlowStore,
    LeaseLost,
    NewDecision,
    NewEntry,
    NewReview,
    OutboxClaimLost,
    OutboxKind,
    ReviewKind,
    ReviewNotFound,
    ReviewStatus,
    Run,
    RunNotFound,
    RunStatus,
    Store,
)
from storage.inbox import InboxStore, NewRequest
from storage.rows import decisions_by_review
from storage.schema import metadata
from storage.status import RunNote
from tests.support.timing import FakeClock

LEASE = timedelta(seconds=30)
HOLD = timedelta(seconds=30)  # a dispatcher's claim on an outbox row


def _ask(seq: int = 0, kind: ReviewKind = ReviewKind.TASK_REVIEW) -> NewReview:
    return NewReview(kind=kind, stream="task0:Writer", seq=seq, prompt=f"draft {seq}")


def _claim(store: Store, worker_id: str = "w1", exclude: Collection[str] = ()) -> Run:
    """Claim the next run, which the test expects there to be."""
    claimed = store.claim_run(worker_id, LEASE, exclude=exclude)
    assert claimed is not None and claimed.lease_token is not None
    return claimed


def _token(run: Run) -> str:
    assert run.lease_token is not None
    return run.lease_token


def _waiting_review(store: Store, kind: ReviewKind = ReviewKind.TASK_REVIEW) -> tuple[str, str]:
    run = store.create_run("writer", {"topic": "otters"})
    claim = _claim(store)
    (review,) = store.suspend_run(run.id, _token(claim), [_ask(kind=kind)])
    return run.id, review.id


@pytest.mark.empty_database
def test_migrations_match_the_tables(db_url: str) -> None:
    store = Store.open(db_url)  # the migrations, from an empty database
    try:
        with store.engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn), metadata)
        assert diff == []
        store.upgrade()  # a second upgrade is a no-op
    finally:
        store.close()


def test_run_lifecycle_and_outbox(store: Store) -> None:
    run = store.create_run("writer", {"topic": "otters"}, started_by="U1")
    assert run.status == RunStatus.QUEUED
    claimed = _claim(store)
    assert claimed.id == run.id
    assert claimed.status == RunStatus.RUNNING and claimed.lease_owner == "w1"
    assert store.claim_run("w2", LEASE) is None
    finished = store.finish_run(run.id, _token(claimed), RunStatus.SUCCEEDED, output="done")
    assert finished.status == RunStatus.SUCCEEDED and finished.output == "done"
    assert finished.lease_token is None and finished.lease_owner is None
    kinds = [m.kind for m in store.due_outbox()]
    assert kinds == [OutboxKind.RUN_STARTED, OutboxKind.RUN_FINISHED]
    with pytest.raises(LeaseLost):
        store.finish_run(run.id, _token(claimed), RunStatus.FAILED, error="late")
    assert store.get_run(run.id).output == "done"


def test_expired_lease_makes_the_run_claimable(db_url: str) -> None:
    clock = FakeClock()
    store = Store.open(db_url, clock=clock)
    run = store.create_run("writer", {})
    first = _token(_claim(store))
    clock.advance(seconds=20)
    assert store.extend_lease(run.id, first, LEASE)
    clock.advance(seconds=29)
    assert store.claim_run("w2", LEASE) is None  # renewed in time: not claimable
    clock.advance(seconds=2)
    taken = _claim(store, "w2")
    assert taken.lease_owner == "w2" and taken.attempts == 1 and taken.lease_token != first
    # The first claim is fenced off everything.
    assert not store.extend_lease(run.id, first, LEASE)
    with pytest.raises(LeaseLost):
        store.append_journal(run.id, first, stream="s", kind="llm", seq=0, payload={})
    with pytest.raises(LeaseLost):
        store.suspend_run(run.id, first, [_ask()])
    store.close()


def test_a_claim_made_again_by_the_same_worker_fences_off_the_first(db_url: str) -> None:
    # One worker, two executions of one run: the first stalled past its lease and the
    # worker claimed the run again. Only the second claim's token may write.
    clock = FakeClock()
    store = Store.open(db_url, clock=clock)
    run = store.create_run("writer", {})
    old = _token(_claim(store, "w1"))
    store.append_journal(run.id, old, stream="s", kind="llm", seq=0, payload={"text": "a"})
    clock.advance(seconds=31)
    again = _claim(store, "w1")
    assert again.id == run.id and again.lease_owner == "w1"
    new = _token(again)
    assert new != old

    assert not store.extend_lease(run.id, old, LEASE)
    with pytest.raises(LeaseLost, match=f"run {run.id} under lease {old}"):
        store.append_journal(run.id, old, stream="s", kind="tool", seq=0, payload={})
    with pytest.raises(LeaseLost):
        store.record_divergence(run.id, old, 0, "late")
    with pytest.raises(LeaseLost):
        store.note_run(run.id, old, RunNote.OFFLINE_MODEL)
    with pytest.raises(LeaseLost):
        store.suspend_run(run.id, old, [_ask()])
    with pytest.raises(LeaseLost):
        store.finish_run(run.id, old, RunStatus.FAILED, error="late")
    store.release_run(run.id, old)  # a no-op: the run stays with the second claim

    held = store.get_run(run.id)
    assert held.status == RunStatus.RUNNING and held.lease_token == new
    assert [e.kind for e in store.load_journal(run.id)] == ["llm"]
    assert store.get_run(run.id).divergence is None
    assert [m.kind for m in store.due_outbox()] == [OutboxKind.RUN_STARTED]
    store.append_journal(run.id, new, stream="s", kind="tool", seq=0, payload={"result": "b"})
    done = store.finish_run(run.id, new, RunStatus.SUCCEEDED, output="done")
    assert done.status == RunStatus.SUCCEEDED and done.lease_token is None
    store.close()


def test_a_lease_renewed_late_is_kept_if_nobody_claimed_the_run(db_url: str) -> None:
    clock = FakeClock()
    store = Store.open(db_url, clock=clock)
    run = store.create_run("writer", {})
    token = _token(_claim(store))
    clock.advance(seconds=45)  # a stall past the lease, and nobody else came
    assert store.extend_lease(run.id, token, LEASE)
    assert store.claim_run("w2", LEASE) is None
    clock.advance(seconds=29)
    assert store.claim_run("w2", LEASE) is None
    assert store.get_run(run.id).lease_token == token
    store.close()


def test_claim_skips_the_runs_the_worker_is_executing(db_url: str) -> None:
    clock = FakeClock()
    store = Store.open(db_url, clock=clock)
    first = store.create_run("writer", {})
    clock.advance(seconds=1)
    second = store.create_run("writer", {})
    assert [_claim(store).id, _claim(store).id] == [first.id, second.id]
    clock.advance(seconds=31)  # both leases ran out while the worker was stalled
    assert store.claim_run("w1", LEASE, exclude=[first.id, second.id]) is None
    taken = _claim(store, "w1", exclude=[first.id])
    assert taken.id == second.id and taken.attempts == 1
    assert store.get_run(first.id).attempts == 0  # left alone
    store.close()


def test_a_run_whose_worker_keeps_dying_is_failed(db_url: str) -> None:
    clock = FakeClock()
    store = Store.open(db_url, clock=clock)
    run = store.create_run("writer", {})
    for n in range(4):
        _claim(store, f"w{n}")
        clock.advance(seconds=31)
    assert store.claim_run("w9", LEASE) is None
    failed = store.get_run(run.id)
    assert failed.status == RunStatus.FAILED
    assert failed.error is not None and "stopped 4 times" in failed.error
    store.close()


def test_decision_requeues_the_run_once(store: Store) -> None:
    run_id, review_id = _waiting_review(store)
    assert store.get_run(run_id).status == RunStatus.WAITING
    decided = store.decide(review_id, NewDecision(DecisionKind.EDIT, "U1", text="better"))
    assert decided.status == ReviewStatus.DECIDED
    assert decided.decision is not None
    assert decided.decision.text == "better" and decided.decision.original == "draft 0"
    assert store.get_run(run_id).status == RunStatus.QUEUED
    with pytest.raises(AlreadyDecided) as late:
        store.decide(review_id, NewDecision(DecisionKind.REJECT, "U2", text="no"))
    assert late.value.by == "U1" and late.value.kind == "edit"
    assert "already decided (edit) by U1" in str(late.value)


def test_decision_kind_must_fit_the_review(store: Store) -> None:
    _, review_id = _waiting_review(store, ReviewKind.QUESTION)
    with pytest.raises(DecisionNotAllowed, match="use one of: answer, reject"):
        store.decide(review_id, NewDecision(DecisionKind.APPROVE, "U1"))
    assert store.get_review(review_id).status == ReviewStatus.PENDING


def test_racing_decisions_record_exactly_one(store: Store) -> None:
    run_id, review_id = _waiting_review(store)
    barrier = threading.Barrier(8)
    outcomes: list[str] = []

    def decide(n: int) -> None:
        barrier.wait()
        kind = DecisionKind.APPROVE if n % 2 else DecisionKind.REJECT
        try:
            store.decide(review_id, NewDecision(kind, f"U{n}", text="r"))
            outcomes.append("won")
        except AlreadyDecided:
            outcomes.append("late")

    threads = [threading.Thread(target=decide, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["late"] * 7 + ["won"]
    assert store.get_run(run_id).status == RunStatus.QUEUED
    decided = [m for m in store.due_outbox() if m.kind == OutboxKind.REVIEW_DECIDED]
    assert len(decided) == 1


def test_run_waits_for_every_review_of_a_turn(store: Store) -> None:
    run = store.create_run("outreach", {})
    claim = _claim(store)
    first, second = store.suspend_run(
        run.id,
        _token(claim),
        [_ask(0, ReviewKind.TOOL_APPROVAL), _ask(1, ReviewKind.TOOL_APPROVAL)],
    )
    store.decide(first.id, NewDecision(DecisionKind.APPROVE, "U1"))
    assert store.get_run(run.id).status == RunStatus.WAITING
    store.decide(second.id, NewDecision(DecisionKind.APPROVE, "U1"))
    assert store.get_run(run.id).status == RunStatus.QUEUED


def test_cancel_in_every_non_final_state(store: Store) -> None:
    queued = store.create_run("writer", {})
    assert store.cancel_run(queued.id, "U1").status == RunStatus.CANCELLED
    running = store.create_run("writer", {})
    claim = _claim(store)
    cancelled = store.cancel_run(running.id, "U1")
    assert cancelled.status == RunStatus.CANCELLED and cancelled.lease_token is None
    assert not store.extend_lease(running.id, _token(claim), LEASE)
    run_id, review_id = _waiting_review(store)
    assert store.cancel_run(run_id, "U1").status == RunStatus.CANCELLED
    assert store.get_review(review_id).status == ReviewStatus.CANCELLED
    with pytest.raises(AlreadyDecided, match="no longer pending"):
        store.decide(review_id, NewDecision(DecisionKind.APPROVE, "U2"))
    with pytest.raises(AlreadyFinal):
        store.cancel_run(run_id, "U1")


def test_journal_appends_in_order_and_divergence_truncates(store: Store) -> None:
    run = store.create_run("writer", {})
    first = _token(_claim(store))
    for seq in range(3):
        pos = store.append_journal(
            run.id, first, stream="task0:W", kind="llm", seq=seq, payload={"text": f"t{seq}"}
        )
        assert pos == seq
    (review,) = store.suspend_run(run.id, first, [_ask(0)])
    assert store.get_run(run.id).lease_token is None
    store.decide(review.id, NewDecision(DecisionKind.APPROVE, "U1"))
    second = _token(_claim(store, "w2"))
    store.record_divergence(run.id, second, 1, "prompt changed at task0:W #1")
    assert [e.seq for e in store.load_journal(run.id)] == [0]
    assert store.get_review(review.id).status == ReviewStatus.SUPERSEDED
    assert store.list_reviews(run_id=run.id) == []
    assert store.get_run(run.id).divergence == "prompt changed at task0:W #1"


def test_unknown_ids(store: Store) -> None:
    with pytest.raises(RunNotFound):
        store.get_run("run_nope")
    with pytest.raises(ReviewNotFound):
        store.decide("rev_nope", NewDecision(DecisionKind.APPROVE, "U1"))


def test_outbox_retry_and_single_send(db_url: str) -> None:
    clock = FakeClock()
    store = Store.open(db_url, clock=clock)
    store.create_run("writer", {})
    (message,) = store.due_outbox()
    assert store.claim_outbox(message.id, "d1", HOLD) is not None
    store.mark_failed(message.id, "d1", "ratelimited", timedelta(seconds=5))
    assert store.due_outbox() == []
    assert store.claim_outbox(message.id, "d1", HOLD) is None  # backing off
    clock.advance(seconds=6)
    (again,) = store.due_outbox()
    assert again.attempts == 1
    assert store.claim_outbox(again.id, "d2", HOLD) is not None
    assert not store.mark_sent(again.id, "d1")  # the first claim is spent
    assert store.mark_sent(again.id, "d2")
    assert not store.mark_sent(again.id, "d2")
    assert store.due_outbox() == []
    store.close()


def test_one_dispatcher_holds_a_row_until_its_claim_runs_out(db_url: str) -> None:
    clock = FakeClock()
    store = Store.open(db_url, clock=clock)
    store.create_run("writer", {})
    (message,) = store.due_outbox()
    first = store.claim_outbox(message.id, "d1", HOLD)
    assert first is not None and first.progress == {}
    assert store.claim_outbox(message.id, "d2", HOLD) is None
    assert store.due_outbox() == []
    store.save_outbox_progress(message.id, "d1", {"root": {"state": "tried"}})
    with pytest.raises(OutboxClaimLost):
        store.save_outbox_progress(message.id, "d2", {"root": {"state": "done"}})
    clock.advance(seconds=20)
    assert store.renew_outbox_claim(message.id, "d1", HOLD)
    clock.advance(seconds=20)  # 40 s after the claim, 20 s after the renewal
    assert store.claim_outbox(message.id, "d2", HOLD) is None
    clock.advance(seconds=11)  # d1 died: its claim runs out, d2 goes on from its progress
    taken = store.claim_outbox(message.id, "d2", HOLD)
    assert taken is not None and taken.progress == {"root": {"state": "tried"}}
    assert not store.renew_outbox_claim(message.id, "d1", HOLD)
    with pytest.raises(OutboxClaimLost):
        store.save_outbox_progress(message.id, "d1", {})
    store.mark_failed(message.id, "d1", "late", timedelta(seconds=1))  # not its row any more
    assert store.mark_sent(message.id, "d2")
    store.close()


def test_later_rows_of_a_run_wait_for_one_that_keeps_failing(db_url: str) -> None:
    clock = FakeClock()
    store = Store.open(db_url, clock=clock)
    run_id, _ = _waiting_review(store)
    other = store.create_run("writer", {})
    started, opened, other_started = store.due_outbox()
    assert other_started.run_id == other.id
    assert store.claim_outbox(opened.id, "d1", HOLD) is None  # its root message comes first
    assert store.claim_outbox(started.id, "d1", HOLD) is not None
    assert [m.id for m in store.due_outbox()] == [other_started.id]  # held: the run waits
    store.mark_failed(started.id, "d1", "slack: fatal_error", timedelta(seconds=30))
    assert [m.id for m in store.due_outbox()] == [other_started.id]  # backing off: still
    clock.advance(seconds=31)
    assert [m.id for m in store.due_outbox()] == [started.id, opened.id, other_started.id]
    assert store.claim_outbox(started.id, "d1", HOLD) is not None
    assert store.mark_sent(started.id, "d1", thread=(run_id, "C1", "100.1"))
    assert store.claim_outbox(opened.id, "d1", HOLD) is not None
    store.close()


def test_inbox_records_once_per_key_and_hands_back_what_a_dead_handler_left(db_url: str) -> None:
    clock = FakeClock()
    store = Store.open(db_url, clock=clock)
    inbox = InboxStore(store, claim=timedelta(seconds=10))
    first, twin, other = inbox.record(
        [
            NewRequest("msg:C1:1.1", '{"text": "lgtm \\u0000"}', "application/json"),
            NewRequest("msg:C1:1.1", '{"text": "the twin event"}', "application/json"),
            NewRequest("sig:v0=2", "command=%2Fcrew&text=caf%C3%A9", "application/x-www-form"),
        ]
    )
    assert first is not None and other is not None and twin is None
    assert inbox.record([NewRequest("msg:C1:1.1", "{}", "application/json")]) == [None]
    assert inbox.claim_stale() == []  # claimed by whoever recorded them
    inbox.finish([(other, None)])
    clock.advance(seconds=11)  # the handler of the first one died
    (stale,) = inbox.claim_stale()
    assert (stale.id, stale.attempts) == (first, 2)
    assert (stale.body, stale.content_type) == ('{"text": "lgtm \\u0000"}', "application/json")
    assert inbox.claim_stale() == []  # claimed again, by this caller
    inbox.record([], finished=[(first, None)])
    assert inbox.count_open() == 0
    clock.advance(hours=2)
    assert inbox.forget(timedelta(hours=1)) == 2
    store.close()


def test_a_request_starts_one_run_and_makes_one_decision_however_often_replayed(
    store: Store,
) -> None:
    run = store.create_run("writer", {"topic": "otters"}, request_key="trigger:T1")
    again = store.create_run("writer", {"topic": "otters"}, request_key="trigger:T1")
    assert again.id == run.id
    assert len(store.list_runs()) == 1
    (review,) = store.suspend_run(run.id, _token(_claim(store)), [_ask()])
    approve = NewDecision(DecisionKind.APPROVE, "U1", request_key="trigger:T2")
    decided = store.decide(review.id, approve)
    assert store.decide(review.id, approve) == decided  # the replay, answered as the first
    with pytest.raises(AlreadyDecided):  # the same person's second click is another request
        store.decide(review.id, NewDecision(DecisionKind.APPROVE, "U1", request_key="trigger:T3"))
    assert store.get_run(run.id).status == RunStatus.QUEUED


def test_thread_and_review_message_are_remembered_with_the_send(store: Store) -> None:
    run_id, review_id = _waiting_review(store)
    started, opened = store.due_outbox()
    assert store.claim_outbox(started.id, "d1", HOLD) is not None
    assert store.mark_sent(started.id, "d1", thread=(run_id, "C1", "100.1"))
    assert store.claim_outbox(opened.id, "d1", HOLD) is not None
    assert store.mark_sent(opened.id, "d1", review_message=(review_id, "C1", "100.2"))
    found = store.find_run_by_thread("C1", "100.1")
    assert found is not None and found.id == run_id
    assert store.get_review(review_id).message_ts == "100.2"
    assert store.find_run_by_thread("C1", "100.2") is None


def test_sweep_reminds_escalates_and_expires_once(db_url: str) -> None:
    clock = FakeClock()
    store = Store.open(db_url, clock=clock)
    run = store.create_run("writer", {})
    claim = _claim(store)
    soon = clock.now + timedelta(minutes=5)
    ask = NewReview(
        kind=ReviewKind.TASK_REVIEW,
        stream="task0:W",
        seq=0,
        prompt="draft",
        remind_at=soon,
        escalate_at=soon + timedelta(minutes=5),
        expires_at=soon + timedelta(minutes=10),
    )
    (review,) = store.suspend_run(run.id, _token(claim), [ask])
    assert store.sweep_reviews() == {"reminded": 0, "escalated": 0, "expired": 0}
    clock.advance(minutes=6)
    assert store.sweep_reviews() == {"reminded": 1, "escalated": 0, "expired": 0}
    assert store.sweep_reviews() == {"reminded": 0, "escalated": 0, "expired": 0}
    clock.advance(minutes=10)
    assert store.sweep_reviews() == {"reminded": 0, "escalated": 1, "expired": 1}
    expired = store.get_review(review.id)
    assert expired.decision is not None
    assert expired.decision.kind == DecisionKind.EXPIRE
    assert store.get_run(run.id).status == RunStatus.QUEUED
    kinds = [m.kind for m in store.due_outbox()]
    assert kinds.count(OutboxKind.REVIEW_REMINDED) == 1
    assert kinds.count(OutboxKind.REVIEW_ESCALATED) == 1
    store.close()


def test_a_run_note_is_enqueued_once_by_the_lease_holder(store: Store) -> None:
    run_id, review_id = _waiting_review(store)
    store.decide(review_id, NewDecision(DecisionKind.APPROVE, "U1"))
    with pytest.raises(LeaseLost):  # waiting, then queued: nobody holds it
        store.note_run(run_id, "no-claim", RunNote.OFFLINE_MODEL)
    claim = _token(_claim(store))
    assert store.note_run(run_id, claim, RunNote.OFFLINE_MODEL) is True
    (note,) = [m for m in store.due_outbox() if m.kind == OutboxKind.RUN_NOTE]
    assert note.payload == {"note": "offline_model"}
    for message in store.due_outbox():  # the rows before it first, then the note
        assert store.claim_outbox(message.id, "d1", HOLD) is not None
        assert store.mark_sent(message.id, "d1")
        if message.id == note.id:
            break
    assert store.note_run(run_id, claim, RunNote.OFFLINE_MODEL) is False  # sent, still once
    other = store.create_run("writer", {})
    other_claim = _token(_claim(store, "w2"))
    assert store.note_run(other.id, other_claim, RunNote.OFFLINE_MODEL) is True  # once per run
    assert [m.run_id for m in store.due_outbox() if m.kind == OutboxKind.RUN_NOTE] == [other.id]


def test_sqlite_commits_leave_the_log_to_a_checkpoint_off_their_path(tmp_path: Path) -> None:
    database = tmp_path / "wal.db"
    store = Store.open(f"sqlite:///{database}")
    for n in range(300):  # past the 1,000 pages at which a commit would fold the log in
        store.create_run("writer", {"topic": "x" * 4000 + str(n)})
    log = database.with_name("wal.db-wal")
    before = database.stat().st_size
    assert log.stat().st_size > 4_000_000 and before < 1_000_000  # no commit folded it in
    store.checkpoint()
    assert database.stat().st_size > before + 1_000_000
    store.close()


def test_a_flows_pause_is_saved_with_its_suspension_or_not_at_all(store: Store) -> None:
    """A flow's pending feedback and the journal entries of its pause commit with the review
    that asks for it: a suspension refused (here, by a stale token) leaves none of them."""
    run = store.create_run("article", {})
    claimed = _claim(store)
    assert claimed.lease_token is not None
    pause = FlowPause("flow-1", {"method_name": "outline"}, {"topic": "otters"})
    entry = NewEntry("flow", "kickoffs", 0, {"counts": {"flow:write": 1}})
    with pytest.raises(LeaseLost):
        store.suspend_run(run.id, "stale", [_ask()], entries=[entry], flow=pause)
    assert FlowStore(store).load_pending("flow-1") is None
    assert store.load_journal(run.id) == []
    (review,) = store.suspend_run(
        run.id, claimed.lease_token, [_ask()], entries=[entry], flow=pause
    )
    assert FlowStore(store).load_pending("flow-1") == ({"topic": "otters"}, pause.context)
    (journaled,) = store.load_journal(run.id)
    assert (journaled.stream, journaled.kind, journaled.payload) == (
        "flow",
        "kickoffs",
        entry.payload,
    )
    assert review.journal_pos > journaled.pos


def test_decisions_of_more_reviews_than_a_statement_takes_parameters(store: Store) -> None:
    """PostgreSQL takes 65,535 parameters a statement: listing every pending review of a big
    deployment (``countersign reviews list``) asks for the decisions of more."""
    _, review_id = _waiting_review(store)
    store.decide(review_id, NewDecision(DecisionKind.APPROVE, "alice"))
    ids = [f"rev_{n:012x}" for n in range(70_000)] + [review_id]

    with store.engine.connect() as conn:
        found = decisions_by_review(conn, ids)

    assert list(found) == [review_id]
