"""The rule that a test starting a process is marked slow, and its guard
(tests/support/spawning.py): every way the standard library starts one is refused."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.spawning import marked_slow, refuse_processes
from tests.support.zygote import Zygote


def _asyncio() -> None:
    async def start() -> None:
        await asyncio.create_subprocess_exec("true")

    asyncio.run(start())


STARTS: dict[str, Callable[[], object]] = {
    "run": lambda: subprocess.run([sys.executable, "-c", "pass"], check=True),
    "popen": lambda: subprocess.Popen(["git", "status"]),
    "asyncio": _asyncio,
    "fork": lambda: os.fork(),
    "system": lambda: os.system("true"),
    "posix_spawn": lambda: os.posix_spawn("/bin/true", ["true"], {}),
    "spawn": lambda: multiprocessing.get_context("spawn").Process(target=print).start(),
    "forkserver": lambda: multiprocessing.get_context("forkserver").Process(target=print).start(),
    "zygote": lambda: Zygote.fork(["worker"], {}, Path.cwd(), Path("never.log")),
}


@pytest.mark.parametrize("start", STARTS.values(), ids=STARTS.keys())
def test_a_test_without_the_slow_mark_cannot_start_a_process(
    monkeypatch: pytest.MonkeyPatch, start: Callable[[], object]
) -> None:
    refused = refuse_processes(monkeypatch, "this test")
    with pytest.raises(AssertionError, match=r"^this test starts a process \(.+\): mark it slow"):
        start()
    assert len(refused) == 1


def test_a_process_started_on_another_thread_is_refused_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the thread saw is kept for the fixture, which fails the test when it is over."""
    refused = refuse_processes(monkeypatch, "this test")
    seen: list[BaseException] = []

    def start() -> None:
        try:
            subprocess.run(["true"], check=True)
        except AssertionError as error:
            seen.append(error)

    thread = threading.Thread(target=start)
    thread.start()
    thread.join()
    assert [str(error) for error in seen] == refused
    assert len(refused) == 1


@pytest.mark.parametrize(
    ("source", "slow"),
    [
        ("import pytest\npytestmark = pytest.mark.slow\n", True),
        ("pytestmark = [pytest.mark.slow, pytest.mark.bot_config(CONFIG)]\n", True),
        ("pytestmark = [pytest.mark.bot_config(CONFIG)]\n", False),
        ("pytestmark = pytest.mark.skip\n@pytest.mark.slow\ndef test_x(): pass\n", False),
        ("@pytest.mark.slow\ndef test_x(): pass\n", False),
    ],
)
def test_a_module_is_left_out_of_make_check_uncollected_only_if_its_mark_says_slow(
    tmp_path: Path, source: str, slow: bool
) -> None:
    """(tests/conftest.py's pytest_ignore_collect, under ``-m "not slow"``)"""
    module = tmp_path / "test_module.py"
    module.write_text(source)
    assert marked_slow(module) is slow
