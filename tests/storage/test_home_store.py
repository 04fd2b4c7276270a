"""The Home tab's refreshes in storage, on SQLite and PostgreSQL: only for people who opened
it, coalesced per person (a burst is one refresh), debounced, not lost to a change made
during a publish, held by one dispatcher at a time, retried after a failure."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from storage import Store
from tests.support.timing import FakeClock, at_once

BOB, MALLORY = "UBOB", "UMALLORY"
HOLD = timedelta(seconds=30)
DEBOUNCE = timedelta(seconds=2)


@pytest.fixture
def clocked(db_url: str) -> Iterator[tuple[Store, FakeClock]]:
    clock = FakeClock()
    store = Store.open(db_url, clock=clock)
    try:
        yield store, clock
    finally:
        store.close()


def test_a_refresh_is_only_for_who_opened_home_and_a_burst_is_one(
    clocked: tuple[Store, FakeClock],
) -> None:
    store, clock = clocked
    assert store.want_home([MALLORY], DEBOUNCE) == 0  # never opened Home
    store.open_home(BOB)
    assert store.due_homes() == [BOB]  # an opening is due at once
    claimed = store.claim_home(BOB, "a", HOLD)
    assert claimed == (1, 0)
    assert store.home_published(BOB, "a", claimed[0])
    assert store.due_homes() == []

    for _ in range(5):  # a burst: one refresh, due after the debounce
        assert store.want_home([BOB, MALLORY], DEBOUNCE) == 1
    assert store.due_homes() == []
    clock.advance(seconds=2)
    assert store.due_homes() == [BOB]
    shown, _ = store.claim_home(BOB, "b", HOLD) or (0, 0)
    assert store.claim_home(BOB, "c", HOLD) is None  # held by "b"
    store.want_home([BOB], DEBOUNCE)  # a change while "b" publishes
    assert store.home_published(BOB, "b", shown)
    assert store.due_homes() == [BOB]  # not lost: due again at once
    again = store.claim_home(BOB, "d", HOLD)
    assert again is not None and store.home_published(BOB, "d", again[0])
    assert store.due_homes() == []
    assert store.home_users(clock() - timedelta(days=1)) == [BOB]


def test_a_failed_publish_is_retried_later_and_a_lost_claim_changes_nothing(
    clocked: tuple[Store, FakeClock],
) -> None:
    store, clock = clocked
    store.open_home(BOB)
    shown, attempts = store.claim_home(BOB, "a", HOLD) or (0, -1)
    assert attempts == 0
    store.home_failed(BOB, "a", "slack: fatal_error", timedelta(seconds=4))
    assert not store.home_published(BOB, "a", shown)  # "a" let it go
    assert store.due_homes() == []
    clock.advance(seconds=4)
    assert store.claim_home(BOB, "b", HOLD) == (shown, 1)
    clock.advance(seconds=31)  # "b" died: its hold ran out
    assert store.claim_home(BOB, "c", HOLD) == (shown, 1)
    assert not store.home_published(BOB, "b", shown)
    assert store.home_published(BOB, "c", shown)
    assert store.due_homes() == []


def test_dispatchers_claiming_one_refresh_at_once_get_it_once(
    clocked: tuple[Store, FakeClock],
) -> None:
    store, _clock = clocked
    store.open_home(BOB)
    got: list[int] = []

    def claim(n: int) -> None:
        if store.claim_home(BOB, f"d{n}", HOLD) is not None:
            got.append(n)

    at_once(claim, 6)
    assert len(got) == 1


def test_openings_and_changes_at_once_leave_one_refresh_due(
    clocked: tuple[Store, FakeClock],
) -> None:
    store, _clock = clocked
    store.open_home(BOB)
    store.home_published(BOB, "x", 0)  # nobody holds it: nothing changes

    def act(n: int) -> None:
        if n % 2:
            store.open_home(BOB)
        else:
            store.want_home([BOB], timedelta(0))

    at_once(act, 6)
    assert store.due_homes() == [BOB]
    claimed = store.claim_home(BOB, "a", HOLD)
    assert claimed is not None and claimed[0] == 7  # every change counted
    assert store.home_published(BOB, "a", claimed[0])
    assert store.due_homes() == []
