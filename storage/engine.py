"""Engines for SQLite (the default) and PostgreSQL, configured the same way everywhere."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url

DEFAULT_URL = "sqlite:///countersign.db"

# Set on a connection that will write: SQLite then takes its write lock at BEGIN.
_WRITES = "countersign_writes"


@contextmanager
def write_transaction(engine: Engine) -> Iterator[Connection]:
    """A transaction that writes: committed at the end, rolled back on an exception.

    On SQLite it begins with ``BEGIN IMMEDIATE`` (the write lock up front), so two
    read-then-write transactions can never deadlock on upgrading their locks; reads
    (``engine.connect()``) begin deferred and, in WAL mode, never wait for a writer.
    """
    with engine.connect() as conn:
        conn.execution_options(**{_WRITES: True})
        with conn.begin():
            yield conn


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
    Only :func:`write_transaction` takes the write lock; a read holds none, so a burst of
    reads never queues the writes behind it (nor behind SQLite's busy-wait sleeps).
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
    def _on_begin(connection: Connection) -> None:
        writes = connection.get_execution_options().get(_WRITES, False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if writes else "BEGIN")

    return engine
