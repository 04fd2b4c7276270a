"""Wake-ups across processes: a commit on PostgreSQL wakes the listeners of another connection.

Two stores on one database stand for two processes (or hosts): each has its own engine and
connections, and the listener its own session. What wakes is a real ``pg_notify`` delivered at
commit; a dropped connection is a real one (a proxy the test cuts).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from crew_runtime import Worker, WorkerSettings
from crew_runtime.config import Config
from storage import NewDecision, NewReview, RunStatus, Store
from storage.status import DecisionKind, ReviewKind
from storage.wakeups import OUTBOX, RUNS, Wakeups
from tests.support.harness import ON_POSTGRES, Bench
from tests.support.slack_harness import wait_until
from tests.support.tcp_proxy import TcpProxy


class Heard:
    """What a listener heard, by topic."""

    def __init__(self) -> None:
        self.events = {RUNS: threading.Event(), OUTBOX: threading.Event()}

    def clear(self) -> None:
        for event in self.events.values():
            event.clear()

    def heard(self, *topics: str) -> bool:
        return all(self.events[t].is_set() for t in topics)


@contextmanager
def listening(store: Store, heard: Heard) -> Iterator[Wakeups]:
    with Wakeups(store.engine, {t: e.set for t, e in heard.events.items()}) as wakeups:
        assert wakeups.listening.wait(30), "the listener did not connect"
        heard.clear()  # connecting wakes every handler once: not what these tests look at
        yield wakeups


@ON_POSTGRES
def test_a_run_queued_and_a_decision_in_one_process_wake_the_listeners_of_another(
    db_url: str,
) -> None:
    here, there = Store.open(db_url), Store.open(db_url, upgrade=False)
    heard = Heard()
    with listening(there, heard):
        run = here.create_run("writer", {"topic": "otters"})
        wait_until(lambda: heard.heard(RUNS, OUTBOX), timeout=30, what="the new run's wake-up")

        claimed = here.claim_run("w1", timedelta(seconds=30))
        assert claimed is not None and claimed.lease_token is not None
        (review,) = here.suspend_run(
            run.id, claimed.lease_token, [NewReview(ReviewKind.TASK_REVIEW, "task0", 0, "draft")]
        )
        wait_until(lambda: heard.heard(OUTBOX), timeout=30, what="the review's outbox row")
        heard.clear()
        here.decide(review.id, NewDecision(DecisionKind.APPROVE, "U1"))
        wait_until(lambda: heard.heard(RUNS, OUTBOX), timeout=30, what="the decision's wake-up")
    here.close()
    there.close()


@ON_POSTGRES
def test_a_listener_whose_connection_drops_listens_again_and_catches_up(db_url: str) -> None:
    store = Store.open(db_url)
    server = make_url(db_url)
    heard = Heard()
    with TcpProxy(server.host or "127.0.0.1", server.port or 5432) as proxy:
        through = Store.open(proxy.url_through(db_url), upgrade=False)
        with listening(through, heard) as wakeups:
            first = wakeups.backend_pid
            proxy.cut()
            wait_until(lambda: not wakeups.listening.is_set(), timeout=30, what="the drop")
            store.create_run("writer", {"topic": "while deaf"})  # its notification is lost
            assert not heard.heard(RUNS)
            proxy.restore()
            # Back, it wakes everyone once: what committed meanwhile is looked at.
            wait_until(lambda: heard.heard(RUNS, OUTBOX), timeout=30, what="the catch-up")
            assert wakeups.listening.is_set() and wakeups.backend_pid != first
            heard.clear()
            store.create_run("writer", {"topic": "heard again"})
            wait_until(lambda: heard.heard(RUNS, OUTBOX), timeout=30, what="a wake-up again")
        through.close()
    store.close()


@ON_POSTGRES
def test_a_listener_in_a_process_with_many_files_open_hears_and_stops(
    db_url: str,
) -> None:
    """A busy serve has more descriptors open than select() takes (FD_SETSIZE, 1,024): the
    listener's connection past it still hears, and stops when told."""
    here, there = Store.open(db_url), Store.open(db_url, upgrade=False)
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    heard = Heard()
    try:
        with listening(there, heard) as wakeups:
            here.create_run("writer", {"topic": "otters"})
            wait_until(lambda: heard.heard(RUNS), timeout=30, what="the new run's wake-up")
            stopped = threading.Thread(target=wakeups.stop)
            stopped.start()
            stopped.join(30)
            assert not stopped.is_alive() and not wakeups.listening.is_set()
    finally:
        for fd in held:
            os.close(fd)
        here.close()
        there.close()


