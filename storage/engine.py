"""Engines for SQLite (the default) and PostgreSQL, configured the same way everywhere."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url

DEFAULT_URL = "sqlite:///countersign.db"

# Set on a connection that will write: SQLite then takes its write lock at BEGIN.
_WRITES = "countersign_writes"
# Set on a writer that must not wait long (what acks a person's click): see write_transaction.
_EAGER = "countersign_eager"
BUSY_TIMEOUT_MS = 30_000
_EAGER_RETRY_S = 0.0005


@contextmanager
def write_transaction(engine: Engine, *, eager: bool = False) -> Iterator[Connection]:
    """A transaction that writes: committed at the end, rolled back on an exception.

    On SQLite it begins with ``BEGIN IMMEDIATE`` (the write lock up front), so two
    read-then-write transactions can never deadlock on upgrading their locks; reads
    (``engine.connect()``) begin deferred and, in WAL mode, never wait for a writer.

    ``eager``: while another process writes, SQLite's busy handler sleeps 1, 2, 5, … up to
    100 ms between tries, so a writer that found the lock taken a few times loses it to
    busy workers for a long while; an eager one asks again every half millisecond (only
    that writer spins, and only while the lock is taken).
    """
    with engine.connect() as conn:
        conn.execution_options(**{_WRITES: True, _EAGER: eager})
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
        cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        # A commit never copies the WAL back into the database (and fsyncs it) on its own:
        # the commit that crossed the threshold paid ~100 ms, and one of those acks a click.
        # Long-lived processes checkpoint every few seconds instead (Store.checkpoint).
        cursor.execute("PRAGMA wal_autocheckpoint=0")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        options = connection.get_execution_options()
        if options.get(_EAGER, False):
            _begin_eagerly(connection.connection.dbapi_connection)
        else:
            writes = options.get(_WRITES, False)
            connection.exec_driver_sql("BEGIN IMMEDIATE" if writes else "BEGIN")

    return engine


def checkpoint(engine: Engine) -> None:
    """Copy SQLite's write-ahead log back into the database, without waiting for anyone
    (``PASSIVE``); nothing to do on PostgreSQL."""
    if engine.dialect.name != "sqlite":
        return
    with engine.connect() as conn:
        # On the driver's connection: pysqlite runs it outside any transaction.
        conn.connection.dbapi_connection.execute("PRAGMA wal_checkpoint(PASSIVE)")  # type: ignore[union-attr]


def _begin_eagerly(raw: Any) -> None:
    """``BEGIN IMMEDIATE``, asked for every half millisecond until the busy timeout."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    raw.execute("PRAGMA busy_timeout=0")
    try:
        while True:
            try:
                raw.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() >= deadline:
                    raise
            time.sleep(_EAGER_RETRY_S)
    finally:
        raw.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
