"""Fencing: an execution whose lease ran out never runs beside the execution that replaced it.

Every claim of a run has a token of its own; writes compare it, and an execution renews its
lease (or learns it lost it) before each live call. The faults are real: a worker process
is stopped with SIGSTOP inside a slow tool call for longer than its lease, or cut off from
PostgreSQL through a proxy. The tool (``tests.support.crews.SendNewsletterTool``) notes each live
call with the execution making it, and waits for a file the test creates, so each test
decides when the stalled call ends. The model's live calls are noted the same way.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from bot.hosting.pool import ThreadPool
from crew_runtime.context import RunContext
from crew_runtime.signals import RunAborted
from storage import OutboxKind, RunStatus, Store, utc_now
from tests.support.harness import Bench
from tests.support.slack_harness import wait_until
from tests.support.tcp_proxy import TcpProxy
from tests.support.zygote import Forked

pytestmark = pytest.mark.slow

LEASE = 2.0  # seconds: short, so that a stall of a few leases is quick to make


def _live(bench: Bench, run_id: str | None = None, pid: int | None = None) -> list[dict[str, Any]]:
    """The live calls noted so far, in the order they were made."""
    return [
        e
        for e in bench.effects("live")
        if (run_id is None or e["run"] == run_id) and (pid is None or e["pid"] == pid)
    ]


def _executions(bench: Bench, run_id: str) -> list[str]:
    """The executions that made live calls for a run, in order; one execution at a time:
    once a later one has made a call, an earlier one makes none."""
    order: list[str] = []
    for entry in _live(bench, run_id):
        execution = entry["execution"]
        if execution not in order:
            order.append(execution)
        assert execution == order[-1], f"{execution} called after {order[-1]} took over"
    return order


def _sent_once(bench: Bench, run_ids: list[str]) -> None:
    """Each run's newsletter was sent, once (its key may have been tried by two executions)."""
    sent = Counter(e["key"] for e in bench.effects("sent"))
    assert all(n == 1 for n in sent.values()), sent
    assert sorted(key.split("/")[0] for key in sent) == sorted(run_ids)


def _finished_once(bench: Bench, run_ids: list[str]) -> None:
    for run_id in run_ids:
        run = bench.run(run_id)
        assert run.status == RunStatus.SUCCEEDED, (run.status, run.error)
    finished = [m.run_id for m in bench.store.due_outbox(500) if m.kind == OutboxKind.RUN_FINISHED]
    assert sorted(finished) == sorted(run_ids)


def _renewed_since(bench: Bench, run_id: str, since: datetime, token: str | None) -> bool:
    """The claim ``token`` still holds the run and renewed its lease after ``since``: the
    execution acted once it ran again (another worker's claim would change the token)."""
    run = bench.run(run_id)
    expires = run.lease_expires
    return (
        run.lease_token == token
        and expires is not None
        and expires >= since + timedelta(seconds=LEASE)
    )


def _done(proc: Forked, log: Path) -> None:
    proc.wait(timeout=180)
    assert proc.returncode == 0, log.read_text()


@contextmanager
def _stopped(proc: Forked) -> Iterator[None]:
    """The process frozen (SIGSTOP) for the block, and let go (SIGCONT) however it ends."""
    os.kill(proc.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(proc.pid, signal.SIGCONT)


@contextmanager
def _reaped(*procs: Forked) -> Iterator[None]:
    """No worker outlives a failed test."""
    try:
        yield
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)


def _hold_until(start: float, leases: float) -> None:
    """Make the fault last ``leases`` leases from ``start`` (monotonic): the fault itself,
    not a wait for something to happen."""
    remaining = start + leases * LEASE - time.monotonic()
    if remaining > 0:
        time.sleep(remaining)