def test_on_sqlite_a_listener_does_nothing(tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'countersign.db'}")
    heard = Heard()
    with Wakeups(store.engine, {RUNS: heard.events[RUNS].set}) as wakeups:
        store.create_run("writer", {"topic": "otters"})
        assert not wakeups.listening.is_set() and not heard.heard(RUNS)
    store.close()


@pytest.mark.slow
@ON_POSTGRES
def test_a_busy_worker_in_another_process_is_woken_for_a_run_queued_here(bench: Bench) -> None:
    """Its poll is an hour: only the notification can bring it the second run, while the
    first one holds one of its two slots."""
    first = bench.start("writer", topic="holds")
    worker = bench.spawn("--concurrency", "2", "--poll", "3600", COUNTERSIGN_TEST_HOLD="factory")
    try:
        wait_until(
            lambda: any(e["kind"] == "holding" for e in bench.effects()),
            what="the first run to hold its slot",
        )
        second = bench.start("writer", topic="queued while busy")
        wait_until(
            lambda: bench.run(second.id).status == RunStatus.RUNNING,
            timeout=60,
            what="the busy worker to claim the second run",
        )
        assert bench.run(first.id).status == RunStatus.RUNNING
    finally:
        worker.kill()
        worker.communicate(timeout=30)


@ON_POSTGRES
def test_a_worker_whose_listener_cannot_reconnect_still_claims_by_polling(
    db_url: str, tmp_path: Path
) -> None:
    """Its listening session is killed and new connections are refused (a server at its
    limit), while the connections it has keep working: it polls, and listens again later."""
    store = Store.open(db_url)
    server = make_url(db_url)
    with TcpProxy(server.host or "127.0.0.1", server.port or 5432) as proxy:
        through = Store.open(proxy.url_through(db_url), upgrade=False)
        worker = Worker(
            through,
            Config(path=tmp_path / "countersign.toml"),
            WorkerSettings(poll=timedelta(seconds=0.1)),
        )
        thread = threading.Thread(target=worker.run, daemon=True)
        thread.start()
        try:
            first = wait_until(lambda: _listener(store), timeout=60, what="the worker to listen")
            proxy.refuse_new()
            with store.engine.connect() as conn:
                conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": first})
            wait_until(
                lambda: _listener(store) is None and proxy.refused > 0,
                timeout=30,
                what="the listener to try again and be refused",
            )
            # A crew the configuration does not have: the worker fails the run as it claims it.
            run = store.create_run("absent", {})
            wait_until(
                lambda: store.get_run(run.id).status == RunStatus.FAILED,
                timeout=30,
                what="the worker to claim the run by polling",
            )
            assert _listener(store) is None
            proxy.restore()
            wait_until(lambda: _listener(store), timeout=30, what="the worker to listen again")
        finally:
            worker.stop()
            thread.join(30)
        through.close()
    store.close()


def _listener(store: Store) -> int | None:
    """The backend listening on this schema's channel, if any."""
    with store.engine.connect() as conn:
        pid = conn.execute(
            text(
                "SELECT pid FROM pg_stat_activity "
                "WHERE query = 'LISTEN \"countersign:' || current_schema() || '\"'"
            )
        ).scalar()
    return None if pid is None else int(pid)
