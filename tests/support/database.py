"""PostgreSQL for the tests: where it is, and a test that needs it skipped (failed in CI)
when it is unreachable."""

from __future__ import annotations

import os

import pytest
from sqlalchemy import create_engine, text

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
