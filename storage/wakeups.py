"""Wake-ups across processes and hosts: PostgreSQL's LISTEN/NOTIFY, polling as the fallback.

A transaction that makes a run runnable (a new run, a decision that queues one, a run given
back) or writes an outbox row calls :func:`notify` with its topic, ``runs`` or ``outbox``.
PostgreSQL delivers the notification when the transaction commits, never for one rolled back,
to every session listening on the channel, on any host: a worker elsewhere claims a decided
run at once instead of at its next poll, and every ``serve`` replica's dispatcher looks at the
outbox. The channel is the schema's own (``countersign:<schema>``), so deployments sharing a
database wake only themselves.

:class:`Wakeups` listens on a connection of its own, in a thread, and calls the handler of each
topic it hears. Nothing depends on it: a process keeps polling (workers every ``--poll``, the
dispatcher every second), so a notification lost with a dropped connection costs one poll. A
listener whose connection drops says so once, connects again every ``retry`` seconds, and once
back calls every handler (whatever committed while it was deaf is looked at). SQLite has no
such thing: there a listener does nothing, and within one process the callers' own wake calls
do the job.
"""

from __future__ import annotations

import logging
import os
import selectors
import threading
from collections.abc import Callable, Mapping

import psycopg
from psycopg import sql
from sqlalchemy import Connection, Engine, text

log = logging.getLogger(__name__)

RUNS = "runs"
"""A run became runnable: workers, look for work."""
OUTBOX = "outbox"
"""An outbox row was written: dispatchers, look at the outbox."""

_PREFIX = "countersign:"
_NOTIFY = text("SELECT pg_notify(:prefix || current_schema(), :topic)")


def notify(conn: Connection, topic: str) -> None:
    """Wake the listeners of ``topic`` when ``conn``'s transaction commits (PostgreSQL only;
    PostgreSQL sends one notification for the same topic notified twice in a transaction)."""
    if conn.dialect.name == "postgresql":
        conn.execute(_NOTIFY, {"prefix": _PREFIX, "topic": topic})


class Wakeups:
    """Calls ``handlers[topic]`` when a transaction notifies ``topic``; a context manager.

    Args:
        engine: the database whose notifications to hear (a no-op on SQLite).
        handlers: what to call for each topic, from the listener's thread: keep them quick
            and thread-safe (setting an event).
        retry: seconds between attempts to connect again after the connection dropped.
    """

    def __init__(
        self, engine: Engine, handlers: Mapping[str, Callable[[], None]], *, retry: float = 1.0
    ) -> None:
        self.handlers = dict(handlers)
        self.retry = retry
        self.listening = threading.Event()
        self.backend_pid: int | None = None
        self.connections = 0
        self._url = (
            engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
            if engine.dialect.name == "postgresql"
            else None
        )
        self._stop = threading.Event()
        # A pipe stop() writes to: the listening thread waits on it and its connection at once.
        self._bell: tuple[int, int] | None = None
        self._thread = threading.Thread(target=self._main, name="countersign-wakeups", daemon=True)

    def start(self) -> None:
        """Listen in a thread of its own (on PostgreSQL, and only for some handler)."""
        if self._url is not None and self.handlers:
            self._bell = os.pipe()
            self._thread.start()

    def stop(self) -> None:
        """Stop listening, at once (the thread is waiting on its connection and on this)."""
        self._stop.set()
        if self._bell is None:
            return
        os.write(self._bell[1], b"!")
        self._thread.join(10)
        if not self._thread.is_alive():
            for end in self._bell:
                os.close(end)
            self._bell = None

    def __enter__(self) -> Wakeups:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _main(self) -> None:
        failing = False
        while not self._stop.is_set():
            try:
                self._listen()
            except psycopg.Error as exc:
                if not failing:
                    log.warning(
                        "wake-ups: not listening (%s); polling until the database answers",
                        _first_line(exc),
                    )
                    failing = True
            else:
                failing = False
            finally:
                self.listening.clear()
                self.backend_pid = None
            self._stop.wait(self.retry)

    def _listen(self) -> None:
        assert self._url is not None
        # Keepalives: a connection cut without a reset (a partition) is noticed in seconds.
        with psycopg.connect(
            self._url,
            autocommit=True,
            connect_timeout=5,
            keepalives=1,
            keepalives_idle=5,
            keepalives_interval=2,
            keepalives_count=3,
        ) as conn:
            row = conn.execute("SELECT current_schema()").fetchone()
            schema = str(row[0]) if row else "public"
            conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(_PREFIX + schema)))
            self.backend_pid = conn.info.backend_pid
            self.connections += 1
            if self.connections > 1:
                log.info("wake-ups: listening again")
            self.listening.set()
            for handler in self.handlers.values():  # what committed while nobody listened
                handler()
            assert self._bell is not None
            # A selector, not select(): a busy process's descriptors may be past FD_SETSIZE.
            with selectors.DefaultSelector() as waiting:
                waiting.register(conn.fileno(), selectors.EVENT_READ, "connection")
                waiting.register(self._bell[0], selectors.EVENT_READ, "bell")
                while not self._stop.is_set():
                    ready = {key.data for key, _ in waiting.select()}
                    if "connection" not in ready:
                        continue  # the bell: stopping
                    # A dropped connection is readable too: notifies() raises its error.
                    for note in conn.notifies(timeout=0):
                        woken = self.handlers.get(note.payload)
                        if woken is not None:
                            woken()


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"[:300]
