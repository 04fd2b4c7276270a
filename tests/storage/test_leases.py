"""The leased-row mechanism itself (``storage.leases``), on the real tables of both databases:
claimers racing for a row get it once, an expired lease is freed once, and a claim that lost
its row (a stale token) can change nothing."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeVar

import pytest
from sqlalchemy import select

from storage import InboxStore, NewRequest, Store, leases
from storage.engine import write_transaction
from storage.leases import Backoff, Leased
from storage.schema import outbox
from tests.support.timing import FakeClock

HOLD = timedelta(seconds=30)
RACERS = 6
T = TypeVar("T")


def _race(racers: int, attempt: Callable[[int], T]) -> list[T]:
    """``attempt(n)`` in ``racers`` threads let go at once; their answers, in order."""
    start = threading.Barrier(racers)
    answers: list[Any] = [None] * racers
    errors: list[BaseException] = []

    def racer(n: int) -> None:
        start.wait()
        try:
            answers[n] = attempt(n)
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=racer, args=(n,)) for n in range(racers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    return answers


def _rows(store: Store) -> dict[str, tuple[Leased, Any]]:
    """A row of each table leased by a token, freshly made: an outbox row and a webhook
    event (a run started and cancelled), a Home refresh (someone opened Home)."""
    run = store.create_run("writer", {}, channel="C1")
    store.cancel_run(run.id, "UALICE")
    store.open_home("UBOB")
    outbox_id = store.due_outbox()[0].id
    event_id = store.due_webhook_events()[0].id
    return {
        "outbox": (leases.OUTBOX, outbox_id),
        "home_tabs": (leases.HOME, "UBOB"),
        "webhook_events": (leases.WEBHOOK_EVENTS, event_id),
    }


TABLES = ["outbox", "home_tabs", "webhook_events"]


def _token_of(store: Store, lease: Leased, key: Any) -> Any:
    assert lease.token is not None
    with store.engine.connect() as conn:
        return conn.execute(select(lease.token).where(lease.key == key)).scalar_one()


@pytest.mark.parametrize("table", TABLES)
def test_claimers_racing_for_a_row_get_it_once(db_url: str, table: str) -> None:
    clock = FakeClock()
    store = Store.open(db_url, clock=clock)
    lease, key = _rows(store)[table]

    def claim(n: int) -> bool:
        with write_transaction(store.engine) as conn:
            return lease.claim(conn, key, f"t{n}", clock(), HOLD)

    won = _race(RACERS, claim)
    assert won.count(True) == 1
    assert _token_of(store, lease, key) == f"t{won.index(True)}"
    clock.advance(seconds=29)  # held: nobody else gets it
    with write_transaction(store.engine) as conn:
        assert not lease.claim(conn, key, "late", clock(), HOLD)
    store.close()


@pytest.mark.parametrize("table", TABLES)
def test_an_expired_lease_is_taken_over_once_and_its_stale_token_changes_nothing(
    db_url: str, table: str
) -> None:
    clock = FakeClock()
    store = Store.open(db_url, clock=clock)
    lease, key = _rows(store)[table]
    with write_transaction(store.engine) as conn:
        assert lease.claim(conn, key, "dead", clock(), HOLD)
    clock.advance(seconds=31)  # its holder died

    def claim(n: int) -> bool:
        with write_transaction(store.engine) as conn:
            return lease.claim(conn, key, f"t{n}", clock(), HOLD)

    won = _race(RACERS, claim)
    assert won.count(True) == 1
    winner = f"t{won.index(True)}"
    with write_transaction(store.engine) as conn:
        assert not lease.renew(conn, key, "dead", clock() + HOLD)
        assert not lease.let_go(conn, key, "dead")
        assert not lease.holds(conn, key, "dead", lock=True)
        if lease.error is not None:
            assert not lease.release(conn, key, "dead", "boom", clock())
        assert lease.holds(conn, key, winner)
    assert _token_of(store, lease, key) == winner
    with write_transaction(store.engine) as conn:  # the winner's claim goes on as it was
        assert lease.renew(conn, key, winner, clock() + HOLD)
        assert lease.let_go(conn, key, winner)
        assert not lease.renew(conn, key, winner, clock() + HOLD)  # let go: nobody holds it
    store.close()


def test_a_release_counts_the_attempt_and_makes_the_row_due_at_its_retry_time(
    db_url: str,
) -> None:
    clock = FakeClock()
    store = Store.open(db_url, clock=clock)
    run = store.create_run("writer", {}, channel="C1")
    (row,) = store.due_outbox()
    with write_transaction(store.engine) as conn:
        assert leases.OUTBOX.claim(conn, row.id, "t1", clock(), HOLD)
        assert leases.OUTBOX.release(conn, row.id, "t1", "x" * 3000, clock() + HOLD)
    assert store.due_outbox() == []
    clock.advance(seconds=30)
    (again,) = store.due_outbox()
    assert (again.id, again.run_id, again.attempts) == (row.id, run.id, 1)
    with store.engine.connect() as conn:
        error = conn.execute(select(outbox.c.last_error).where(outbox.c.id == row.id)).scalar_one()
    assert error == "x" * leases.ERROR_LENGTH
    store.close()


def test_sweepers_racing_free_each_expired_inbox_row_once(db_url: str) -> None:
    clock = FakeClock()
    store = Store.open(db_url, clock=clock)
    inbox = InboxStore(store, claim=timedelta(seconds=10))
    recorded = inbox.record([NewRequest(f"k{n}", "{}", "application/json") for n in range(20)])
    ids = [row_id for row_id in recorded if row_id is not None]
    assert len(ids) == 20
    inbox.renew([ids[0]])  # still in hand: renewed below, past the others' expiry
    clock.advance(seconds=5)
    inbox.renew([ids[0]])
    clock.advance(seconds=6)  # the others' handlers died

    taken = _race(RACERS, lambda _: [r.id for r in inbox.claim_stale(limit=100)])
    freed = [row_id for rows in taken for row_id in rows]
    assert sorted(freed) == sorted(ids[1:])  # each once, and not the one renewed
    assert inbox.claim_stale() == []
    clock.advance(seconds=11)
    assert {r.id: r.attempts for r in inbox.claim_stale()} == {
        **{row_id: 3 for row_id in ids[1:]},
        ids[0]: 2,
    }
    store.close()


def test_a_run_renewed_by_a_stale_token_is_not_renewed(db_url: str) -> None:
    clock = FakeClock()
    store = Store.open(db_url, clock=clock)
    run = store.create_run("writer", {})
    first = store.claim_run("w1", HOLD)
    assert first is not None and first.lease_token is not None
    clock.advance(seconds=31)  # w1 stalled past its lease
    second = store.claim_run("w2", HOLD)
    assert second is not None and second.lease_token is not None and second.id == run.id
    assert not store.extend_lease(run.id, first.lease_token, HOLD)
    claims = {run.id: first.lease_token}
    assert store.extend_leases(claims, HOLD) == set()
    assert store.extend_leases({run.id: second.lease_token}, HOLD) == {run.id}
    with write_transaction(store.engine) as conn:
        assert not leases.RUNS.holds(conn, run.id, first.lease_token)
        assert leases.RUNS.holds(conn, run.id, second.lease_token, lock=True)
    store.close()


def test_backoff_doubles_up_to_its_most_and_jitters_within_its_share() -> None:
    steady = Backoff(first=timedelta(seconds=1), most=timedelta(minutes=5), jitter=0.0)
    assert [steady.after(n).total_seconds() for n in range(1, 11)] == [
        1,
        2,
        4,
        8,
        16,
        32,
        64,
        128,
        256,
        300,
    ]
    assert steady.after(1000) == timedelta(minutes=5)
    jittered = Backoff(first=timedelta(seconds=2), most=timedelta(minutes=10))
    for attempts in (1, 4, 12, 40):
        ceiling = min(2.0 * 2 ** (attempts - 1), 600.0)
        waits = {jittered.after(attempts).total_seconds() for _ in range(50)}
        assert all(ceiling / 2 <= wait <= ceiling for wait in waits)
        assert len(waits) > 1
