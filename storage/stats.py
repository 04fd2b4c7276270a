"""What a metrics scrape reads from the database: a few aggregate queries, nothing else.

Each is one ``GROUP BY`` (or one ``count``/``min``) on a status column, read in one
connection: the runs by crew and status, the pending reviews by crew and age, and the
inbox's and outbox's backlog with their oldest row. ``crew_runtime.metrics`` turns them
into gauges at scrape time, so nothing is kept in memory between scrapes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import case, func, literal_column, select

from storage.base import StoreBase
from storage.schema import inbox, outbox, reviews, runs
from storage.status import ReviewStatus

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
    """Read the :class:`Stats`: four queries in one connection, no lock taken."""
    now = store.clock()
    bucket = case(
        *[(reviews.c.created_at > now - younger, label) for label, younger in AGE_BUCKETS],
        else_=OLDEST_BUCKET,
    ).label("age_bucket")
    # Grouped by the output column's name: PostgreSQL cannot tell that a CASE repeated in
    # the GROUP BY, with parameters of its own, is the same expression.
    with store.engine.connect() as conn:
        by_status = conn.execute(
            select(runs.c.crew, runs.c.status, func.count()).group_by(runs.c.crew, runs.c.status)
        ).all()
        pending = conn.execute(
            select(runs.c.crew, bucket, func.count(), func.min(reviews.c.created_at))
            .select_from(reviews.join(runs, reviews.c.run_id == runs.c.id))
            .where(reviews.c.status == ReviewStatus.PENDING)
            .group_by(runs.c.crew, literal_column("age_bucket"))
        ).all()
        inbox_row = conn.execute(
            select(func.count(), func.min(inbox.c.received_at)).where(inbox.c.done_at.is_(None))
        ).one()
        outbox_row = conn.execute(
            select(func.count(), func.min(outbox.c.created_at)).where(outbox.c.sent_at.is_(None))
        ).one()
    oldest: dict[str, datetime] = {}
    for crew, _bucket, _count, first in pending:
        oldest[crew] = min(first, oldest.get(crew, first))
    return Stats(
        now=now,
        runs={(crew, status): count for crew, status, count in by_status},
        pending_reviews={(crew, label): count for crew, label, count, _first in pending},
        oldest_pending=oldest,
        inbox=Backlog(inbox_row[0], inbox_row[1]),
        outbox=Backlog(outbox_row[0], outbox_row[1]),
    )


def ping(store: StoreBase) -> None:
    """A trivial query: returns if the database answers, raises whatever the driver raises."""
    with store.engine.connect() as conn:
        conn.execute(select(1)).one()
