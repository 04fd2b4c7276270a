"""The counts a /metrics scrape reads (storage.tallies) against the tables themselves, on
SQLite and PostgreSQL: after every kind of status change, a prune, folds, and on PostgreSQL
folds racing the writers."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from storage import (
    DecisionKind,
    NewDecision,
    NewReview,
    ReviewKind,
    RunNotFound,
    RunStatus,
    Store,
)
from storage.engine import write_transaction
from storage.retention import Retention, RetentionPolicy
from storage.schema import reviews, runs, tallies
from storage.stats import read_stats
from storage.status import ReviewStatus
from storage.tallies import PENDING_REVIEWS, counts, fold
from tests.support.runs import deliver, finished_run, waiting_run
from tests.support.timing import FakeClock

LEASE = timedelta(minutes=5)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(db_url: str, clock: FakeClock) -> Iterator[Store]:
    opened = Store.open(db_url, clock=clock)
    yield opened
    opened.close()


def counted_from_tables(store: Store) -> dict[tuple[str, str], int]:
    """What the counts must be: the runs by crew and status, pending reviews by crew."""
    with store.engine.connect() as conn:
        by_status = conn.execute(
            select(runs.c.crew, runs.c.status, func.count()).group_by(runs.c.crew, runs.c.status)
        ).all()
        pending = conn.execute(
            select(runs.c.crew, func.count())
            .select_from(reviews.join(runs, reviews.c.run_id == runs.c.id))
            .where(reviews.c.status == ReviewStatus.PENDING)
            .group_by(runs.c.crew)
        ).all()
    found = {(crew, status): n for crew, status, n in by_status}
    found.update({(crew, PENDING_REVIEWS): n for crew, n in pending})
    return found


def kept(store: Store) -> dict[tuple[str, str], int]:
    with store.engine.connect() as conn:
        return counts(conn)[0]


def ask(seq: int) -> NewReview:
    return NewReview(kind=ReviewKind.TASK_REVIEW, stream="task0:Writer", seq=seq, prompt="draft")


def test_the_counts_follow_every_change_a_prune_and_a_fold(store: Store, clock: FakeClock) -> None:
    old = finished_run(store, "outreach")  # waited, edited, resumed, succeeded
    clock.advance(days=400)
    waiting_run(store, "outreach")
    _, cancelled_review = waiting_run(store, "research")
    store.cancel_run(store.get_review(cancelled_review).run_id, "U0ANA")
    two = store.create_run("writer", {})
    clock.advance(seconds=1)
    store.create_run("research", {})  # queued
    claimed = store.claim_run("w1", LEASE)
    assert claimed is not None and claimed.id == two.id and claimed.lease_token
    first, second = store.suspend_run(two.id, claimed.lease_token, [ask(0), ask(1)])
    store.decide(first.id, NewDecision(DecisionKind.APPROVE, "U0ANA"))  # one of two
    assert kept(store) == counted_from_tables(store)
    store.reopen_review(first.id, NewDecision(DecisionKind.APPROVE, "U0BEN"))  # queued again
    assert store.get_review(second.id).status == ReviewStatus.PENDING
    again = store.claim_run("w1", LEASE)
    assert again is not None and again.lease_token
    store.finish_run(again.id, again.lease_token, RunStatus.FAILED, error="no")
    running = store.claim_run("w2", LEASE)  # research's queued run
    assert running is not None and running.lease_token
    store.release_run(running.id, running.lease_token)
    assert kept(store) == counted_from_tables(store)

    deliver(store)
    pruned = store.prune(RetentionPolicy(Retention(keep_runs=timedelta(days=365))))
    assert pruned["outreach"]["runs"] == 1
    with pytest.raises(RunNotFound):
        store.get_run(old)
    expected = counted_from_tables(store)
    assert kept(store) == expected
    with write_transaction(store.engine) as conn:
        fold(conn)
        rows = conn.execute(select(func.count()).select_from(tallies)).scalar_one()
    assert kept(store) == expected
    assert rows == len(expected)  # a row a count
    stats = read_stats(store)
    assert stats.runs == {k: n for k, n in expected.items() if k[1] != PENDING_REVIEWS}
    pending = Counter[str]()
    for (crew, _age), n in stats.pending_reviews.items():
        pending[crew] += n
    assert dict(pending) == {k[0]: n for k, n in expected.items() if k[1] == PENDING_REVIEWS}


def test_pending_reviews_are_split_by_age_and_the_oldest_found(
    store: Store, clock: FakeClock
) -> None:
    opened = clock.now
    waiting_run(store, "outreach")  # will be 10 days old
    clock.advance(days=8)
    waiting_run(store, "outreach")  # 2 days
    waiting_run(store, "research")  # 2 days
    clock.advance(days=2)
    waiting_run(store, "research")  # just now

    stats = read_stats(store)

    assert stats.pending_reviews == {
        ("outreach", "over_7d"): 1,
        ("outreach", "1d_to_7d"): 1,
        ("research", "1d_to_7d"): 1,
        ("research", "under_1h"): 1,
    }
    assert stats.oldest_pending == {
        "outreach": opened,
        "research": opened + timedelta(days=8),
    }


def test_folds_racing_writers_lose_and_double_nothing(db_url: str) -> None:
    """Four threads create, claim and finish runs while two others fold over and over."""
    store = Store.open(db_url)
    done = threading.Event()
    failures: list[BaseException] = []

    def write(crew: str) -> None:
        try:
            for _ in range(15):
                store.create_run(crew, {})
                run = store.claim_run(f"w-{crew}", LEASE)
                if run is not None and run.lease_token:
                    store.finish_run(run.id, run.lease_token, RunStatus.SUCCEEDED, output="ok")
        except BaseException as exc:
            failures.append(exc)

    def keep_folding() -> None:
        try:
            while not done.is_set():
                with write_transaction(store.engine) as conn:
                    fold(conn)
        except BaseException as exc:
            failures.append(exc)

    writers = [threading.Thread(target=write, args=(f"crew{i % 2}",)) for i in range(4)]
    folders = [threading.Thread(target=keep_folding) for _ in range(2)]
    for thread in writers + folders:
        thread.start()
    for thread in writers:
        thread.join()
    done.set()
    for thread in folders:
        thread.join()
    assert failures == []
    assert kept(store) == counted_from_tables(store)
    assert sum(n for (_crew, what), n in kept(store).items() if what != PENDING_REVIEWS) == 60
    store.close()