def test_a_worker_stalled_past_its_lease_keeps_its_run_and_executes_it_once(
    bench: Bench,
) -> None:
    run = bench.start("newsletter", topic="otters")
    release, log = bench.tmp / "release", bench.tmp / "worker.log"
    worker = bench.spawn(
        "--concurrency", "2", lease=LEASE, log=log, COUNTERSIGN_TEST_RELEASE=str(release)
    )
    with _reaped(worker):
        wait_until(lambda: _live(bench, run.id, worker.pid), what="the tool call to start")
        token = bench.run(run.id).lease_token
        with _stopped(worker):
            _hold_until(time.monotonic(), 2.5)
            resumed = utc_now()
        # Running again, the worker renews the lease nobody took (and must not claim the run
        # a second time beside the execution still inside the tool).
        wait_until(lambda: _renewed_since(bench, run.id, resumed, token), what="the worker to act")
        release.touch()
        _done(worker, log)
    assert len(_executions(bench, run.id)) == 1
    assert [e["what"] for e in _live(bench, run.id)] == ["llm", "tool", "llm"]
    assert bench.run(run.id).attempts == 0
    _sent_once(bench, [run.id])
    _finished_once(bench, [run.id])


Fault = Callable[[Forked], None]


def _lose_one_of_two_runs(
    bench: Bench, *, begin: Fault, end: Fault, leases: float, database_url: str | None = None
) -> None:
    """Two runs in one worker (with a slot to spare), both inside their tool calls when a
    fault hits it for ``leases`` leases; meanwhile a second worker (one run at a time) takes
    one of them over. The first worker must keep the other run (renew it, not claim it a
    second time), and stop the lost one before its next call. Both workers' tool calls end
    only when the test says so: the second worker, once free, would rightly claim the other
    run if its lease were still out, which is a race the test does not mean to run."""
    runs = [bench.start("newsletter", topic=topic).id for topic in ("otters", "seals")]
    release = bench.tmp / "release"
    logs = [bench.tmp / "first.log", bench.tmp / "second.log"]
    first = bench.spawn(
        "--concurrency",
        "3",  # a free slot: the old worker filled it with a run it was executing already
        lease=LEASE,
        log=logs[0],
        DATABASE_URL=database_url or bench.db_url,
        COUNTERSIGN_TEST_RELEASE=str(release),
    )
    second: Forked | None = None
    with _reaped(first):
        wait_until(lambda: len(_live(bench, pid=first.pid)) == 4, what="both tool calls")
        tokens = {run_id: bench.run(run_id).lease_token for run_id in runs}
        started = time.monotonic()
        begin(first)
        try:
            second = bench.spawn(
                "--concurrency",
                "1",
                lease=LEASE,
                log=logs[1],
                COUNTERSIGN_TEST_RELEASE=str(release),
            )
            pid = second.pid
            (taken,) = wait_until(
                lambda: [e["run"] for e in _live(bench, pid=pid) if e["what"] == "tool"],
                what="the second worker to take a run over",
            )
            _hold_until(started, leases)
            resumed = utc_now()
        finally:
            end(first)
        with _reaped(second):
            (kept,) = [run_id for run_id in runs if run_id != taken]
            wait_until(
                lambda: _renewed_since(bench, kept, resumed, tokens[kept]), what="the first worker"
            )
            release.touch()  # both workers' tool calls end now
            _done(first, logs[0])
            _done(second, logs[1])
    assert [int(e.split(":")[0]) for e in _executions(bench, taken)] == [first.pid, second.pid]
    # The first worker finished the call it was in when it lost the run, and nothing after.
    assert [e["what"] for e in _live(bench, taken, first.pid)] == ["llm", "tool"]
    (kept_by,) = _executions(bench, kept)
    assert int(kept_by.split(":")[0]) == first.pid
    _sent_once(bench, runs)
    _finished_once(bench, runs)


def test_a_stalled_worker_keeps_the_run_it_still_holds_and_stops_the_one_it_lost(
    bench: Bench,
) -> None:
    _lose_one_of_two_runs(
        bench,
        begin=lambda proc: os.kill(proc.pid, signal.SIGSTOP),
        end=lambda proc: os.kill(proc.pid, signal.SIGCONT),
        leases=2.5,
    )


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
def test_a_worker_cut_off_from_the_database_keeps_one_run_and_stops_the_other(
    bench: Bench,
) -> None:
    server = make_url(bench.db_url)
    with TcpProxy(server.host or "127.0.0.1", server.port or 5432) as proxy:
        _lose_one_of_two_runs(
            bench,
            begin=lambda _proc: proxy.cut(),
            end=lambda _proc: proxy.restore(),
            leases=3,
            database_url=proxy.url_through(bench.db_url),
        )


