"""What a metrics scrape reads from the database: a few small queries, none of them growing with
the runs kept.

The runs by crew and status and the pending reviews by crew are counts kept as they change
(``storage.tallies``: a few rows a crew); the pending reviews by age are those counts split by
the reviews opened in the last week (an index range of ``ix_reviews_pending``: over a week old
is the rest), and each crew's oldest is found walking the same index from its start; the
inbox's and outbox's backlogs are index scans of their rows not yet done. All of it is read in
one connection; ``crew_runtime.metrics`` turns it into gauges at scrape time, so nothing is
kept in memory between scrapes. A reading that found the counts' rows grown folds them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Connection, case, func, literal_column, select

from storage.base import StoreBase
from storage.engine import write_transaction
from storage.schema import inbox, outbox, reviews, runs
from storage.status import ReviewStatus, RunStatus
from storage.tallies import PENDING_REVIEWS, counts, fold, needs_fold

# How old a pending review is, by the bucket it falls in: (label, younger than).
AGE_BUCKETS: tuple[tuple[str, timedelta], ...] = (
    ("under_1h", timedelta(hours=1)),
    ("1h_to_1d", timedelta(days=1)),
    ("1d_to_7d", timedelta(days=7)),
)
OLDEST_BUCKET = "over_7d"


@dataclass(frozen=True)
class Backlog:
    """Rows of a queue not yet done, and when the oldest of them came in (None: empty)."""

    count: int
    oldest: datetime | None


@dataclass(frozen=True)
class Stats:
    """The database's state at ``now`` (naive UTC, the store's clock).

    Attributes:
        runs: The number of runs by (crew, status).
        pending_reviews: The number of pending reviews by (crew, age bucket).
        oldest_pending: When each crew's oldest pending review was opened.
        inbox: Slack requests recorded and not yet handled.
        outbox: Messages committed and not yet delivered.
    """

    now: datetime
    runs: dict[tuple[str, str], int]
    pending_reviews: dict[tuple[str, str], int]
    oldest_pending: dict[str, datetime]
    inbox: Backlog
    outbox: Backlog


def read_stats(store: StoreBase) -> Stats:
    """Read the :class:`Stats` in one connection, no lock taken (then fold the counts if
    they have grown)."""
    now = store.clock()
    young = now - AGE_BUCKETS[-1][1]
    bucket = case(
        *[(reviews.c.created_at > now - younger, label) for label, younger in AGE_BUCKETS[:-1]],
        else_=AGE_BUCKETS[-1][0],
    ).label("age_bucket")
    pending_review = (reviews.c.status == ReviewStatus.PENDING,)
    with store.engine.connect() as conn:
        if conn.dialect.name == "postgresql":
            # A parallel plan reads every pending review's row to find the last week's (it
            # costs them as if cached): 250 ms where the index alone answers in 4.
            conn.exec_driver_sql("SET LOCAL max_parallel_workers_per_gather = 0")
        counted, summed = counts(conn)
        # Grouped by the output column's name: PostgreSQL cannot tell that a CASE repeated
        # in the GROUP BY, with parameters of its own, is the same expression.
        recent = conn.execute(
            select(runs.c.crew, bucket, func.count(), func.min(reviews.c.created_at))
            .select_from(reviews.join(runs, reviews.c.run_id == runs.c.id))
            .where(*pending_review, reviews.c.created_at > young)
            .group_by(runs.c.crew, literal_column("age_bucket"))
        ).all()
        pending = {(crew, label): count for crew, label, count, _first in recent}
        oldest: dict[str, datetime] = {}
        for crew, _bucket, _count, first in recent:
            oldest[crew] = min(first, oldest.get(crew, first))
        older = {}
        for (crew, what), count in counted.items():
            if what == PENDING_REVIEWS:
                recent_count = sum(pending.get((crew, label), 0) for label, _ in AGE_BUCKETS)
                if count > recent_count:
                    older[crew] = count - recent_count
        for crew, count in older.items():
            pending[(crew, OLDEST_BUCKET)] = count
        oldest.update(_oldest_pending(conn, set(older)))
        inbox_row = conn.execute(
            select(func.count(), func.min(inbox.c.received_at)).where(inbox.c.done_at.is_(None))
        ).one()
        outbox_row = conn.execute(
            select(func.count(), func.min(outbox.c.created_at)).where(outbox.c.sent_at.is_(None))
        ).one()
    if needs_fold(counted, summed):
        with write_transaction(store.engine) as conn:
            fold(conn)
    statuses = {str(status) for status in RunStatus}
    return Stats(
        now=now,
        runs={key: count for key, count in counted.items() if key[1] in statuses},
        pending_reviews=pending,
        oldest_pending=oldest,
        inbox=Backlog(inbox_row[0], inbox_row[1]),
        outbox=Backlog(outbox_row[0], outbox_row[1]),
    )


def _oldest_pending(conn: Connection, crews: set[str], page: int = 200) -> dict[str, datetime]:
    """When the oldest pending review of each of ``crews`` was opened: the pending reviews
    walked oldest first (``ix_reviews_pending``), a page at a time, until each crew's came."""
    found: dict[str, datetime] = {}
    after: tuple[datetime, str] | None = None
    while len(found) < len(crews):
        query = (
            select(reviews.c.created_at, reviews.c.id, runs.c.crew)
            .select_from(reviews.join(runs, reviews.c.run_id == runs.c.id))
            .where(reviews.c.status == ReviewStatus.PENDING)
            .order_by(reviews.c.created_at, reviews.c.id)
            .limit(page)
        )
        if after is not None:
            query = query.where(
                (reviews.c.created_at > after[0])
                | ((reviews.c.created_at == after[0]) & (reviews.c.id > after[1]))
            )
        rows = conn.execute(query).all()
        for created_at, _id, crew in rows:
            if crew in crews:
                found.setdefault(crew, created_at)
        if len(rows) < page:
            break
        after = (rows[-1][0], rows[-1][1])
    return found


def ping(store: StoreBase) -> None:
    """A trivial query: returns if the database answers, raises whatever the driver raises."""
    with store.engine.connect() as conn:
        conn.execute(select(1)).one()
