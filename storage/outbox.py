"""The Store's outbox: the announcements a change commits with it, handed to the dispatcher
one claim at a time, in order per run."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, func, insert, select, update

from storage import leases
from storage.base import StoreBase
from storage.errors import OutboxClaimLost
from storage.records import JSON, OutboxMessage
from storage.rows import load_run, to_outbox_message
from storage.schema import outbox, review_events, reviews, runs
from storage.status import OutboxKind, ReviewEventKind

# How the error of a row given up on begins (``OutboxStore.give_up_outbox``).
GIVEN_UP = "given up: "


@dataclass(frozen=True)
class SlackRefusal:
    """What the audit trail keeps of a row given up on: Slack's error code (``error``), what
    Slack said of it (``said``, None if nothing), who gave it up (``by``) and whether its run
    was cancelled because of it (``cancelled``)."""

    error: str
    said: str | None
    by: str
    cancelled: bool


class OutboxStore(StoreBase):
    """Due rows, claims on them, the steps of a delivery, sent or failed."""

    def due_outbox(self, limit: int = 50) -> list[OutboxMessage]:
        """Unsent announcements that may go out now, oldest first.

        A row is due when its next attempt is due and no dispatcher holds it, and the
        same holds for every earlier unsent row of its run: a run's rows go out in order,
        so one that keeps failing holds back the rows after it. Its progress rows
        (``RUN_PROGRESS``, which edit a message of their own and may wait out
        ``storage.progress.EDIT_EVERY``) hold back only the progress rows after them.
        """
        now = self.clock()
        earlier = outbox.alias("earlier")
        held_back = (
            select(earlier.c.id)
            .where(
                earlier.c.run_id == outbox.c.run_id,
                earlier.c.sent_at.is_(None),
                earlier.c.id < outbox.c.id,
                _holds_back(earlier, outbox),
                (earlier.c.next_attempt_at > now) | (earlier.c.claimed_until > now),
            )
            .exists()
        )
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(outbox)
                .where(*leases.OUTBOX.free(now), ~held_back)
                .order_by(outbox.c.id)
                .limit(limit)
            )
            return [to_outbox_message(row) for row in rows]

    def claim_outbox(self, message_id: int, claim: str, hold: timedelta) -> OutboxMessage | None:
        """Hold an unsent row for one dispatcher for ``hold``, before it calls Slack.

        Compare-and-set: the row must be due, unheld (or held past its time, by a
        dispatcher that died) and the first unsent row of its run (progress rows aside, for
        a row that is not one).

        Returns:
            The row with the steps already done, or None if it cannot be had now.
        """
        now = self.clock()
        first = outbox.alias("first")
        first_unsent = (
            select(func.min(first.c.id))
            .where(
                first.c.run_id == outbox.c.run_id,
                first.c.sent_at.is_(None),
                _holds_back(first, outbox),
            )
            .scalar_subquery()
        )
        with self._tx() as conn:
            if not leases.OUTBOX.claim(
                conn, message_id, claim, now, hold, outbox.c.id == first_unsent
            ):
                return None
            row = conn.execute(select(outbox).where(outbox.c.id == message_id)).one()
            return to_outbox_message(row)

    def renew_outbox_claim(self, message_id: int, claim: str, hold: timedelta) -> bool:
        """Hold the row ``hold`` longer; False if ``claim`` no longer holds it."""
        with self._tx() as conn:
            return leases.OUTBOX.renew(conn, message_id, claim, self.clock() + hold)

    def save_outbox_progress(self, message_id: int, claim: str, progress: JSON) -> None:
        """Record the steps of a delivery done so far (and the one under way).

        Raises:
            OutboxClaimLost: ``claim`` no longer holds the row: stop delivering it.
        """
        with self._tx() as conn:
            if not leases.OUTBOX.write(conn, message_id, claim, progress=progress):
                raise OutboxClaimLost(message_id)

    def mark_sent(
        self,
        message_id: int,
        claim: str,
        *,
        thread: tuple[str, str, str] | None = None,
        review_message: tuple[str, str, str] | None = None,
    ) -> bool:
        """Compare-and-set held by ``claim`` and unsent → sent; False if it was not.

        In the same transaction, remember where Slack put what was posted:
        ``thread=(run_id, channel, ts)`` for a run's root message,
        ``review_message=(review_id, channel, ts)`` for a review's message.
        """
        with self._tx() as conn:
            if not leases.OUTBOX.let_go(conn, message_id, claim, sent_at=self.clock()):
                return False
            if thread is not None:
                run_id, channel, ts = thread
                conn.execute(
                    update(runs)
                    .where(runs.c.id == run_id, runs.c.thread_ts.is_(None))
                    .values(channel=channel, thread_ts=ts)
                )
            if review_message is not None:
                review_id, channel, ts = review_message
                conn.execute(
                    update(reviews)
                    .where(reviews.c.id == review_id)
                    .values(channel=channel, message_ts=ts)
                )
            return True

    def mark_failed(self, message_id: int, claim: str, error: str, retry_in: timedelta) -> None:
        """Let the row go with its error, to be tried again (from its first step not done)
        in ``retry_in``; a no-op if ``claim`` no longer holds it."""
        with self._tx() as conn:
            leases.OUTBOX.release(conn, message_id, claim, error, self.clock() + retry_in)

    def give_up_outbox(
        self, message_id: int, claim: str, error: str, refusal: SlackRefusal | None = None
    ) -> bool:
        """Compare-and-set held by ``claim`` and unsent → settled without being sent: Slack
        refused it for good (``error``, kept as ``last_error`` after ``GIVEN_UP``), so the
        rows after it go out. With ``refusal``, the run's audit trail records it in the same
        transaction (``review_events``, kind ``slack_refused``). False if ``claim`` no longer
        holds it (and nothing is recorded)."""
        now = self.clock()
        with self._tx() as conn:
            given_up = leases.OUTBOX.let_go(
                conn,
                message_id,
                claim,
                attempts=outbox.c.attempts + 1,
                last_error=(GIVEN_UP + error)[: leases.ERROR_LENGTH],
                sent_at=now,
            )
            if given_up and refusal is not None:
                _record_refusal(conn, message_id, refusal, now)
            return given_up

    def gave_up_before(self, run_id: str, message_id: int, error: str) -> bool:
        """Whether another row of ``run_id`` than ``message_id`` was given up on for
        ``error`` (an error code): its person was told already."""
        with self.engine.connect() as conn:
            found = conn.execute(
                select(outbox.c.id)
                .where(
                    outbox.c.run_id == run_id,
                    outbox.c.id != message_id,
                    outbox.c.sent_at.is_not(None),
                    outbox.c.last_error.startswith(f"{GIVEN_UP}slack: {error}", autoescape=True),
                )
                .limit(1)
            ).first()
            return found is not None


def _record_refusal(conn: Connection, message_id: int, refusal: SlackRefusal, at: datetime) -> None:
    """The audit trail's record of a row given up on: the run's, of the row's review if it
    has one, keyed by the row so that it is written once."""
    row = conn.execute(
        select(outbox.c.run_id, outbox.c.review_id, outbox.c.kind).where(outbox.c.id == message_id)
    ).one()
    run = load_run(conn, row.run_id)
    review_kind = None
    if row.review_id is not None:
        review_kind = conn.execute(
            select(reviews.c.kind).where(reviews.c.id == row.review_id)
        ).scalar_one_or_none()
    details = {
        "outbox_id": message_id,
        "kind": row.kind,
        "error": refusal.error,
        "said": refusal.said,
        "cancelled": refusal.cancelled,
    }
    conn.execute(
        insert(review_events).values(
            review_id=row.review_id or "",
            run_id=run.id,
            crew=run.crew,
            review_kind=review_kind or "",
            kind=ReviewEventKind.SLACK_REFUSED,
            by=refusal.by,
            to=run.started_by or refusal.by,
            request_key=f"slack_refused:{run.id}:{message_id}",
            at=at,
            channel=run.channel,
            thread_ts=run.thread_ts,
            details=details,
        )
    )


def _holds_back(earlier: Any, later: Any) -> Any:
    """Whether an unsent row ``earlier`` keeps ``later`` of the same run waiting: any row
    keeps a progress row waiting, a progress row keeps no other."""
    progress = OutboxKind.RUN_PROGRESS
    return (later.c.kind == progress) | (earlier.c.kind != progress)
