"""``countersign worker``: execute runs in this process until stopped.

The only CLI command that imports the crew executor, and with it crewai (seconds, and
~180 MB): a worker is long-lived, so it pays once. SIGTERM and SIGINT stop it the
graceful way: runs in progress stop at their next call and go back to the queue, to be
replayed from their journal by whichever worker claims them next. A second signal is
not intercepted, for when the graceful way hangs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import logging
import os
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import timedelta
from types import FrameType
from typing import TYPE_CHECKING

from bot.cli.context import Context, stderr_logging, where
from bot.hosting.forkserver import ForkServer
from bot.hosting.parent import die_with_parent

if TYPE_CHECKING:
    from crew_runtime.worker import Worker
    from storage import Store

log = logging.getLogger("countersign.worker")

_STOP_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGINT)


@contextmanager
def fork_server(workers: int, in_process: bool) -> Iterator[ForkServer | None]:
    """The fork server of serve's (or the demo's) worker children (``bot.hosting.forkserver``),
    forked now: enter it before anything starts a thread or opens the database. None if
    there is no child to fork, or this process cannot fork safely (they start afresh).
    Closed on the way out, whether or not a pool used it."""
    forks = None if workers == 0 or in_process else ForkServer.fork(_import_the_worker, _run_forked)
    try:
        yield forks
    finally:
        if forks is not None:
            forks.close()


def _import_the_worker() -> None:
    from crew_runtime import worker  # noqa: F401 (CrewAI: seconds, once for every child)


def _run_forked(argv: Sequence[str]) -> int:
    from bot.cli.main import main  # the command line that imports this module

    return main(argv)


def run_worker(ctx: Context) -> int:
    args = ctx.args
    if args.parent_pid is not None:
        # Done already under ``python -m bot``; not under the ``countersign`` script.
        die_with_parent(args.parent_pid)
    config = ctx.config()  # a bad file fails here, before crewai is imported
    store = ctx.store()

    from crew_runtime.worker import Worker, WorkerSettings

    settings = WorkerSettings()
    if args.concurrency is not None:
        settings = dataclasses.replace(settings, concurrency=args.concurrency)
    if args.lease is not None:  # the heartbeat follows: a third of it
        settings = dataclasses.replace(settings, lease=timedelta(seconds=args.lease))
    if args.poll is not None:
        settings = dataclasses.replace(settings, poll=timedelta(seconds=args.poll))
    if args.no_listen:
        settings = dataclasses.replace(settings, listen=False)

    on_settled = _announcer(args.settled_fd) if args.settled_fd is not None else None
    worker = Worker(store, config, settings, on_settled=on_settled)
    if args.wake_fd is not None:
        _listen_for_wakes(args.wake_fd, worker)
    stop_signals = _STOP_SIGNALS
    if args.parent_pid is not None:
        # Ctrl+C reaches the whole process group; the parent stops this child with SIGTERM
        # once, and a second signal racing the first would kill it mid-step.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        stop_signals = (signal.SIGTERM,)
    if args.nice:
        os.nice(args.nice)
    if args.metrics_port:
        _serve_metrics(store, args.metrics_host, args.metrics_port)
    with stderr_logging(ctx.settings), _stop_on_signals(worker, stop_signals):
        log.info(
            "worker %s started: database %s, config %s, %d run(s) at a time%s",
            worker.worker_id,
            where(ctx.database_url),
            config.path,
            settings.concurrency,
            ", until idle" if args.until_idle else "",
        )
        # CrewAI and everything imported so far live as long as the process: keep them out
        # of the collector's full passes, which otherwise walk ~350,000 objects (200+ ms of
        # CPU) in the middle of whichever execution triggers one (docs/benchmarks.md §2).
        gc.freeze()
        worker.run(until_idle=args.until_idle)
        log.info("worker %s stopped after %d execution(s)", worker.worker_id, worker.executions)
    return 0


@contextmanager
def _stop_on_signals(
    worker: Worker, signals: tuple[signal.Signals, ...] = _STOP_SIGNALS
) -> Iterator[None]:
    """On one of ``signals`` call ``worker.stop()`` once, then put the old handlers back."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread
        return
    # getsignal() is None for a handler not set from Python; SIG_DFL is the best stand-in.
    previous = {sig: signal.getsignal(sig) or signal.SIG_DFL for sig in signals}

    def restore() -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("%s: stopping; runs in progress go back to the queue", signal.Signals(signum).name)
        restore()
        worker.stop()

    for sig in signals:
        signal.signal(sig, on_signal)
    try:
        yield
    finally:
        restore()


def _serve_metrics(store: Store, host: str, port: int) -> None:
    """This process's counters (``crew_runtime.metrics``) on /metrics, and /healthz."""
    from bot.hosting.metrics import Endpoints, serve_in_thread
    from crew_runtime.metrics import REGISTRY

    serve_in_thread(Endpoints(store, (REGISTRY,)), host, port)


def _announcer(fd: int) -> Callable[[], None]:
    """Tell the parent (serve's worker pool) that a run settled: one byte, never blocking."""
    os.set_blocking(fd, False)

    def announce() -> None:
        # A full pipe: the parent has news to read already. A closed one: it is gone.
        with contextlib.suppress(BlockingIOError, BrokenPipeError):
            os.write(fd, b".")

    return announce


def _listen_for_wakes(fd: int, worker: Worker) -> None:
    """Look for work when the parent says a run was queued, not at the next poll."""

    def listen() -> None:
        with contextlib.suppress(OSError):
            while os.read(fd, 64):
                worker.wake()

    threading.Thread(target=listen, name="countersign-wake", daemon=True).start()
