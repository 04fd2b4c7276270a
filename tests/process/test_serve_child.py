"""``countersign serve`` killed while its worker child is still starting: the child goes too.

The child spends seconds importing (SQLAlchemy, then CrewAI) before it can look for work.
A serve killed in that time must not leave it behind, re-parented and claiming runs that
no bot will announce. Each test freezes the child (SIGSTOP) at one moment of its start,
SIGKILLs serve, lets the child go on (SIGCONT) and waits for it to disappear.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from sandbox import StandInThread
from storage import RunStatus, Store
from tests.support.harness import ON_SQLITE, ROOT
from tests.support.slack_harness import CHANNEL, SECRET, free_port, new_standin, wait_until

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
def _serve(tmp_path: Path, db_url: str, slack: StandInThread) -> Iterator[subprocess.Popen[bytes]]:
    env = dict(os.environ)
    env.update(
        PYTHONPATH=str(ROOT),
        DATABASE_URL=db_url,
        COUNTERSIGN_CONFIG=str(tmp_path / "countersign.toml"),
        SLACK_BOT_TOKEN=slack.standin.bot_token,
        SLACK_SIGNING_SECRET=SECRET,
        SLACK_API_URL=slack.api_url,
    )
    with (tmp_path / "serve.log").open("ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "bot", "serve", "--port", str(free_port())],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)


@pytest.mark.parametrize("moment", list(MOMENTS))
def test_the_worker_child_dies_with_serve_at_any_moment_of_its_start(
    tmp_path: Path, db_url: str, moment: str
) -> None:
    (tmp_path / "countersign.toml").write_text(CONFIG)
    store = Store.open(db_url)
    queued = store.create_run("writer", {"topic": "otters"}, channel=CHANNEL)
    port = free_port()
    with (
        contextlib.closing(store),
        StandInThread(new_standin(bot_endpoint=f"http://127.0.0.1:{port}/slack/events")) as slack,
        _serve(tmp_path, db_url, slack) as serve,
    ):
        child = wait_until(lambda: _children(serve.pid), timeout=120, what="serve's worker")[0]
        marker = MOMENTS[moment]
        if marker is not None:
            wait_until(lambda: _mapped(child, marker), timeout=120, what=f"{moment} in the child")
        os.kill(child, signal.SIGSTOP)
        stat = _stat(child)
        assert stat is not None, "the child exited on its own"
        started = stat[19]
        try:
            serve.kill()
            serve.wait(30)
            # A fatal signal kills a stopped process too: the child may be gone already.
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGCONT)
            wait_until(
                lambda: not _alive(child, started),
                timeout=60,
                what=f"the worker child to exit with serve (killed {moment})",
            )
        finally:
            if _alive(child, started):
                os.kill(child, signal.SIGKILL)
        assert store.get_run(queued.id).status == RunStatus.QUEUED
