"""The Store's webhook events: what a crew's webhooks are told, committed with the change.

A run that waits for a review, a run that ends and a decided review each write one
``webhook_events`` row in the transaction that makes the change (:func:`record_event`), so an
event is never lost and never told of a change that rolled back. Its id is the idempotency id
every delivery of it carries. The bot (``bot.webhooks``) fans an event out to the crew's
webhooks, one claim at a time: unlike the outbox, events are not held back behind an earlier
one of their run, so a receiver that keeps failing delays nobody else.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from sqlalchemy import Connection, Row, insert, select, tuple_, update

from storage import leases
from storage.base import StoreBase, new_id
from storage.records import JSON
from storage.schema import runs, webhook_events


class WebhookEventType(StrEnum):
    """What a webhook may be told, as the ``type`` of the JSON it receives."""

    RUN_WAITING = "run.waiting"  # a run suspended for reviews (payload: their ids)
    RUN_FINISHED = "run.finished"  # succeeded, failed, rejected or cancelled
    REVIEW_DECIDED = "review.decided"


@dataclass(frozen=True)
class WebhookEvent:
    """An event to deliver. ``body`` is the JSON sent, once an attempt fixed it;
    ``progress`` maps each webhook to how its delivery went."""

    id: str
    run_id: str
    review_id: str | None
    crew: str
    type: WebhookEventType
    payload: JSON
    body: str | None
    created_at: datetime
    progress: JSON = field(default_factory=dict)
    done_at: datetime | None = None  # delivered to, or given up by, every webhook wanting it


def record_event(
    conn: Connection,
    now: datetime,
    kind: WebhookEventType,
    run_id: str,
    review_id: str | None = None,
    payload: JSON | None = None,
    *,
    crew: str | None = None,
) -> None:
    """Write the event in the caller's transaction (the change it announces); ``crew``: the
    run's, where the caller has read it. The wake-up is the outbox's: every change that
    makes an event also writes an outbox row."""
    if crew is None:
        crew = conn.execute(select(runs.c.crew).where(runs.c.id == run_id)).scalar_one()
    conn.execute(
        insert(webhook_events).values(
            id=new_id("evt"),
            run_id=run_id,
            review_id=review_id,
            crew=crew,
            type=kind,
            payload=payload or {},
            progress={},
            created_at=now,
            next_attempt_at=now,
        )
    )


class WebhookStore(StoreBase):
    """Due events, claims on them, their bodies and how their deliveries went."""

    def due_webhook_events(self, limit: int = 50) -> list[WebhookEvent]:
        """Events not done whose next attempt is due and that nobody holds, oldest first."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(webhook_events)
                .where(*leases.WEBHOOK_EVENTS.free(self.clock()))
                .order_by(webhook_events.c.next_attempt_at, webhook_events.c.id)
                .limit(limit)
            )
            return [_to_event(row) for row in rows]

    def close_unwatched_events(self, watched: Collection[tuple[str, str]]) -> int:
        """Mark done the open events no webhook wants (``watched``: ``(crew, type)`` pairs
        some webhook subscribes to); how many."""
        where = [webhook_events.c.done_at.is_(None)]
        if watched:
            pairs = tuple_(webhook_events.c.crew, webhook_events.c.type)
            where.append(pairs.not_in(sorted(watched)))
        with self._tx() as conn:
            return conn.execute(
                update(webhook_events).where(*where).values(done_at=self.clock())
            ).rowcount

    def claim_webhook_event(
        self, event_id: str, claim: str, hold: timedelta
    ) -> WebhookEvent | None:
        """Hold an open, due event for one sender for ``hold`` (compare-and-set); None if
        another has it or it is done."""
        now = self.clock()
        with self._tx() as conn:
            if not leases.WEBHOOK_EVENTS.claim(conn, event_id, claim, now, hold):
                return None
            row = conn.execute(select(webhook_events).where(webhook_events.c.id == event_id))
            return _to_event(row.one())

    def fix_webhook_body(self, event_id: str, claim: str, body: str) -> bool:
        """Keep ``body`` as the JSON every delivery of the event sends; False if ``claim``
        no longer holds it."""
        with self._tx() as conn:
            return leases.WEBHOOK_EVENTS.write(
                conn, event_id, claim, webhook_events.c.body.is_(None), body=body
            )

    def settle_webhook_event(
        self, event_id: str, claim: str, progress: JSON, retry_in: timedelta | None
    ) -> bool:
        """Record how each webhook's delivery went and let the event go: done when
        ``retry_in`` is None, else due again in ``retry_in``. False if ``claim`` no longer
        held it (another sender took it over: its record stands)."""
        now = self.clock()
        values: dict[str, Any] = {"progress": progress}
        if retry_in is None:
            values["done_at"] = now
        else:
            values["next_attempt_at"] = now + retry_in
        with self._tx() as conn:
            return leases.WEBHOOK_EVENTS.let_go(conn, event_id, claim, **values)

    def list_webhook_events(self, *, run_id: str | None = None) -> list[WebhookEvent]:
        """Events in the order they were made (all, or ``run_id``'s)."""
        query = select(webhook_events).order_by(webhook_events.c.created_at, webhook_events.c.id)
        if run_id is not None:
            query = query.where(webhook_events.c.run_id == run_id)
        with self.engine.connect() as conn:
            return [_to_event(row) for row in conn.execute(query)]


def _to_event(row: Row[Any]) -> WebhookEvent:
    return WebhookEvent(
        id=row.id,
        run_id=row.run_id,
        review_id=row.review_id,
        crew=row.crew,
        type=WebhookEventType(row.type),
        payload=row.payload,
        body=row.body,
        created_at=row.created_at,
        progress=row.progress,
        done_at=row.done_at,
    )
