"""What every part of the :class:`storage.store.Store` shares: the engine, the clock, one write
transaction, and the outbox row that announces a change in the same transaction (and wakes
the dispatchers listening when it commits)."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

from sqlalchemy import Connection, Engine, insert
from sqlalchemy.exc import DataError

from storage.engine import write_transaction
from storage.errors import UnstorableValue
from storage.records import JSON
from storage.schema import outbox
from storage.status import OutboxKind
from storage.wakeups import OUTBOX, notify

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    """Naive UTC, the form every time column holds."""
    return datetime.now(UTC).replace(tzinfo=None)


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(6)}"


class StoreBase:
    """The engine and the clock the Store's parts (runs, reviews, journal, outbox) work with."""

    def __init__(self, engine: Engine, clock: Clock = utc_now) -> None:
        self.engine = engine
        self.clock = clock

    @contextmanager
    def _tx(self) -> Iterator[Connection]:
        """One write transaction; a value the database refuses becomes :class:`UnstorableValue`.

        The database's refusal (``DataError``), or the driver's, which cannot encode a
        lone surrogate, will repeat; a lost connection (``OperationalError``) may not,
        and is left as it is.
        """
        try:
            with write_transaction(self.engine) as conn:
                yield conn
        except DataError as exc:
            raise UnstorableValue(_first_line(exc.orig or exc)) from exc
        except UnicodeEncodeError as exc:
            raise UnstorableValue(_first_line(exc)) from exc

    def _enqueue(
        self,
        conn: Connection,
        run_id: str,
        kind: OutboxKind,
        review_id: str | None = None,
        payload: JSON | None = None,
    ) -> None:
        enqueue(conn, self.clock(), run_id, kind, review_id, payload)


def enqueue(
    conn: Connection,
    now: datetime,
    run_id: str,
    kind: OutboxKind,
    review_id: str | None = None,
    payload: JSON | None = None,
) -> None:
    """Write the outbox row announcing a change, in the change's transaction."""
    conn.execute(
        insert(outbox).values(
            run_id=run_id,
            review_id=review_id,
            kind=kind,
            payload=payload or {},
            created_at=now,
            next_attempt_at=now,
            attempts=0,
        )
    )
    notify(conn, OUTBOX)


def _first_line(exc: BaseException) -> str:
    """What a driver says, without the SQL and parameters SQLAlchemy appends."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__
