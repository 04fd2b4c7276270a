"""Every status change of a run or a review is one of the state tables' transitions, made by
``storage.transitions``; and every transition of the tables is one the store makes."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import select

from storage import DecisionKind, NewDecision, NewReview, ReviewKind, RunStatus, Store
from storage.errors import IllegalTransition
from storage.runs import MAX_RECOVERIES
from storage.schema import reviews, runs
from storage.status import REVIEW_TRANSITIONS, RUN_TRANSITIONS, ReviewStatus
from storage.transitions import move_reviews, move_run

ROOT = Path(__file__).resolve().parents[2]
LEASE = timedelta(seconds=30)

Seen = set[tuple[str, str, str]]  # (table, old status, new status)


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, 12, 0, 0)

    def __call__(self) -> datetime:
        return self.now


class Watch:
    """The store, and the status changes each of its calls made, read from the database."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.seen: Seen = set()

    def _rows(self) -> dict[tuple[str, str], tuple[str, str | None]]:
        with self.store.engine.connect() as conn:
            found = {
                ("runs", r.id): (r.status, r.lease_token)
                for r in conn.execute(select(runs.c.id, runs.c.status, runs.c.lease_token))
            }
            found.update(
                (("reviews", r.id), (r.status, None))
                for r in conn.execute(select(reviews.c.id, reviews.c.status))
            )
        return found

    def __enter__(self) -> Watch:
        self._before = self._rows()
        return self

    def __exit__(self, *exc: object) -> None:
        for key, (status, token) in self._rows().items():
            old = self._before.get(key)
            if old is not None and old != (status, token):
                self.seen.add((key[0], old[0], status))


def _ask(seq: int) -> NewReview:
    return NewReview(kind=ReviewKind.TASK_REVIEW, stream="task0:Writer", seq=seq, prompt="draft")


def _every_path(store: Store, clock: Clock) -> Seen:
    """Drive each store call that changes a status, from each status it may start in."""
    watch = Watch(store)

    def claim() -> tuple[str, str]:
        with watch:
            run = store.claim_run("w1", LEASE)
        assert run is not None and run.lease_token is not None
        return run.id, run.lease_token

    def decide(review_id: str, kind: DecisionKind = DecisionKind.APPROVE) -> None:
        with watch:
            store.decide(review_id, NewDecision(kind, "U1"))

    for final in (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.REJECTED):
        store.create_run("writer", {})
        run_id, token = claim()
        with watch:
            store.finish_run(run_id, token, final)

    queued = store.create_run("writer", {})
    with watch:
        store.cancel_run(queued.id, "U1")
    store.create_run("writer", {})
    run_id, _ = claim()
    with watch:
        store.cancel_run(run_id, "U1")

    # Waiting, decided twice (the second decision queues the run), diverged, given back.
    store.create_run("writer", {})
    run_id, token = claim()
    store.append_journal(run_id, token, stream="task0:Writer", kind="llm", seq=0, payload={})
    with watch:
        first, second = store.suspend_run(run_id, token, [_ask(0), _ask(1)])
    decide(first.id)
    decide(second.id, DecisionKind.CHANGES)
    run_id, token = claim()
    with watch:
        store.record_divergence(run_id, token, 0, "the prompt changed")
    with watch:
        store.release_run(run_id, token)
    run_id, token = claim()
    with watch:
        store.finish_run(run_id, token, RunStatus.SUCCEEDED)

    # A task reopened while a later review is pending; then cancelled while waiting.
    store.create_run("writer", {})
    run_id, token = claim()
    with watch:
        (done,) = store.suspend_run(run_id, token, [_ask(0)])
    decide(done.id)
    run_id, token = claim()
    store.append_journal(run_id, token, stream="task1:Editor", kind="llm", seq=0, payload={})
    with watch:
        store.suspend_run(run_id, token, [_ask(1)])
    with watch:
        store.reopen_review(done.id, NewDecision(DecisionKind.CHANGES, "U1", text="again"))
    run_id, token = claim()
    with watch:
        store.suspend_run(run_id, token, [_ask(2)])
    with watch:
        store.cancel_run(run_id, "U1")

    # A worker that keeps dying: claimed again after each lease, then given up.
    store.create_run("writer", {})
    claim()
    for _ in range(MAX_RECOVERIES):
        clock.now += LEASE * 2
        claim()
    clock.now += LEASE * 2
    with watch:
        assert store.claim_run("w1", LEASE) is None
    return watch.seen


@pytest.fixture
def clocked(db_url: str) -> Iterator[tuple[Store, Clock]]:
    clock = Clock()
    opened = Store.open(db_url, clock=clock)
    yield opened, clock
    opened.close()


def test_the_store_makes_every_transition_of_the_tables_and_no_other(
    clocked: tuple[Store, Clock],
) -> None:
    seen = _every_path(*clocked)
    table: Seen = {("runs", old, new) for old, news in RUN_TRANSITIONS.items() for new in news}
    table |= {("reviews", old, new) for old, news in REVIEW_TRANSITIONS.items() for new in news}
    assert seen - table == set(), "a status change the tables do not list"
    assert table - seen == set(), "a transition of the tables that the store never makes"


def test_a_transition_the_tables_do_not_list_is_refused_before_the_database(
    clocked: tuple[Store, Clock],
) -> None:
    store, _ = clocked
    run = store.create_run("writer", {})
    with store.engine.begin() as conn:
        with pytest.raises(IllegalTransition, match="runs: no transition from queued to waiting"):
            move_run(conn, run.id, RunStatus.QUEUED, RunStatus.WAITING)
        with pytest.raises(IllegalTransition, match="from cancelled, decided to pending"):
            move_reviews(conn, (ReviewStatus.DECIDED, ReviewStatus.CANCELLED), ReviewStatus.PENDING)
    assert store.get_run(run.id).status == RunStatus.QUEUED


def _status_writes(path: Path) -> Iterator[int]:
    """Lines of ``path`` that set a ``status`` in an UPDATE (inserts create, they do not move)."""
    for node in ast.walk(ast.parse(path.read_text())):
        if not (isinstance(node, ast.Call) and any(k.arg == "status" for k in node.keywords)):
            continue
        root = node.func
        while isinstance(root, ast.Attribute | ast.Call):
            root = root.value if isinstance(root, ast.Attribute) else root.func
        if isinstance(root, ast.Name) and root.id == "update":
            yield node.lineno


def test_no_code_but_storage_transitions_writes_a_status() -> None:
    sources = [
        p
        for package in ("bot", "crew_runtime", "storage")
        for p in (ROOT / package).rglob("*.py")
        if p != ROOT / "storage" / "transitions.py"
    ]
    assert sources
    writes = [f"{p.relative_to(ROOT)}:{line}" for p in sources for line in _status_writes(p)]
    assert writes == []
    # The check itself finds what it looks for.
    assert list(_status_writes(ROOT / "storage" / "transitions.py")) != []
