"""The worker loop: claim runnable runs, execute them with bounded concurrency, heartbeat.

A worker holds a lease on each run it executes and extends it while the run is
going. A worker that dies stops extending; once the lease expires any worker may
claim the run again and replay it from the journal. Each claim has a fencing token
of its own, so the execution it replaced can write nothing and stops before its next
live call. Nothing waits for humans: a run that needs one is suspended and its
thread is freed.
"""

from __future__ import annotations

import contextvars
import logging
import os
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta

from crew_runtime import log_fields, metrics, tls
from crew_runtime.config import Config, UnknownCrewError
from crew_runtime.context import RunContext
from crew_runtime.executor import Outcome, execute
from crew_runtime.sizing import DEFAULT_CONCURRENCY
from storage import RunStatus, Store
from storage.wakeups import RUNS

log = logging.getLogger(__name__)

REASON_LOGGED = 500  # chars of a failed run's reason in its log line (the run keeps it all)


# How often a worker folds SQLite's write-ahead log into the database (Store.checkpoint).
CHECKPOINT_EVERY = 5.0
# How often a worker folds the database's counts of runs (Store.fold_counts).
FOLD_EVERY = 60.0


@dataclass(frozen=True)
class WorkerSettings:
    concurrency: int = DEFAULT_CONCURRENCY
    lease: timedelta = timedelta(seconds=30)
    poll: timedelta = timedelta(seconds=0.5)
    # On PostgreSQL, also wake when a run is queued anywhere (LISTEN); False: poll only.
    listen: bool = True

    @property
    def heartbeat(self) -> timedelta:
        """A third of the lease, wherever the worker runs: one late beat must not cost a run."""
        return self.lease / 3


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident() % 10000}"


