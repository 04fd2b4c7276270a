"""``prune --dry-run`` reports exactly what ``prune`` then deletes, on both databases, when
every kind of retention is due at once: runs kept less long than their journals' retention
says, journals of runs kept, audit records and delegations, in batches of one and of many.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from storage import Store
from storage.retention import Retention, RetentionPolicy
from tests.support.runs import finished_run
from tests.support.timing import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(db_url: str, clock: FakeClock) -> Iterator[Store]:
    opened = Store.open(db_url, clock=clock)
    yield opened
    opened.close()


@pytest.mark.parametrize("batch", [1, 500])
def test_a_dry_run_reports_what_the_prune_then_deletes(
    store: Store, clock: FakeClock, batch: int
) -> None:
    for _ in range(3):
        finished_run(store)  # old enough for every retention
    finished_run(store, "blog")
    store.away("U0ANA", "U0BOB", clock.now + timedelta(days=1), by="U0ANA")
    clock.advance(days=400)
    finished_run(store)  # journal due, run kept
    finished_run(store, "blog")
    clock.advance(days=40)
    finished_run(store)  # nothing due
    both = Retention(
        keep_runs=timedelta(days=365),
        keep_journal=timedelta(days=30),
        keep_audit=timedelta(days=200),
    )
    policy = RetentionPolicy(both, {"blog": Retention(keep_journal=timedelta(days=10))})

    dry = store.prune(policy, dry_run=True, batch=batch)
    real = store.prune(policy, batch=batch)

    assert dry == real
    assert real["outreach"]["runs"] == 3 and real["outreach"]["journal"] == 4
    assert real["blog"]["journal"] == 2 and "runs" not in real["blog"]
    assert store.prune(policy, dry_run=True, batch=batch) == {}
