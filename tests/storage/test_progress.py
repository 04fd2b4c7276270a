"""A run's progress in storage and in the worker: fenced writes, one waiting outbox row however
many writes and threads, edits spaced by ``EDIT_EVERY``, the first post's place kept, and the
worker's writes bounded however many events come."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import select

from crew_runtime.progress import FINISHED, STARTED, Progress
from storage import EDIT_EVERY, LeaseLost, OutboxKind, Run, Store
from storage.schema import outbox

LEASE = timedelta(minutes=5)


def _claimed(store: Store) -> Run:
    store.create_run("writer", {"topic": "otters"}, channel="C0WRITING")
    run = store.claim_run("w1", LEASE)
    assert run is not None and run.lease_token is not None
    for row in store.due_outbox():  # the root message, posted: the run's rows after it are free
        assert store.claim_outbox(row.id, "d0", timedelta(seconds=30)) is not None
        assert store.mark_sent(row.id, "d0", thread=(run.id, "C0WRITING", "1.000000"))
    return run


def _rows(store: Store, run_id: str) -> list[Any]:
    with store.engine.connect() as conn:
        return list(
            conn.execute(
                select(outbox)
                .where(outbox.c.run_id == run_id, outbox.c.kind == OutboxKind.RUN_PROGRESS)
                .order_by(outbox.c.id)
            )
        )


def test_a_write_under_a_lost_lease_changes_nothing(store: Store) -> None:
    run = _claimed(store)
    with pytest.raises(LeaseLost):
        store.save_progress(run.id, "not-the-token", {"tasks": []})
    assert store.load_progress(run.id) is None and _rows(store, run.id) == []


def test_threads_writing_at_once_leave_one_waiting_row_and_the_last_state(store: Store) -> None:
    run = _claimed(store)
    token = str(run.lease_token)
    start = threading.Barrier(8)

    def write(n: int) -> None:
        start.wait()
        for k in range(5):
            store.save_progress(run.id, token, {"tasks": [], "tools": n * 5 + k})

    threads = [threading.Thread(target=write, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    (row,) = _rows(store, run.id)
    found = store.load_progress(run.id)
    assert found is not None and found.version == 40 and found.message_ts is None

    # Claimed by a dispatcher, the row may have read the state already: a write makes another,
    # due no sooner than EDIT_EVERY after the message was shown.
    assert store.claim_outbox(row.id, "d1", timedelta(seconds=30)) is not None
    store.progress_shown(run.id, found.version)
    store.save_progress(run.id, token, {"tasks": [], "tools": 41})
    _, second = _rows(store, run.id)
    shown = store.load_progress(run.id)
    assert shown is not None and shown.shown_at is not None and shown.shown_version == 40
    assert second.next_attempt_at >= shown.shown_at + EDIT_EVERY
    store.save_progress(run.id, token, {"tasks": [], "tools": 42})
    assert len(_rows(store, run.id)) == 2  # the unclaimed one will show this too


def test_two_dispatchers_recording_the_first_post_keep_one_place(store: Store) -> None:
    run = _claimed(store)
    store.save_progress(run.id, str(run.lease_token), {"tasks": []})
    start = threading.Barrier(2)

    def record(ts: str) -> None:
        start.wait()
        store.progress_posted(run.id, "C0WRITING", ts)

    threads = [threading.Thread(target=record, args=(ts,)) for ts in ("1.000100", "1.000200")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    found = store.load_progress(run.id)
    assert found is not None and found.message_ts in ("1.000100", "1.000200")
    store.progress_posted(run.id, "C0WRITING", "9.000900")
    again = store.load_progress(run.id)
    assert again is not None and again.message_ts == found.message_ts


class _Counting(Store):
    writes = 0

    def save_progress(self, run_id: str, token: str, state: dict[str, Any]) -> None:
        self.writes += 1
        super().save_progress(run_id, token, state)


def test_a_hot_loop_of_events_writes_once_then_once_more_at_close(db_url: str) -> None:
    store = _Counting.open(db_url)
    try:
        run = _claimed(store)
        now = [0.0]
        # A clock that does not move: every event after the first comes "within" EDIT_EVERY.
        progress = Progress(store, run.id, str(run.lease_token), every=3600, clock=lambda: now[0])
        task = type("T", (), {"name": "Research otters", "agent": None})()
        progress.task("task0:Researcher", STARTED, task, None)
        for _ in range(500):
            progress.tool("search", "Researcher")
        assert store.writes == 1  # the first event; the others wait for the timer
        progress.task("task0:Researcher", FINISHED, task, None)
        progress.close()
        assert store.writes == 2
        found = store.load_progress(run.id)
        assert found is not None
        assert found.state["tools"] == 500
        assert found.state["tasks"] == [
            {"place": "task0:Researcher", "name": "Research otters", "agent": "", "state": FINISHED}
        ]
        progress.tool("search", "Researcher")  # after the close: nothing more is written
        assert store.writes == 2
        # The next execution goes on from what this one wrote.
        resumed = Progress(store, run.id, str(run.lease_token))
        resumed.tool("publish", "Researcher")
        resumed.close()
        after = store.load_progress(run.id)
        assert after is not None and after.state["tools"] == 501
    finally:
        store.close()