def test_the_in_process_pool_with_a_short_lease_executes_a_run_once(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    # serve --workers-in-process --lease 3: no fault, only a tool call longer than the lease.
    lease = timedelta(seconds=3)
    monkeypatch.setenv("COUNTERSIGN_TEST_TOOL_SECONDS", str(2 * lease.total_seconds()))
    pool = ThreadPool(
        bench.store,
        bench.config,
        concurrency=2,
        lease=lease,
        poll=timedelta(seconds=0.1),
        on_settled=lambda: None,
    )
    run = bench.start("newsletter", topic="otters")
    pool.start()
    try:
        wait_until(lambda: bench.run(run.id).status.is_final, timeout=120, what="the run")
    finally:
        asyncio.run(pool.stop())
    assert len(_executions(bench, run.id)) == 1
    assert [e["what"] for e in _live(bench, run.id)] == ["llm", "tool", "llm"]
    assert bench.run(run.id).attempts == 0
    _sent_once(bench, [run.id])
    _finished_once(bench, [run.id])


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
def test_a_lease_check_waits_out_a_short_outage_and_gives_up_when_the_lease_would_end(
    bench: Bench, caplog: pytest.LogCaptureFixture
) -> None:
    server = make_url(bench.db_url)
    spec = bench.config.get("newsletter")
    with TcpProxy(server.host or "127.0.0.1", server.port or 5432) as proxy:
        store = Store.open(proxy.url_through(bench.db_url))
        try:
            for _ in range(2):
                bench.start("newsletter", topic="otters")
            long, short = timedelta(seconds=60), timedelta(seconds=LEASE)
            patient = RunContext(_claimed(store, long), store, spec, long)
            hasty = RunContext(_claimed(store, short), store, spec, short)
            proxy.cut()
            caplog.set_level("INFO", logger="crew_runtime.lease")
            checked: list[BaseException | None] = []

            def check() -> None:
                try:
                    patient.hold_lease()
                    checked.append(None)
                except BaseException as exc:
                    checked.append(exc)

            thread = threading.Thread(target=check)
            thread.start()
            wait_until(lambda: "retrying" in caplog.text, what="a failed lease check")
            with pytest.raises(RunAborted):  # nobody can say it still holds its run
                hasty.hold_lease()
            assert hasty.aborted and "stopping" in caplog.text
            proxy.restore()
            thread.join(30)
            assert checked == [None] and not patient.aborted
            expires = bench.run(patient.run.id).lease_expires
            assert expires is not None and expires > utc_now() + timedelta(seconds=30)
        finally:
            store.close()


def _claimed(store: Store, lease: timedelta) -> Any:
    run = store.claim_run("w1", lease)
    assert run is not None
    return run


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
def test_a_tool_result_the_database_could_not_take_is_journaled_once_it_can(
    bench: Bench, tmp_path: Path
) -> None:
    # CrewAI swallows an error raised in a tool's after-hook and goes on: a result written
    # nowhere would be called again, and found different, by a later replay.
    server = make_url(bench.db_url)
    release, log = tmp_path / "release", tmp_path / "worker.log"
    with TcpProxy(server.host or "127.0.0.1", server.port or 5432) as proxy:
        run = bench.start("newsletter", topic="otters")
        worker = bench.spawn(
            log=log,
            lease=30,
            DATABASE_URL=proxy.url_through(bench.db_url),
            COUNTERSIGN_TEST_RELEASE=str(release),
        )
        try:
            wait_until(
                lambda: [e["what"] for e in _live(bench, run.id)] == ["llm", "tool"],
                what="the tool call",
            )
            proxy.cut()
            release.touch()  # the tool returns while the database is unreachable

            def met_the_outage() -> bool:
                said = log.read_text()
                return "not written (" in said or "cannot confirm the lease" in said

            wait_until(met_the_outage, what="the worker meeting the outage after the tool")
            proxy.restore()
            assert worker.wait(120) == 0, log.read_text()
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
    assert bench.run(run.id).status == RunStatus.SUCCEEDED
    turns = [e.kind for e in bench.store.load_journal(run.id) if e.kind in ("llm", "tool")]
    assert turns == ["llm", "tool", "llm"]
    assert [e["what"] for e in _live(bench, run.id)] == ["llm", "tool", "llm"]
    _sent_once(bench, [run.id])
