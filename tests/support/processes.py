"""``countersign serve`` and ``countersign worker`` forked warm from the zygote."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.harness import ROOT
from tests.support.slack_harness import SECRET, wait_healthy
from tests.support.zygote import Forked, Zygote


def bot_env(tmp_path: Path, db_url: str, bot_token: str, api_url: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        PYTHONPATH=str(ROOT),
        DATABASE_URL=db_url,
        COUNTERSIGN_CONFIG=str(tmp_path / "countersign.toml"),
        SLACK_BOT_TOKEN=bot_token,
        SLACK_SIGNING_SECRET=SECRET,
        SLACK_API_URL=api_url,
    )
    return env


def serve(env: dict[str, str], port: int, *extra: str) -> Forked:
    """``countersign serve`` forked warm from the zygote, with no worker of its own (runs are
    left to ``_worker``, as in a deployment with workers elsewhere; serve's own worker child
    is tested in test_serve_child and test_pool): what is killed here is the Slack side."""
    home = Path(env["COUNTERSIGN_CONFIG"]).parent
    argv = ["serve", "--port", str(port), "--lease", "3", "--no-workers", *extra]
    proc = Zygote.fork(argv, env, home, home / f"serve-{next(_started)}.log")

    def alive() -> None:
        assert proc.poll() is None, proc.communicate()[0]

    wait_healthy(port, alive)
    return proc


@contextmanager
def worker(env: dict[str, str]) -> Iterator[Forked]:
    """A ``countersign worker`` for the test's whole length, niced as serve's child is."""
    home = Path(env["COUNTERSIGN_CONFIG"]).parent
    argv = ["worker", "--poll", "0.1", "--lease", "3", "--nice", "10"]
    proc = Zygote.fork(argv, env, home, home / f"worker-{next(_started)}.log")
    try:
        yield proc
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0, out


_started = itertools.count(1)
