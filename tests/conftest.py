"""Shared fixtures: a real database per test, on SQLite and on PostgreSQL.

Tests never mock our storage. Each test gets its own SQLite file, or its own
PostgreSQL schema (selected through ``search_path`` in the URL, so subprocess
workers can be pointed at it too). With ``CI=true`` an unreachable PostgreSQL
fails the run instead of skipping half the suite.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

for _name, _value in {
    "CREWAI_DISABLE_TELEMETRY": "true",
    "CREWAI_DISABLE_TRACKING": "true",
    "OTEL_SDK_DISABLED": "true",
    "CREWAI_TRACING_ENABLED": "false",
    "CREWAI_DISABLE_VERSION_CHECK": "true",
    "CREWAI_STORAGE_DIR": "countersign-tests",
}.items():
    os.environ.setdefault(_name, _value)

# The first platform.processor() runs `uname -p` (the OpenAI client asks it for its headers, on
# its own thread): asked here, so that no test without the slow mark starts that process.
platform.processor()


from storage import Store  # noqa: E402
from tests.support.database import PG_BASE, pg_required  # noqa: E402
from tests.support.reports import REPORTS, failed  # noqa: E402
from tests.support.spawning import marked_slow, refuse_processes  # noqa: E402
from tests.support.templates import fill, schemas  # noqa: E402


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh database URL on each backend, at the migrations' head (a copy of the template
    tests/support/templates.py made); empty under the ``empty_database`` mark, for a test of
    the migrations themselves (``Store.open`` on it runs them)."""
    empty = request.node.get_closest_marker("empty_database") is not None
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'countersign.db'}"
        if not empty:
            fill(url)
        yield url
        return
    pg_required()
    pool = schemas(PG_BASE)
    schema = pool.take(empty=empty)
    try:
        yield f"{PG_BASE}?options=-csearch_path%3D{schema}"
    finally:
        pool.give_back(schema, empty=empty)


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    """A store on ``db_url``."""
    opened = Store.open(db_url)
    yield opened
    opened.close()


@pytest.fixture
def bench(tmp_path: Path, db_url: str) -> Iterator[Any]:
    """A config with the test crews, a store, and worker processes on demand."""
    from tests.support.harness import Bench

    made = Bench(tmp_path, db_url)
    yield made
    made.close()


@pytest.fixture
def setup(request: pytest.FixtureRequest, tmp_path: Path, db_url: str) -> Iterator[Any]:
    """A bot's configuration and its store, for the bot with this configuration: the TOML of
    the nearest ``bot_config`` mark (``pytestmark = pytest.mark.bot_config(CONFIG)`` in the
    module, or on the test) loaded from tmp_path/countersign.toml, and a store on ``db_url``,
    closed afterwards. The test starts the bot on them (``slack_and_bot(config, store)``)."""
    from tests.support.slack_harness import configured

    mark = request.node.get_closest_marker("bot_config")
    if mark is None:
        raise pytest.UsageError(f"{request.node.nodeid} uses setup without a bot_config mark")
    with configured(tmp_path, db_url, mark.args[0]) as pair:
        yield pair


@pytest.fixture(autouse=True)
def _only_slow_tests_start_processes(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """A test that starts a process (a subprocess, a fork, a worker) is marked ``slow``: `make
    check` leaves it out (tests/support/spawning.py)."""
    if request.node.get_closest_marker("slow") is not None:
        yield
        return
    refused = refuse_processes(monkeypatch, request.node.nodeid)
    yield
    if refused and not failed(request):
        pytest.fail(refused[0], pytrace=False)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Under ``-m "not slow"`` (`make check`), a test module whose every test is slow is not
    imported: each pytest process would pay its imports (a second or more of CPU for some) to
    deselect all of it."""
    if (
        config.option.markexpr == "not slow"
        and collection_path.name.startswith("test_")
        and collection_path.suffix == ".py"
        and marked_slow(collection_path)
    ):
        return True
    return None


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    item.stash.setdefault(REPORTS, {})[report.when] = report
    return report


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Stop the zygote the worker processes were forked from, if a test started it."""
    from tests.support.zygote import Zygote

    Zygote.stop()
