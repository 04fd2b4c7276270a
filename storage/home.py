"""The Store's part for the app's Home tab: who opened it, the refresh each one's Home waits
for, and what the view shows (a person's runs still going, their last decisions).

A Home view is published only to someone who opened it (``home_tabs`` has their row), and a
refresh is a per-person counter rather than a row per change: a change adds one to
``wanted``; a dispatcher claims the row (a compare-and-set, like an outbox row's), reads and
publishes, and sets ``published`` to the ``wanted`` it claimed. However many changes come
before the claim, one publish shows them all; one that comes during the publish leaves
``wanted`` ahead, and the row is due again at once. A change (not an opening) makes the row
due after a short debounce, so a burst is one publish.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timedelta

from sqlalchemy import case, select, update
from sqlalchemy.dialects import postgresql, sqlite

from storage import leases
from storage.base import StoreBase
from storage.records import Review, Run
from storage.rows import decisions_by_review, to_review, to_run
from storage.schema import decisions, home_tabs, reviews, runs
from storage.status import ReviewKind, ReviewStatus, RunStatus
from storage.wakeups import OUTBOX, notify

GOING = (RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.WAITING)


class HomeStore(StoreBase):
    """Who opened Home, the refreshes due, and the reads a Home view is made of."""

    def open_home(self, user_id: str) -> None:
        """``user_id`` opened the Home tab: remember them, and make their view due now."""
        now = self.clock()
        with self._tx() as conn:
            dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
            insert = dialect.insert(home_tabs).values(
                user_id=user_id,
                opened_at=now,
                wanted=1,
                published=0,
                due_at=now,
                attempts=0,
            )
            conn.execute(
                insert.on_conflict_do_update(
                    index_elements=[home_tabs.c.user_id],
                    set_={"opened_at": now, "wanted": home_tabs.c.wanted + 1, "due_at": now},
                )
            )
            notify(conn, OUTBOX)

    def want_home(self, user_ids: Collection[str], debounce: timedelta) -> int:
        """Something changed for ``user_ids``: those who opened Home get a refresh, due in
        ``debounce`` unless one is pending already (then it keeps its time). Returns how many."""
        if not user_ids:
            return 0
        now = self.clock()
        with self._tx() as conn:
            pending = home_tabs.c.wanted > home_tabs.c.published
            wanted = conn.execute(
                update(home_tabs)
                .where(home_tabs.c.user_id.in_(sorted(set(user_ids))))
                .values(
                    wanted=home_tabs.c.wanted + 1,
                    due_at=case((pending, home_tabs.c.due_at), else_=now + debounce),
                )
            ).rowcount
            if wanted:
                notify(conn, OUTBOX)
            return int(wanted)

    def home_users(self, since: datetime) -> list[str]:
        """Who opened Home at ``since`` or later."""
        with self.engine.connect() as conn:
            return list(
                conn.execute(
                    select(home_tabs.c.user_id)
                    .where(home_tabs.c.opened_at >= since)
                    .order_by(home_tabs.c.user_id)
                ).scalars()
            )

    def due_homes(self, limit: int = 50) -> list[str]:
        """Whose Home waits for a refresh that is due and that no dispatcher holds."""
        with self.engine.connect() as conn:
            return list(
                conn.execute(
                    select(home_tabs.c.user_id)
                    .where(*leases.HOME.free(self.clock()))
                    .order_by(home_tabs.c.due_at, home_tabs.c.user_id)
                    .limit(limit)
                ).scalars()
            )

    def claim_home(self, user_id: str, claim: str, hold: timedelta) -> tuple[int, int] | None:
        """Hold ``user_id``'s due refresh for one dispatcher for ``hold``, before it reads.

        Returns:
            The count of changes the publish will show (hand it to :meth:`home_published`)
            and the attempts failed so far, or None if the refresh is not due, or another
            dispatcher holds it.
        """
        now = self.clock()
        with self._tx() as conn:
            if not leases.HOME.claim(conn, user_id, claim, now, hold):
                return None
            row = conn.execute(
                select(home_tabs.c.wanted, home_tabs.c.attempts).where(
                    home_tabs.c.user_id == user_id
                )
            ).one()
            return int(row.wanted), int(row.attempts)

    def home_published(
        self, user_id: str, claim: str, shown: int, *, error: str | None = None
    ) -> bool:
        """Compare-and-set held by ``claim`` → done, showing the changes up to ``shown``
        (``error``: given up on, with why). False if ``claim`` no longer held it."""
        with self._tx() as conn:
            return leases.HOME.let_go(
                conn,
                user_id,
                claim,
                published=case((home_tabs.c.published < shown, shown), else_=home_tabs.c.published),
                published_at=self.clock(),
                attempts=0,
                last_error=None if error is None else error[: leases.ERROR_LENGTH],
            )

    def home_failed(self, user_id: str, claim: str, error: str, retry_in: timedelta) -> None:
        """Let the refresh go with its error, due again in ``retry_in``; a no-op if
        ``claim`` no longer holds it."""
        with self._tx() as conn:
            leases.HOME.release(conn, user_id, claim, error, self.clock() + retry_in)

    def runs_going(self, started_by: str, limit: int) -> list[Run]:
        """The runs ``started_by`` started that have not ended, newest first."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(runs)
                .where(runs.c.started_by == started_by, runs.c.status.in_(GOING))
                .order_by(runs.c.created_at.desc(), runs.c.id)
                .limit(limit)
            )
            return [to_run(row) for row in rows]

    def waiting_on(self, run_ids: Collection[str]) -> dict[str, list[ReviewKind]]:
        """The kinds of the pending reviews of the runs ``run_ids``, by run: what each waits
        for, in the words the run's own messages use."""
        found: dict[str, list[ReviewKind]] = {}
        if not run_ids:
            return found
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(reviews.c.run_id, reviews.c.kind).where(
                    reviews.c.run_id.in_(sorted(run_ids)),
                    reviews.c.status == ReviewStatus.PENDING,
                )
            )
            for row in rows:
                found.setdefault(row.run_id, []).append(ReviewKind(row.kind))
        return found

    def decided_by(self, person: str, limit: int) -> tuple[list[Review], dict[str, Run]]:
        """The reviews ``person`` decided last (newest first, with their decisions), and
        their runs."""
        with self.engine.connect() as conn:
            ids = list(
                conn.execute(
                    select(decisions.c.review_id)
                    .where(decisions.c.decided_by == person)
                    .order_by(decisions.c.created_at.desc(), decisions.c.id.desc())
                    .limit(limit)
                ).scalars()
            )
            found = decisions_by_review(conn, ids)
            rows = {
                row.id: row for row in conn.execute(select(reviews).where(reviews.c.id.in_(ids)))
            }
            decided = [to_review(rows[i], found.get(i)) for i in ids if i in rows]
            run_ids = sorted({r.run_id for r in decided})
            found_runs = {
                row.id: to_run(row)
                for row in conn.execute(select(runs).where(runs.c.id.in_(run_ids)))
            }
            return decided, found_runs
