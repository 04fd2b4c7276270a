"""The guard behind the rule that a test starting a process is marked ``slow``.

`make check` runs the tests marked otherwise, which must start no process: no subprocess (a
command, ``sys.executable``, ``git``), no fork, no multiprocessing, no worker forked from the
zygote. ``refuse_processes`` (tests/conftest.py's autouse fixture, for each test without the
mark) makes every way the standard library starts one fail the test that tried, on whichever
thread it tried. The one process the test support starts for itself, once per pytest process and
for no test in particular, goes through ``support_process`` (``pg_dump`` of the PostgreSQL
template, tests/support/templates.py).
"""

from __future__ import annotations

import ast
import multiprocessing.util
import os
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

_support = threading.local()


@contextmanager
def support_process() -> Iterator[None]:
    """Around a process the test support starts for itself on this thread, allowed in any test."""
    _support.on = True
    try:
        yield
    finally:
        _support.on = False


def refuse_processes(monkeypatch: pytest.MonkeyPatch, nodeid: str) -> list[str]:
    """Make starting a process fail for the rest of the test ``nodeid``; returns the list of what
    was refused, which the caller checks when the test is over (a refusal on another thread than
    the test's fails that thread only)."""
    refused: list[str] = []

    def guard(what: str, original: Callable[..., Any], describe: Callable[..., str]) -> Any:
        def guarded(*args: Any, **kwargs: Any) -> Any:
            if getattr(_support, "on", False):
                return original(*args, **kwargs)
            message = (
                f"{nodeid} starts a process ({what}: {describe(*args)}): mark it slow"
                " (`make check` runs only the tests that start none)"
            )
            refused.append(message)
            raise AssertionError(message)

        return guarded

    def command(_popen: object, args: object, *rest: object) -> str:
        return repr(args)[:200]

    def first(*args: object) -> str:
        return repr(args[:2])[:200]

    popen = subprocess.Popen._execute_child  # type: ignore[attr-defined]
    monkeypatch.setattr(subprocess.Popen, "_execute_child", guard("subprocess", popen, command))
    for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system"):
        if hasattr(os, name):
            monkeypatch.setattr(os, name, guard(f"os.{name}", getattr(os, name), first))
    spawn = multiprocessing.util.spawnv_passfds
    monkeypatch.setattr(
        multiprocessing.util, "spawnv_passfds", guard("multiprocessing", spawn, first)
    )
    from tests.support.zygote import Zygote

    monkeypatch.setattr(
        Zygote, "fork", guard("a worker forked from the zygote", Zygote.fork, first)
    )
    return refused


def marked_slow(module: Path) -> bool:
    """Whether every test of the test module at ``module`` is slow by its ``pytestmark``
    (``pytest.mark.slow``, alone or in the list), read from its source without importing it."""
    for statement in ast.parse(module.read_text()).body:
        if isinstance(statement, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "pytestmark"
            for target in statement.targets
        ):
            value = statement.value
            marks = value.elts if isinstance(value, ast.List | ast.Tuple) else [value]
            return any(ast.unparse(mark) == "pytest.mark.slow" for mark in marks)
    return False
