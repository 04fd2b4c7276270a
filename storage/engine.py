"""Engines for SQLite (the default) and PostgreSQL, configured the same way everywhere."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url

DEFAULT_URL = "sqlite:///countersign.db"


def normalise_url(url: str) -> str:
    """Use psycopg 3 for ``postgres://`` URLs (SQLAlchemy would pick psycopg2)."""
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def make_engine(url: str = DEFAULT_URL) -> Engine:
    """Create an engine; on SQLite turn on WAL, a busy timeout and foreign keys.

    SQLite serialises writers: WAL lets readers go on during a write, and the busy
    timeout makes a second writer wait instead of failing with "database is locked".
    """
    url = normalise_url(url)
    if make_url(url).get_backend_name() != "sqlite":
        return create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=10)

    engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy, not pysqlite, open transactions, so BEGIN IMMEDIATE works.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        # Take the write lock up front: two read-then-write transactions can then
        # never deadlock on the upgrade from a shared to a reserved lock.
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    return engine
