"""The worker pool ``countersign serve`` embeds: in a child process (the default) or in threads.

CrewAI's agent loop is CPU-bound Python that holds the GIL for long stretches. In the
bot's own process, four busy crews slowed a burst of Slack acks several times over
(docs/benchmarks.md); in a child process they cannot touch the event loop, and a crew
that crashes or leaks cannot take the Slack endpoint with it. Threads remain for tests
and small setups that want a single process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Protocol

import bot
from bot.hosting.forkserver import Child, ForkServer, ForkServerGone
from crew_runtime.config import Config
from storage import Store

log = logging.getLogger(__name__)


class WorkerPool(Protocol):
    def start(self) -> None: ...

    async def stop(self) -> None: ...

    def wake(self) -> None: ...

    def alive(self) -> bool: ...


class NoWorkers:
    """``serve --workers 0``: the Slack side alone; workers run elsewhere."""

    def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    def wake(self) -> None:
        pass

    def alive(self) -> bool:
        return True  # nothing here to die


class ThreadPool:
    """A ``Worker`` on a thread of this process."""

    def __init__(
        self,
        store: Store,
        config: Config,
        *,
        concurrency: int,
        lease: timedelta,
        poll: timedelta,
        on_settled: Callable[[], None],
    ) -> None:
        from crew_runtime.worker import Worker, WorkerSettings  # imports crewai: seconds

        self.worker = Worker(
            store,
            config,
            WorkerSettings(concurrency=concurrency, lease=lease, poll=poll),
            on_settled=on_settled,
        )
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self.worker.run, name="countersign-worker", daemon=True
        )
        self._thread.start()

    async def stop(self) -> None:
        self.worker.stop()
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, 60)

    def wake(self) -> None:
        self.worker.wake()

    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()


class ProcessPool:
    """``countersign worker`` as a child process, restarted if it dies.

    The database URL and the configuration go through the environment, never the
    command line (where ``ps`` would show a password). Two pipes spare both sides
    their polling delay: the bot wakes the child when a decision queues a run, and the
    child tells the bot when a run settled. Polling stays as the fallback.
    """

    def __init__(
        self,
        database_url: str,
        config: Config,
        *,
        concurrency: int,
        lease: timedelta,
        poll: timedelta,
        on_settled: Callable[[], None],
        metrics_at: tuple[str, int] | None = None,
        forks: ForkServer | None = None,
    ) -> None:
        self.argv = [
            "worker",
            "--concurrency",
            str(concurrency),
            "--lease",
            str(lease.total_seconds()),
            "--poll",
            str(poll.total_seconds()),
            # Slack's acks have a 3 s deadline and crews have none: the bot goes first.
            "--nice",
            "10",
        ]
        if metrics_at is not None:  # its own counters, on a port of its own
            self.argv += ["--metrics-host", metrics_at[0], "--metrics-port", str(metrics_at[1])]
        self.env = {
            **os.environ,
            "DATABASE_URL": database_url,
            "COUNTERSIGN_CONFIG": str(config.path),
        }
        self._on_settled = on_settled
        self._forks = forks
        self._process: asyncio.subprocess.Process | Child | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self._wake_fd: int | None = None

    def start(self) -> None:
        self._stopping.clear()
        self._task = asyncio.create_task(self._supervise())

    async def _supervise(self) -> None:
        while not self._stopping.is_set():
            if await self._run_child():
                return
            log.warning("worker process exited with %s; restarting", self._returncode())
            await asyncio.sleep(1)

    async def _run_child(self) -> bool:
        """One child, with two pipes: the bot wakes it (a decision queued a run) and it
        tells the bot when a run settled (the outbox has news), instead of both polling.
        True when the pool is stopping, False when the child died."""
        loop = asyncio.get_running_loop()
        wake_r, wake_w = os.pipe()
        settled_r, settled_w = os.pipe()
        try:
            self._process = await self._start_child(wake_r, settled_w)
        finally:
            os.close(wake_r)
            os.close(settled_w)
        log.info("worker process %d started", self._process.pid)
        os.set_blocking(wake_w, False)
        self._wake_fd = wake_w
        loop.add_reader(settled_r, self._settled, settled_r)
        try:
            stopping = asyncio.create_task(self._stopping.wait())
            exited = asyncio.create_task(self._process.wait())
            await asyncio.wait({stopping, exited}, return_when=asyncio.FIRST_COMPLETED)
            stopping.cancel()
            if self._stopping.is_set():
                exited.cancel()
                return True
            return False
        finally:
            self._wake_fd = None
            loop.remove_reader(settled_r)
            os.close(settled_r)
            os.close(wake_w)

    async def _start_child(self, wake_r: int, settled_w: int) -> asyncio.subprocess.Process | Child:
        """Forked by the fork server if there is one, else a fresh interpreter. The child's
        ``--parent-pid`` is its parent's: the fork server's, or this process's."""
        if self._forks is not None:
            argv = [*self.argv, "--parent-pid", str(self._forks.pid)]
            try:
                return await self._forks.start(argv, self.env, (wake_r, settled_w))
            except ForkServerGone as exc:
                log.warning("fork server: %s; worker processes start afresh from now on", exc)
                self._forks.close()
                self._forks = None
        return await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            # ``python -m bot`` here, ``python -m countersign.bot`` installed (the wheel's
            # layout: docs/architecture.md, "The installed package").
            bot.__name__,
            *self.argv,
            # Read before anything is imported (bot.__main__): the child must not outlive
            # this process, even if it dies while the child is still importing CrewAI.
            *("--parent-pid", str(os.getpid())),
            *("--wake-fd", str(wake_r), "--settled-fd", str(settled_w)),
            env=self.env,
            pass_fds=(wake_r, settled_w),
        )

    def _settled(self, fd: int) -> None:
        try:
            news = os.read(fd, 4096)
        except OSError:
            news = b""
        if news:
            self._on_settled()
        else:  # the child closed its end (it exited): stop watching until the next one
            asyncio.get_running_loop().remove_reader(fd)

    def _returncode(self) -> int | None:
        return None if self._process is None else self._process.returncode

    async def stop(self) -> None:
        """SIGTERM: runs in progress go back to the queue (the worker's graceful stop)."""
        self._stopping.set()
        if self._task is not None:
            await self._task
        process = self._process
        if process is not None and process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), 60)
            except TimeoutError:
                process.kill()
                with contextlib.suppress(ProcessLookupError):
                    await process.wait()
        if self._forks is not None:
            self._forks.close()
            self._forks = None

    def wake(self) -> None:
        """A byte down the child's wake pipe; a full pipe means a wake is pending anyway."""
        fd = self._wake_fd
        if fd is not None:
            with contextlib.suppress(BlockingIOError, BrokenPipeError):
                os.write(fd, b".")

    def alive(self) -> bool:
        return self._process is not None and self._process.returncode is None