class Worker:
    """Executes runs from the store until stopped (or, with ``until_idle``, until none is left).

    ``on_settled`` is called (from the worker's thread) after each execution ends,
    so an embedding process can announce the outcome at once.
    """

    def __init__(
        self,
        store: Store,
        config: Config,
        settings: WorkerSettings | None = None,
        worker_id: str | None = None,
        on_settled: Callable[[], None] | None = None,
    ) -> None:
        self.store = store
        self.config = config
        self.settings = settings or WorkerSettings()
        self.worker_id = worker_id or default_worker_id()
        self.stopping = threading.Event()
        self._wake = threading.Event()
        self._active: dict[Future[Outcome], RunContext] = {}
        self.executions = 0
        # The latest outcomes, for logs and tests; bounded, as a serve worker lives long.
        self.finished: deque[tuple[str, Outcome]] = deque(maxlen=1000)
        self._on_settled = on_settled
        tls.install()  # every execution builds its crew's HTTPS clients: one TLS context

    def wake(self) -> None:
        """Look for work now rather than at the next poll."""
        self._wake.set()

    def stop(self) -> None:
        self.stopping.set()
        self._wake.set()

    def run(self, *, until_idle: bool = False) -> None:
        settings = self.settings
        next_beat = time.monotonic() + settings.heartbeat.total_seconds()
        next_checkpoint = time.monotonic() + CHECKPOINT_EVERY
        next_fold = time.monotonic() + FOLD_EVERY
        failing = False
        # On PostgreSQL a run queued anywhere wakes this loop at once; the poll stays.
        with (
            self.store.wakeups({RUNS: self.wake} if settings.listen else {}),
            ThreadPoolExecutor(settings.concurrency, thread_name_prefix="run") as pool,
        ):
            while not self.stopping.is_set():
                self._reap()
                try:
                    # Renew before claiming: after a stall (monotonic time counts it) the
                    # leases may have run out, and they are kept if nobody took them.
                    if time.monotonic() >= next_beat:
                        self._heartbeat()
                        next_beat = time.monotonic() + settings.heartbeat.total_seconds()
                    claimed = self._fill(pool)
                    if time.monotonic() >= next_checkpoint:
                        self.store.checkpoint()  # SQLite's log, folded in off the hot paths
                        next_checkpoint = time.monotonic() + CHECKPOINT_EVERY
                    if time.monotonic() >= next_fold:
                        self.store.fold_counts()
                        next_fold = time.monotonic() + FOLD_EVERY
                    if failing:
                        log.info("worker %s: storage works again", self.worker_id)
                        failing = False
                    if until_idle and not self._active and not claimed and self._system_idle():
                        break
                except Exception as exc:
                    # The database blinked (restart, failover, network): the leases
                    # outlive a few polls, so keep going rather than drop every run. Told
                    # once per outage (with its traceback), not at every poll.
                    if not failing:
                        log.warning(
                            "worker %s: storage error (%s); retrying until it passes",
                            self.worker_id,
                            type(exc).__name__,
                            exc_info=True,
                        )
                        failing = True
                    claimed = False
                if self._active or not claimed:
                    # Woken by an execution ending, a wake() (a run queued here, or on
                    # PostgreSQL anywhere), or the poll, whichever comes first.
                    self._wake.wait(settings.poll.total_seconds())
                    self._wake.clear()
            self._shutdown()

    def _fill(self, pool: ThreadPoolExecutor) -> bool:
        claimed = False
        while len(self._active) < self.settings.concurrency and not self.stopping.is_set():
            # Never a run this worker is executing, even if its lease ran out in a stall:
            # the execution in progress would go on beside a new one.
            executing = [ctx.run.id for ctx in self._active.values()]
            run = self.store.claim_run(self.worker_id, self.settings.lease, exclude=executing)
            if run is None:
                break
            claimed = True
            assert run.lease_token is not None  # every claim sets one
            try:
                spec = self.config.get(run.crew)
            except UnknownCrewError as exc:
                self.store.finish_run(run.id, run.lease_token, RunStatus.FAILED, error=str(exc))
                continue
            ctx = RunContext(run, self.store, spec, self.settings.lease)
            log.info(
                "run %s (%s): executing, attempt %d",
                run.id,
                run.crew,
                run.attempts + 1,
                extra={"run_id": run.id},
            )
            metrics.count_started(run.crew)
            # A fresh context per execution: pool threads are reused, and CrewAI keeps
            # state in ContextVars (its event-scope stack gains an entry at every pause
            # and raises past depth 100), which must not leak from one run to the next.
            # Every line the execution logs is about its run.
            isolated = contextvars.Context()
            isolated.run(log_fields.RUN_ID.set, run.id)
            future = pool.submit(isolated.run, execute, self.store, self.config, ctx)
            future.add_done_callback(lambda _done: self._wake.set())
            self._active[future] = ctx
        return claimed

    def _reap(self) -> None:
        for future in [f for f in self._active if f.done()]:
            ctx = self._active.pop(future)
            try:
                outcome = future.result()
            except Exception:
                log.exception(
                    "run %s: the executor itself failed", ctx.run.id, extra={"run_id": ctx.run.id}
                )
                metrics.count_executor_failure(ctx.run.crew)
                continue
            metrics.count_execution(ctx.run.crew, outcome.status, outcome.stats)
            # A pause is no failure: one line says what the run waits for.
            log.info("run %s: %s", ctx.run.id, ended(outcome), extra={"run_id": ctx.run.id})
            self.finished.append((ctx.run.id, outcome))
            self.executions += 1
            if self._on_settled is not None:
                self._on_settled()

    def _heartbeat(self) -> None:
        """Renew the leases of the executions still going, in one statement. One that ended
        already (its future done, not reaped yet) is left alone: its run may be waiting or
        finished, which is no lost lease."""
        going = [(f, ctx) for f, ctx in self._active.items() if not f.done() and not ctx.aborted]
        asked_at = time.monotonic()
        renewed = self.store.extend_leases(
            {ctx.run.id: ctx.lease_token for _f, ctx in going}, self.settings.lease
        )
        for future, ctx in going:
            if ctx.run.id in renewed:
                ctx.renewed(asked_at)
            elif not future.done():  # (one that ended meanwhile suspended or settled its run)
                log.info(
                    "run %s: lease lost (cancelled or taken over); stopping it",
                    ctx.run.id,
                    extra={"run_id": ctx.run.id},
                )
                ctx.abort()

    def _system_idle(self) -> bool:
        """Nothing queued and nothing running anywhere (a dead worker's run will come back)."""
        return (
            self.store.count_runs(RunStatus.QUEUED) == 0
            and self.store.count_runs(RunStatus.RUNNING) == 0
        )

    def _shutdown(self) -> None:
        """Stopping: ask running executions to stop at their next call; they replay later."""
        for ctx in self._active.values():
            ctx.abort()
        for future, ctx in list(self._active.items()):
            future.exception()
            self.store.release_run(ctx.run.id, ctx.lease_token)
        self._active.clear()


def ended(outcome: Outcome) -> str:
    """How an execution ended, for its log line: what it waits for (a pause is no failure),
    or its status with the reason it failed or was rejected; and its counts, if any."""
    waits = ", ".join(sorted({r.kind.value.replace("_", " ") for r in outcome.reviews}))
    said = f"waiting for a person ({waits})" if waits else str(outcome.status or "lease lost")
    if outcome.error:
        reason = " ".join(outcome.error.split())
        said += f": {reason[:REASON_LOGGED]}{'…' if len(reason) > REASON_LOGGED else ''}"
    if outcome.stats:
        said += f" {outcome.stats}"
    return said
