"""A worker's heartbeat renews every lease it holds in one statement (Store.extend_leases), on
SQLite and PostgreSQL: held claims are renewed, lost ones are not."""

from __future__ import annotations

from datetime import timedelta

from storage import RunStatus, Store
from tests.support.timing import FakeClock

LEASE = timedelta(seconds=30)


def test_one_statement_renews_the_claims_still_held_and_no_other(db_url: str) -> None:
    clock = FakeClock()
    store = Store.open(db_url, clock=clock)
    for n in range(4):
        store.create_run("writer", {"n": str(n)})
        clock.advance(seconds=1)
    held, cancelled, finished, taken = [store.claim_run("w1", LEASE) for _ in range(4)]
    assert held and cancelled and finished and taken
    assert held.lease_token and cancelled.lease_token and finished.lease_token
    assert taken.lease_token
    store.cancel_run(cancelled.id, "U0ANA")
    store.finish_run(finished.id, finished.lease_token, RunStatus.SUCCEEDED, output="ok")
    clock.advance(seconds=31)  # every lease ran out: another worker takes one of them
    again = store.claim_run("w2", LEASE, exclude=[held.id, cancelled.id, finished.id])
    assert again is not None and again.id == taken.id
    clock.advance(seconds=1)

    renewed = store.extend_leases(
        {run.id: run.lease_token for run in (held, cancelled, finished, taken)},  # type: ignore[misc]
        LEASE,
    )

    assert renewed == {held.id}
    assert store.get_run(held.id).lease_expires == clock.now + LEASE
    assert store.get_run(taken.id).lease_token == again.lease_token  # untouched
    assert store.extend_leases({}, LEASE) == set()
    store.close()
