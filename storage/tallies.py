"""Counts kept as they change, so that reading them costs the same at a million runs as at ten.

The runs of each crew by status, and each crew's pending reviews, are sums of rows of the
``tallies`` table: every status change of a run writes a -1 for its old status and a +1 for
its new one in the transaction that moves it (``storage.transitions``), a new run a +1 for
``queued``, a review opened or leaving ``pending`` a +1 or -1 for ``pending_review``, and
pruning a run the -1s of what it took away (``storage.retention``). Rows are only ever
inserted, never updated, so no two transactions wait for each other on a counter row (a hot
row would serialise every claim and every finish of a crew on PostgreSQL).

:func:`fold` replaces the rows by their sums (one row per crew and status): a ``DELETE …
RETURNING`` removes the rows its statement sees and the sums of exactly those go back in,
so a change committed meanwhile is neither lost nor counted twice, on either database, and
a reading (:func:`counts`) is exact before, during and after a fold. Whoever reads the
counts folds when they have grown (``/metrics``, and each worker every minute), so what a
reading sums stays a few rows per crew plus the changes since the last fold.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping

from sqlalchemy import Connection, delete, func, insert, literal, select

from storage.schema import reviews, runs, tallies
from storage.status import ReviewStatus, RunStatus

PENDING_REVIEWS = "pending_review"
"""The ``what`` of a crew's pending reviews (every other ``what`` is a run status)."""

FOLD_AT = 2_000
"""Fold when the rows a reading sums exceed their groups by this many."""

Key = tuple[str, str]  # (crew, what)


def add(conn: Connection, changes: Iterable[tuple[str, str, int]]) -> None:
    """Record ``(crew, what, n)`` changes (zeros are left out)."""
    rows = [{"crew": crew, "what": what, "n": n} for crew, what, n in changes if n]
    if rows:
        conn.execute(insert(tallies), rows)


def run_moved(conn: Connection, crew: str, old: RunStatus, new: RunStatus) -> None:
    if old != new:
        add(conn, ((crew, str(old), -1), (crew, str(new), 1)))


def reviews_opened(conn: Connection, run_id: str, count: int) -> None:
    """``count`` pending reviews opened for run ``run_id`` (its crew read in the statement)."""
    if count:
        what, n = literal(PENDING_REVIEWS), literal(count)
        crew = select(runs.c.crew, what, n).where(runs.c.id == run_id)
        conn.execute(insert(tallies).from_select(["crew", "what", "n"], crew))


def reviews_closed(conn: Connection, run_ids: Iterable[str]) -> None:
    """Reviews left ``pending``, one per item of ``run_ids`` (their runs' ids)."""
    per_run = Counter(run_ids)
    if not per_run:
        return
    crews = conn.execute(select(runs.c.id, runs.c.crew).where(runs.c.id.in_(list(per_run))))
    add(conn, ((crew, PENDING_REVIEWS, -per_run[run_id]) for run_id, crew in crews))


def forget(conn: Connection, run_ids: Collection[str]) -> None:
    """The runs ``run_ids`` are about to be deleted with their reviews: count them out."""
    if not run_ids:
        return
    ids = list(run_ids)
    gone = conn.execute(
        select(runs.c.crew, runs.c.status, func.count())
        .where(runs.c.id.in_(ids))
        .group_by(runs.c.crew, runs.c.status)
    ).all()
    pending = conn.execute(
        select(runs.c.crew, func.count())
        .select_from(reviews.join(runs, reviews.c.run_id == runs.c.id))
        .where(reviews.c.run_id.in_(ids), reviews.c.status == ReviewStatus.PENDING)
        .group_by(runs.c.crew)
    ).all()
    add(conn, [(crew, status, -n) for crew, status, n in gone])
    add(conn, [(crew, PENDING_REVIEWS, -n) for crew, n in pending])


def counts(conn: Connection) -> tuple[dict[Key, int], int]:
    """Every count by (crew, what), zeros left out, and how many rows were summed."""
    rows = conn.execute(
        select(tallies.c.crew, tallies.c.what, func.sum(tallies.c.n), func.count()).group_by(
            tallies.c.crew, tallies.c.what
        )
    ).all()
    summed = sum(int(row[3]) for row in rows)
    return {(crew, what): int(n) for crew, what, n, _rows in rows if n}, summed


def needs_fold(found: Mapping[Key, int], summed: int) -> bool:
    return summed - len(found) > FOLD_AT


def fold(conn: Connection) -> int:
    """Replace the rows this statement sees by their sums (in the caller's write
    transaction); how many rows were folded."""
    gone = conn.execute(delete(tallies).returning(tallies.c.crew, tallies.c.what, tallies.c.n))
    sums: Counter[Key] = Counter()
    rows = 0
    for crew, what, n in gone:
        sums[(crew, what)] += n
        rows += 1
    add(conn, ((crew, what, n) for (crew, what), n in sorted(sums.items())))
    return rows
