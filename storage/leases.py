"""Leased rows: the one mechanism behind every table whose rows one process at a time works on.

Five tables are queues of that kind: ``runs`` (a worker executes a run), ``inbox`` (a replica
handles a Slack request), ``outbox`` (a dispatcher announces a change in Slack),
``home_tabs`` (a dispatcher publishes a person's Home view) and ``webhook_events`` (a sender
POSTs an event). A row is *held* by one claimer until a time (its ``until`` column) and,
where the table has one, under a token of the claimer's (its ``token`` column); a holder
that dies lets its row go when that time passes. Every change below is one compare-and-set
statement on the row's key, its token and whether it is still *open* (not done), so two
claimers racing for a row get it once, and a claimer that lost its row (its hold ran out and
another took it) can change nothing.

What the tables keep of their own: the runs' claim is a status transition (``queued →
running``, ``storage.runs``), with a fencing token every write of the execution compares
(``storage.fencing``) and a heartbeat that renews many leases at once; an inbox row is
recorded already held by the replica that acks it, and has no token (what a request does is
idempotent by its key, ``storage.inbox``); outbox rows go out in order per run
(``storage.outbox``); a Home row is a counter of refreshes wanted, not a row per change
(``storage.home``); a webhook event records each webhook's delivery in its ``progress``
(``storage.webhooks``).

:class:`Backoff` is the one retry policy of the processes that hold these rows: when a row
let go after a failure is due again.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Column, ColumnElement, Connection, Row, select, tuple_, update

from storage.schema import home_tabs, inbox, outbox, runs, webhook_events
from storage.status import RunStatus

# How much of an error a row keeps.
ERROR_LENGTH = 2000


@dataclass(frozen=True)
class Leased:
    """A table of leased rows, by its columns.

    Attributes:
        key: the row's key.
        until: held until then (NULL: never held, or let go).
        open: the rows not done, the only ones that may be claimed or held.
        token: the claim's token (None: the table has none; a row is held by time alone).
        due: when a row not held may be claimed (None: when it is open).
        attempts, error: how many attempts failed, and the last one's error (None: the
            table counts none).
    """

    key: Column[Any]
    until: Column[Any]
    open: ColumnElement[bool]
    token: Column[Any] | None = None
    due: Column[Any] | None = None
    attempts: Column[Any] | None = None
    error: Column[Any] | None = None

    def expired(self, now: datetime) -> ColumnElement[bool]:
        """Held by a claimer who let the time pass (dead, or stalled)."""
        return self.until <= now

    def unheld(self, now: datetime) -> ColumnElement[bool]:
        """Held by nobody alive."""
        return self.until.is_(None) | self.expired(now)

    def free(self, now: datetime) -> tuple[ColumnElement[bool], ...]:
        """Open, due and held by nobody alive: a row that may be claimed now."""
        due = () if self.due is None else (self.due <= now,)
        return (self.open, *due, self.unheld(now))

    def claimed_by(self, token: str) -> ColumnElement[bool]:
        """Under the claim ``token`` (by token, not by claimer: every claim has its own)."""
        return self._token == token

    def held(self, key: Any, token: str) -> tuple[ColumnElement[bool], ...]:
        """The compare-and-set condition that the claim ``token`` still holds row ``key``."""
        return self.key == key, self.open, self.claimed_by(token)

    def claim(
        self,
        conn: Connection,
        key: Any,
        token: str,
        now: datetime,
        hold: timedelta,
        *where: ColumnElement[bool],
    ) -> bool:
        """Hold row ``key`` for the claim ``token`` for ``hold``, if it is free now (and
        matches ``where``); False if it is not (another claimer has it, it is done or not
        due)."""
        values = {self._token.key: token, self.until.key: now + hold}
        claimed = conn.execute(
            update(self.key.table).where(self.key == key, *self.free(now), *where).values(values)
        )
        return claimed.rowcount == 1

    def write(
        self, conn: Connection, key: Any, token: str, *where: ColumnElement[bool], **values: Any
    ) -> bool:
        """Set ``values`` on row ``key`` if the claim ``token`` still holds it (and it matches
        ``where``), keeping the hold; False if it does not."""
        written = conn.execute(
            update(self.key.table).where(*self.held(key, token), *where).values(**values)
        )
        return written.rowcount == 1

    def renew(self, conn: Connection, key: Any, token: str, until: datetime) -> bool:
        """Hold row ``key`` until ``until`` if the claim ``token`` still holds it (even past
        its time: the token still matching means nobody claimed it since)."""
        return self.write(conn, key, token, **{self.until.key: until})

    def renew_all(
        self, conn: Connection, claims: Mapping[Any, str] | Collection[Any], until: datetime
    ) -> set[Any]:
        """:meth:`renew`, in one statement, for each of ``claims`` (key → token; for a
        table without tokens, keys) still held; the keys renewed."""
        if not claims:
            return set()
        if self.token is None:
            held = self.key.in_(sorted(claims))
        else:
            assert isinstance(claims, Mapping)
            held = tuple_(self.key, self.token).in_(sorted(claims.items()))
        renewed = conn.execute(
            update(self.key.table)
            .where(self.open, held)
            .values({self.until.key: until})
            .returning(self.key)
        )
        return set(renewed.scalars())

    def let_go(self, conn: Connection, key: Any, token: str, **values: Any) -> bool:
        """Set ``values`` on row ``key`` and let it go (held by nobody), if the claim
        ``token`` still holds it; False if it does not (and nothing changes)."""
        return self.write(
            conn, key, token, **{self._token.key: None, self.until.key: None}, **values
        )

    def release(
        self, conn: Connection, key: Any, token: str, error: str, retry_at: datetime
    ) -> bool:
        """Let row ``key`` go after a failed attempt: counted, with its ``error``, due again
        at ``retry_at``; False if the claim ``token`` no longer held it."""
        assert self.due is not None and self.attempts is not None and self.error is not None
        return self.let_go(
            conn,
            key,
            token,
            **{
                self.attempts.key: self.attempts + 1,
                self.error.key: error[:ERROR_LENGTH],
                self.due.key: retry_at,
            },
        )

    def holds(self, conn: Connection, key: Any, token: str, *, lock: bool = False) -> bool:
        """Whether the claim ``token`` still holds row ``key``; with ``lock``, the row is
        locked for the transaction if it does (what it guards cannot change under it)."""
        query = select(self.key).where(*self.held(key, token))
        if lock:
            query = query.with_for_update()
        return conn.execute(query).first() is not None

    def take_expired(
        self,
        conn: Connection,
        now: datetime,
        hold: timedelta,
        columns: Collection[Column[Any]],
        limit: int,
    ) -> list[Row[Any]]:
        """Free the expired: hold for ``hold``, oldest key first, up to ``limit`` open rows
        whose holder let their time pass, each counted as one more attempt. Each row is taken
        by a compare-and-set on its expiry, so sweepers racing take it once (on PostgreSQL
        they skip each other's rows); their ``columns`` as they were, for the rows taken."""
        assert self.token is None and self.attempts is not None
        found = conn.execute(
            select(self.key, *columns)
            .where(self.open, self.expired(now))
            .order_by(self.key)
            .limit(limit)
            .with_for_update(skip_locked=True)
        ).all()
        taken = []
        for row in found:
            moved = conn.execute(
                update(self.key.table)
                .where(self.key == row[0], self.open, self.expired(now))
                .values({self.until.key: now + hold, self.attempts.key: self.attempts + 1})
            )
            if moved.rowcount == 1:
                taken.append(row)
        return taken

    @property
    def _token(self) -> Column[Any]:
        assert self.token is not None, "this table's rows are held by time alone"
        return self.token


RUNS = Leased(
    key=runs.c.id,
    until=runs.c.lease_expires,
    open=runs.c.status == RunStatus.RUNNING,
    token=runs.c.lease_token,
)
INBOX = Leased(
    key=inbox.c.id,
    until=inbox.c.claimed_until,
    open=inbox.c.done_at.is_(None),
    attempts=inbox.c.attempts,
)
OUTBOX = Leased(
    key=outbox.c.id,
    until=outbox.c.claimed_until,
    open=outbox.c.sent_at.is_(None),
    token=outbox.c.claim,
    due=outbox.c.next_attempt_at,
    attempts=outbox.c.attempts,
    error=outbox.c.last_error,
)
HOME = Leased(
    key=home_tabs.c.user_id,
    until=home_tabs.c.claimed_until,
    open=home_tabs.c.wanted > home_tabs.c.published,
    token=home_tabs.c.claim,
    due=home_tabs.c.due_at,
    attempts=home_tabs.c.attempts,
    error=home_tabs.c.last_error,
)
WEBHOOK_EVENTS = Leased(
    key=webhook_events.c.id,
    until=webhook_events.c.claimed_until,
    open=webhook_events.c.done_at.is_(None),
    token=webhook_events.c.claim,
    due=webhook_events.c.next_attempt_at,
)


@dataclass(frozen=True)
class Backoff:
    """How long a row let go after a failure waits before its next attempt: ``first``
    doubled each attempt, capped at ``most``; with ``jitter``, each wait a random part of it
    (from ``1 - jitter`` of it to all), so that receivers back from an outage are not hit by
    every retry at once."""

    first: timedelta
    most: timedelta
    jitter: float = 0.5

    def after(self, attempts: int) -> timedelta:
        """The wait after the ``attempts``-th failed attempt (the first is 1)."""
        ceiling = min(self.first * (1 << min(max(attempts - 1, 0), 30)), self.most)
        if not self.jitter:
            return ceiling
        return ceiling * random.uniform(1 - self.jitter, 1.0)  # noqa: S311 (jitter, not a secret)
