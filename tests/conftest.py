"""Shared fixtures: a real database per test, on SQLite and on PostgreSQL.

Tests never mock our storage. Each test gets its own SQLite file, or its own
PostgreSQL schema (selected through ``search_path`` in the URL, so subprocess
workers can be pointed at it too). With ``CI=true`` an unreachable PostgreSQL
fails the run instead of skipping half the suite.
"""

from __future__ import annotations

import os
import secrets
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

from sqlalchemy import create_engine, text  # noqa: E402

from storage import Store  # noqa: E402
from tests.templates import open_store  # noqa: E402

PG_BASE = os.environ.get("COUNTERSIGN_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
_pg_state: dict[str, str | None] = {}


def _pg_unreachable() -> str | None:
    """None when PostgreSQL answers, else why not (checked once per session)."""
    if "error" not in _pg_state:
        try:
            engine = create_engine(PG_BASE, connect_args={"connect_timeout": 3})
            with engine.connect() as conn:
                conn.execute(text("select 1"))
            engine.dispose()
            _pg_state["error"] = None
        except Exception as exc:
            _pg_state["error"] = f"{type(exc).__name__}: {exc}"
    return _pg_state["error"]


def pg_required() -> None:
    """Skip (fail in CI) a test that needs PostgreSQL when it is unreachable."""
    error = _pg_unreachable()
    if error is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"PostgreSQL is required in CI and is unreachable: {error}")
        pytest.skip(f"PostgreSQL unreachable: {error}")


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty database URL on each backend (the ``store`` fixture, ``Bench`` and
    ``slack_harness.configured`` fill it from ``tests/templates``; ``Store.open`` on it runs the
    migrations)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'countersign.db'}"
        return
    pg_required()
    schema = f"t_{secrets.token_hex(6)}"
    admin = create_engine(PG_BASE)
    with admin.begin() as conn:
        conn.execute(text(f"CREATE SCHEMA {schema}"))
    try:
        yield f"{PG_BASE}?options=-csearch_path%3D{schema}"
    finally:
        with admin.begin() as conn:
            conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    """A store on ``db_url``, at the migrations' head (a copy of ``tests/templates``')."""
    opened = open_store(db_url)
    yield opened
    opened.close()


@pytest.fixture
def bench(tmp_path: Path, db_url: str) -> Iterator[Any]:
    """A config with the test crews, a store, and worker processes on demand."""
    from tests.harness import Bench

    made = Bench(tmp_path, db_url)
    yield made
    made.close()


@pytest.fixture(autouse=True)
def _only_slow_tests_start_workers(request: pytest.FixtureRequest, monkeypatch: Any) -> None:
    """A test that starts worker processes is marked ``slow``: `make check` leaves it out."""
    if request.node.get_closest_marker("slow") is None:
        from tests.zygote import Zygote

        def refuse(*args: object, **kwargs: object) -> None:
            raise AssertionError("this test starts a worker process: mark it slow")

        monkeypatch.setattr(Zygote, "fork", refuse)


# A fixture's teardown can ask whether its test failed (to keep a screenshot, say).
_REPORTS = pytest.StashKey[dict[str, pytest.TestReport]]()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    item.stash.setdefault(_REPORTS, {})[report.when] = report
    return report


def failed(request: pytest.FixtureRequest) -> bool:
    """Whether the test using the fixture behind ``request`` failed (in its call phase)."""
    report = request.node.stash.get(_REPORTS, {}).get("call")
    return report is not None and report.failed


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Stop the zygote the worker processes were forked from, if a test started it."""
    from tests.zygote import Zygote

    Zygote.stop()
