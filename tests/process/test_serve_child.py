"""``countersign serve`` killed while its worker child is starting or running: the child goes too.

serve forks a fork server at its start (``bot.hosting.forkserver``), which forks the worker
child; if the fork server dies, serve starts the child as a fresh interpreter, which spends
seconds importing (SQLAlchemy, then CrewAI) before it can look for work. A serve killed at any
of these moments must not leave a process behind, re-parented and claiming runs that no bot
will announce. Each test freezes a process (SIGSTOP) at one moment, SIGKILLs serve, lets the
process go on (SIGCONT) and waits for every process under serve to disappear.

serve is forked warm from the test session's zygote, and so are its fork server and the
worker that one forks; the fresh interpreter is a cold start, as in production.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from sandbox import StandInThread
from storage import RunStatus, Store
from tests.support.harness import ON_SQLITE, ROOT
from tests.support.slack_harness import CHANNEL, SECRET, free_port, new_standin, wait_until
from tests.support.zygote import Forked, Zygote

pytestmark = [pytest.mark.slow, ON_SQLITE]

CONFIG = f"""
[crews.writer]
factory = "tests.support.crews:writer"
description = "Outline then article, both reviewed"
channel = "{CHANNEL}"
"""

# What the child has mapped by a moment of its start: nothing yet (the interpreter is
# starting, or has not even exec'd), SQLAlchemy's extensions (the CLI is being imported),
# pydantic-core's (CrewAI is being imported, after the configuration and the store).
MOMENTS = {
    "before its imports": None,
    "importing SQLAlchemy": "/sqlalchemy/",
    "importing CrewAI": "/pydantic_core/",
}


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state first), None if gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat is not None and int(stat[1]) == pid:
                found.append(int(entry.name))
    return found


def _alive(pid: int, started: str) -> bool:
    """Whether the process that started at ``started`` (clock ticks) still runs.

    A zombie counts as gone (its new parent may be slow to reap it), and so does a
    different process that got the same pid.
    """
    stat = _stat(pid)
    return stat is not None and stat[0] != "Z" and stat[19] == started


def _mapped(pid: int, marker: str) -> bool:
    """Whether the worker (not serve's forked copy, before its exec) has mapped ``marker``."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        return b"worker" in command and marker in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


@contextmanager
def _serve(tmp_path: Path, db_url: str, slack: StandInThread) -> Iterator[Forked]:
    env = dict(os.environ)
    env.update(
        PYTHONPATH=str(ROOT),
        DATABASE_URL=db_url,
        COUNTERSIGN_CONFIG=str(tmp_path / "countersign.toml"),
        SLACK_BOT_TOKEN=slack.standin.bot_token,
        SLACK_SIGNING_SECRET=SECRET,
        SLACK_API_URL=slack.api_url,
    )
    argv = ["serve", "--port", str(free_port())]
    proc = Zygote.fork(argv, env, tmp_path, tmp_path / "serve.log")
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)


def _kill_serve_with(serve: Forked, frozen: list[int], store: Store) -> None:
    """Freeze the ``frozen`` processes, queue a run, SIGKILL serve and let them go on: they,
    and every other process under serve, must be gone, the run unclaimed."""
    _freeze(frozen, store)
    under = _descendants(serve.pid)
    assert set(frozen) <= set(under), "a process exited on its own"
    queued = store.create_run("writer", {"topic": "otters"}, channel=CHANNEL)
    try:
        serve.kill()
        serve.wait(30)
        for pid in frozen:  # a fatal signal kills a stopped process too: it may be gone
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        wait_until(
            lambda: not [pid for pid, started in under.items() if _alive(pid, started)],
            timeout=60,
            what="every process under serve to exit with it",
        )
    finally:
        for pid, started in under.items():
            if _alive(pid, started):
                os.kill(pid, signal.SIGKILL)
    assert store.get_run(queued.id).status == RunStatus.QUEUED


def _freeze(pids: list[int], store: Store) -> None:
    """SIGSTOP ``pids`` at a moment none of them holds SQLite's write lock (a process frozen
    inside a write would keep the test's own writes waiting): frozen, the lock is tried, and
    if it is held they go on until it is free, and are frozen again."""
    path = store.engine.url.database
    for _ in range(50):
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        if store.engine.url.get_backend_name() != "sqlite" or path is None:
            return
        if _write_lock_free(path, timeout=0.2):
            return
        for pid in pids:  # one of them holds it: let it finish that write
            os.kill(pid, signal.SIGCONT)
        assert _write_lock_free(path, timeout=30), "SQLite's write lock was never free"
    raise AssertionError("serve's processes were always frozen inside a write")


def _write_lock_free(path: str, timeout: float) -> bool:
    """Whether SQLite's write lock could be taken (and given back) within ``timeout``."""
    probe = sqlite3.connect(path, timeout=timeout, isolation_level=None)
    try:
        probe.execute("BEGIN IMMEDIATE")
        probe.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        probe.close()


def _descendants(pid: int) -> dict[int, str]:
    """The live processes under ``pid``, by pid, with their start times."""
    found: dict[int, str] = {}
    for child in _children(pid):
        stat = _stat(child)
        if stat is not None and stat[0] != "Z":
            found[child] = stat[19]
            found.update(_descendants(child))
    return found


@contextmanager
def _scene(tmp_path: Path, db_url: str) -> Iterator[tuple[Forked, Store]]:
    (tmp_path / "countersign.toml").write_text(CONFIG)
    store = Store.open(db_url)
    port = free_port()
    with (
        contextlib.closing(store),
        StandInThread(new_standin(bot_endpoint=f"http://127.0.0.1:{port}/slack/events")) as slack,
        _serve(tmp_path, db_url, slack) as serve,
    ):
        yield serve, store


def _fork_server_and_worker(serve: Forked) -> tuple[int, int]:
    forks = wait_until(lambda: _children(serve.pid), timeout=120, what="serve's fork server")[0]
    worker = wait_until(lambda: _children(forks), timeout=120, what="the forked worker")[0]
    return forks, worker


def test_the_fork_server_and_its_worker_die_with_serve(tmp_path: Path, db_url: str) -> None:
    with _scene(tmp_path, db_url) as (serve, store):
        _kill_serve_with(serve, list(_fork_server_and_worker(serve)), store)


@pytest.mark.parametrize("moment", list(MOMENTS))
def test_a_worker_started_afresh_dies_with_serve_at_any_moment_of_its_start(
    tmp_path: Path, db_url: str, moment: str
) -> None:
    with _scene(tmp_path, db_url) as (serve, store):
        forks, worker = _fork_server_and_worker(serve)
        started = _stat(worker)
        assert started is not None
        os.kill(forks, signal.SIGKILL)  # its worker goes with it, and serve starts one afresh
        wait_until(lambda: not _alive(worker, started[19]), what="the worker to exit with it")
        child = wait_until(
            lambda: [pid for pid in _children(serve.pid) if pid != forks],
            what="a worker started afresh",
        )[0]
        marker = MOMENTS[moment]
        if marker is not None:
            wait_until(lambda: _mapped(child, marker), timeout=120, what=f"{moment} in the child")
        _kill_serve_with(serve, [child], store)
