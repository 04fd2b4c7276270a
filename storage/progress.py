"""A run's live progress: what its crew is doing, and the one message in its thread that
shows it.

The worker writes the state (``save_progress``, fenced by its lease, at most every
:data:`EDIT_EVERY` per run: ``crew_runtime.progress``); the dispatcher posts the message once
and edits it. Each write announces itself by a ``RUN_PROGRESS`` outbox row, coalesced: while
one is waiting, unclaimed, it will show the newest state anyway, so no other is written. A
row is due no sooner than :data:`EDIT_EVERY` after the message was last shown, so Slack sees
at most one edit per run in that time however fast the crew moves.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Connection, case, insert, select, update

from storage import leases
from storage.base import StoreBase
from storage.fencing import fence
from storage.records import JSON
from storage.schema import outbox, run_progress
from storage.status import OutboxKind
from storage.wakeups import OUTBOX, notify

EDIT_EVERY = timedelta(seconds=2)


@dataclass(frozen=True)
class RunProgress:
    """The state the worker last wrote (its ``version``, at ``updated_at``), and the message
    showing it: where it is (None until posted), the version it shows and when it was last
    shown."""

    run_id: str
    state: JSON
    version: int
    channel: str | None
    message_ts: str | None
    shown_version: int
    shown_at: datetime | None
    updated_at: datetime


class ProgressStore(StoreBase):
    """The progress of runs, and the outbox rows that show it."""

    def load_progress(self, run_id: str) -> RunProgress | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(run_progress).where(run_progress.c.run_id == run_id)).first()
        if row is None:
            return None
        return RunProgress(**{**row._mapping, "state": dict(row.state)})

    def save_progress(self, run_id: str, token: str, state: JSON) -> None:
        """Write the run's progress, under the claim ``token``, and have it shown.

        Raises:
            LeaseLost: the claim no longer holds the run; nothing was written.
        """
        now = self.clock()
        with self._tx() as conn:
            fence(conn, run_id, token)
            changed = conn.execute(
                update(run_progress)
                .where(run_progress.c.run_id == run_id)
                .values(state=state, version=run_progress.c.version + 1, updated_at=now)
            ).rowcount
            if changed == 0:
                conn.execute(
                    insert(run_progress).values(
                        run_id=run_id, state=state, version=1, shown_version=0, updated_at=now
                    )
                )
            self._show_progress(conn, run_id)

    def refresh_progress(self, run_id: str) -> None:
        """Have the run's progress message shown again (the run is waiting, or ended: the
        message says so), if it has one."""
        with self._tx() as conn:
            has = conn.execute(
                select(run_progress.c.run_id).where(run_progress.c.run_id == run_id)
            ).first()
            if has is not None:
                self._show_progress(conn, run_id)

    def progress_posted(self, run_id: str, channel: str, ts: str) -> None:
        """Remember where the progress message is (the first post wins)."""
        with self._tx() as conn:
            conn.execute(
                update(run_progress)
                .where(run_progress.c.run_id == run_id, run_progress.c.message_ts.is_(None))
                .values(channel=channel, message_ts=ts)
            )

    def progress_shown(self, run_id: str, version: int) -> None:
        """The message now shows ``version`` (or a later one, already): when, for the next
        edit's spacing."""
        with self._tx() as conn:
            conn.execute(
                update(run_progress)
                .where(run_progress.c.run_id == run_id)
                .values(
                    shown_at=self.clock(),
                    shown_version=case(
                        (run_progress.c.shown_version < version, version),
                        else_=run_progress.c.shown_version,
                    ),
                )
            )

    def defer_outbox(self, message_id: int, claim: str, until: datetime) -> None:
        """Let a row held by ``claim`` go until ``until``, not counted as a failure (a
        progress edit that would come too soon after the last)."""
        with self._tx() as conn:
            leases.OUTBOX.let_go(conn, message_id, claim, next_attempt_at=until)

    def _show_progress(self, conn: Connection, run_id: str) -> None:
        """Enqueue a ``RUN_PROGRESS`` row unless one waits unclaimed: the dispatcher reads
        the newest state when it delivers, so that one will show this write too. The waiting
        row is locked, so a dispatcher cannot claim it between this check and the commit
        and read the state from before."""
        now = self.clock()
        waiting = conn.execute(
            select(outbox.c.id)
            .where(
                outbox.c.run_id == run_id,
                outbox.c.kind == OutboxKind.RUN_PROGRESS,
                outbox.c.sent_at.is_(None),
                leases.OUTBOX.unheld(now),
            )
            .with_for_update()
        ).first()
        if waiting is not None:
            return
        shown_at = conn.execute(
            select(run_progress.c.shown_at).where(run_progress.c.run_id == run_id)
        ).scalar()
        due = now if shown_at is None else max(now, shown_at + EDIT_EVERY)
        conn.execute(
            insert(outbox).values(
                run_id=run_id,
                kind=OutboxKind.RUN_PROGRESS,
                payload={},
                created_at=now,
                next_attempt_at=due,
                attempts=0,
            )
        )
        notify(conn, OUTBOX)
