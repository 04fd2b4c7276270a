"""The inbox: Slack's requests, written down before they are acked and handled after.

A request acked before it is recorded is lost with the process; one recorded first survives a
crash at any moment after the ack and is handled then. Each row is *claimed* while it is
handled (``claimed_until``), renewed while its handler works; a row whose claim ran out without
being finished is claimed again (after a crash, by the next process or another replica), so
every recorded request is handled at least once.
Handling is idempotent by the request's ``key`` (a decision or a run made by a request is not
made again by its replay), which makes that exactly once where it matters.

The unique ``key`` also deduplicates: a Slack retry, the twin events of one message, or a
replayed request records nothing new (``record`` answers None for it).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import Connection, delete, func, select, update
from sqlalchemy.dialects import postgresql, sqlite

from storage import leases
from storage.engine import write_transaction
from storage.schema import inbox
from storage.store import Store


@dataclass(frozen=True)
class NewRequest:
    """A verified request to record: its dedupe ``key``, and its body as it came."""

    key: str
    body: str
    content_type: str


@dataclass(frozen=True)
class InboxRequest:
    """A recorded request handed to a handler; ``attempts`` counts the claims so far."""

    id: int
    key: str
    body: str
    content_type: str
    attempts: int


class InboxStore:
    """Record, claim, finish and forget requests; each call is one transaction."""

    def __init__(self, store: Store, claim: timedelta = timedelta(seconds=10)) -> None:
        self.store = store
        self.claim = claim

    def record(
        self, requests: Sequence[NewRequest], finished: Sequence[tuple[int, str | None]] = ()
    ) -> list[int | None]:
        """Insert ``requests`` claimed by the caller, in one transaction (one commit for a
        burst); also mark ``finished`` rows done, so they share that commit.

        Returns:
            The new row's id for each request, in order; None for a duplicate (its key was
            recorded before, or earlier in the same batch).
        """
        now = self.store.clock()
        rows = []
        seen: set[str] = set()
        for request in requests:
            key = request.key[:200]
            if key not in seen:
                seen.add(key)
                rows.append(
                    {
                        "key": key,
                        "body": request.body,
                        "content_type": request.content_type[:100],
                        "received_at": now,
                        "claimed_until": now + self.claim,
                        "attempts": 1,
                    }
                )
        ids: dict[str, int] = {}
        # Eager: a person waits for this commit (the ack), and busy workers must not starve it.
        with write_transaction(self.store.engine, eager=True) as conn:
            if rows:
                dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
                # One statement for any batch size (compiled once, cached): rows as
                # executemany parameters, not a new VALUES list per batch.
                statement = (
                    dialect.insert(inbox)
                    .on_conflict_do_nothing(index_elements=[inbox.c.key])
                    .returning(inbox.c.id, inbox.c.key)
                )
                ids = {key: id_ for id_, key in conn.execute(statement, rows)}
            self._finish(conn, finished)
        answers: list[int | None] = []
        for request in requests:
            answers.append(ids.pop(request.key[:200], None))
        return answers

    def finish(self, finished: Sequence[tuple[int, str | None]]) -> None:
        """Mark rows handled: ``(id, None)`` done, ``(id, error)`` given up with that reason."""
        with write_transaction(self.store.engine) as conn:
            self._finish(conn, finished)

    def _finish(self, conn: Connection, finished: Sequence[tuple[int, str | None]]) -> None:
        now = self.store.clock()
        # The rows done share one statement (a burst's marks ride with the next burst's
        # acks: one statement each cost that commit a millisecond of CPU per row).
        done = sorted(row_id for row_id, error in finished if error is None)
        if done:
            conn.execute(
                update(inbox)
                .where(inbox.c.id.in_(done), inbox.c.done_at.is_(None))
                .values(done_at=now, error=None)
            )
        for row_id, error in finished:
            if error is not None:
                conn.execute(
                    update(inbox)
                    .where(inbox.c.id == row_id, inbox.c.done_at.is_(None))
                    .values(done_at=now, error=error[:2000])
                )

    def renew(self, row_ids: Collection[int]) -> None:
        """Hold unfinished requests still in hand for another claim: a handler slower than
        the claim (a rate limit waited out, a queue of requests) must not see its request
        taken by a sweep, its own process's or another replica's, and handled twice."""
        if not row_ids:
            return
        with write_transaction(self.store.engine) as conn:
            leases.INBOX.renew_all(conn, row_ids, self.store.clock() + self.claim)

    def claim_stale(self, limit: int = 50) -> list[InboxRequest]:
        """Claim unfinished requests whose claim ran out (their handler died), oldest first."""
        columns = (inbox.c.key, inbox.c.body, inbox.c.content_type, inbox.c.attempts)
        with write_transaction(self.store.engine) as conn:
            taken = leases.INBOX.take_expired(conn, self.store.clock(), self.claim, columns, limit)
        return [
            InboxRequest(row.id, row.key, row.body, row.content_type, row.attempts + 1)
            for row in taken
        ]

    def count_open(self) -> int:
        """Requests recorded and not yet handled (for health checks and tests)."""
        with self.store.engine.connect() as conn:
            query = select(func.count()).select_from(inbox).where(inbox.c.done_at.is_(None))
            return int(conn.execute(query).scalar_one())

    def forget(self, older_than: timedelta) -> int:
        """Drop handled requests older than ``older_than``: Slack's signatures expire after
        five minutes, so a replay of an older request is refused before it gets here."""
        cutoff = self.store.clock() - older_than
        with write_transaction(self.store.engine) as conn:
            return conn.execute(
                delete(inbox).where(inbox.c.done_at.is_not(None), inbox.c.received_at < cutoff)
            ).rowcount
