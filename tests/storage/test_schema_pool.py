"""The tests' pool of PostgreSQL schemas (tests/support/templates.py): a schema given back is
handed to the next test as a fresh one would be, and one that cannot be emptied is not."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta

import psycopg
import pytest

from storage import NewReview, ReviewKind, Store
from storage.schema import metadata
from tests.support.database import PG_BASE, pg_required
from tests.support.slack_harness import wait_until
from tests.support.templates import Schemas, libpq


@pytest.fixture
def pool() -> Iterator[Schemas]:
    pg_required()
    made = Schemas(PG_BASE, lock_timeout=0.2)
    yield made
    made.close()


def _url(schema: str) -> str:
    return f"{PG_BASE}?options=-csearch_path%3D{schema}"


def _use(schema: str) -> tuple[str, int]:
    """Write rows in most tables (a run, its claim, a pause with a review, the outbox), as a
    test would; return the review's id and the first outbox row's."""
    store = Store.open(_url(schema), upgrade=False)
    try:
        run = store.create_run("writer", {"topic": "otters"}, started_by="U1")
        claimed = store.claim_run("w1", timedelta(seconds=30))
        assert claimed is not None and claimed.lease_token is not None
        ask = NewReview(kind=ReviewKind.TASK_REVIEW, stream="task0:writer", seq=1, prompt="draft")
        (review,) = store.suspend_run(run.id, claimed.lease_token, [ask])
        return review.id, store.due_outbox()[0].id
    finally:
        store.close()


def _rows(schema: str) -> dict[str, int]:
    counts = {}
    with psycopg.connect(libpq(PG_BASE)) as conn:
        for table in metadata.sorted_tables:
            row = conn.execute(f'SELECT count(*) FROM "{schema}"."{table.name}"').fetchone()
            counts[table.name] = row[0] if row else -1
    return counts


def test_a_schema_given_back_is_handed_out_again_as_a_fresh_one_would_be(pool: Schemas) -> None:
    fresh = pool.take()
    _, first_outbox = _use(fresh)
    assert sum(_rows(fresh).values()) > 0
    pool.give_back(fresh)
    again = pool.take()
    assert again == fresh  # the pool's, not a new one
    assert set(_rows(again).values()) == {0}
    _, outbox_again = _use(again)
    assert outbox_again == first_outbox  # its sequences start again
    pool.give_back(again)


def test_a_schema_that_cannot_be_emptied_is_dropped_once_its_holder_lets_go(
    pool: Schemas,
) -> None:
    held = pool.take()
    _use(held)
    holding = psycopg.connect(libpq(PG_BASE))
    try:
        # A transaction left open on a row (a worker's claim, say): the emptying's DELETE waits.
        holding.execute(f'SELECT id FROM "{held}".runs FOR UPDATE').fetchall()
        given_back = threading.Thread(target=pool.give_back, args=(held,), daemon=True)
        given_back.start()
        wait_until(lambda: _waiting_to_drop(held), timeout=30, what="the pool to give up on it")
    finally:
        holding.close()  # the transaction ends; a drop that waited for it goes through
    given_back.join(30)
    assert not given_back.is_alive()
    with psycopg.connect(libpq(PG_BASE)) as conn:
        found = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (held,)).fetchone()
    assert found is None
    assert pool.take() != held


def _waiting_to_drop(schema: str) -> bool:
    """Whether a session waits on a lock to drop ``schema``."""
    with psycopg.connect(libpq(PG_BASE)) as conn:
        found = conn.execute(
            "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE %s",
            (f'DROP SCHEMA "{schema}"%',),
        ).fetchone()
    return found is not None
