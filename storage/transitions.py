"""The only way a run's or a review's status changes: one compare-and-set, checked against
the tables of ``storage.status``.

:func:`move_run` and :func:`move_reviews` refuse, before touching the database, a transition the
tables do not list (that is a bug in the caller, not a race: :class:`IllegalTransition`), then
update only rows still in one of the expected statuses. What they return says whether the row
moved; the caller decides whether not moving is an error (``LeaseLost``, ``AlreadyDecided``...).
No other code writes a status: ``tests/storage/test_transitions.py`` checks it, and that every
entry of the tables is a transition the store makes. Being the only writer, they also keep the
counts of runs by status and of pending reviews (``storage.tallies``) in the same transaction.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from enum import StrEnum
from typing import Any, TypeVar

from sqlalchemy import ColumnElement, Connection, Row, Table, update

from storage.errors import IllegalTransition
from storage.schema import reviews, runs
from storage.status import REVIEW_TRANSITIONS, RUN_TRANSITIONS, ReviewStatus, RunStatus
from storage.tallies import reviews_closed, run_moved
from storage.wakeups import RUNS, notify

S = TypeVar("S", bound=StrEnum)


def move_run(
    conn: Connection,
    run_id: str,
    old: RunStatus | Collection[RunStatus],
    new: RunStatus,
    *where: ColumnElement[bool],
    **values: Any,
) -> bool:
    """Move run ``run_id`` from ``old`` (one status or several) to ``new``, if it still is
    in ``old`` and matches ``where``; ``values`` are the other columns to set with it.

    A run moved to ``queued`` wakes the workers listening when the transaction commits."""
    return moved_run(conn, run_id, old, new, *where, **values) is not None


def moved_run(
    conn: Connection,
    run_id: str,
    old: RunStatus | Collection[RunStatus],
    new: RunStatus,
    *where: ColumnElement[bool],
    **values: Any,
) -> Row[Any] | None:
    """:func:`move_run`, answering with the run's row as moved (every column, read by the
    same statement: a round trip less than reading it after), or None where it did not move."""
    olds = _olds(RUN_TRANSITIONS, old, new, runs)
    # One status at a time, so that the count it leaves is known (a run is in one of them).
    for status in olds:
        moved = _move(conn, runs, status, new, (runs.c.id == run_id, *where), values, *runs.c)
        if moved:
            run_moved(conn, moved[0].crew, status, new)
            if new == RunStatus.QUEUED:
                notify(conn, RUNS)
            return moved[0]
    return None


def move_reviews(
    conn: Connection,
    old: ReviewStatus | Collection[ReviewStatus],
    new: ReviewStatus,
    *where: ColumnElement[bool],
    **values: Any,
) -> int:
    """Move every review still in ``old`` and matching ``where`` to ``new``; how many moved."""
    olds = _olds(REVIEW_TRANSITIONS, old, new, reviews)
    moved = 0
    if ReviewStatus.PENDING in olds and new != ReviewStatus.PENDING:
        # Leaving pending: the crews' counts of pending reviews go down (by their runs).
        olds.remove(ReviewStatus.PENDING)
        left = _move(conn, reviews, ReviewStatus.PENDING, new, where, values, reviews.c.run_id)
        reviews_closed(conn, [row.run_id for row in left])
        moved += len(left)
    if olds:
        status = reviews.c.status
        in_old = status == olds[0] if len(olds) == 1 else status.in_(olds)
        moved += conn.execute(
            update(reviews).where(in_old, *where).values(status=new, **values)
        ).rowcount
    return moved


def _olds(
    transitions: Mapping[S, Collection[S]], old: S | Collection[S], new: S, table: Table
) -> list[S]:
    """``old`` as a sorted list, every one of them allowed to move to ``new``."""
    olds = [old] if isinstance(old, StrEnum) else sorted(old)
    illegal = [o for o in olds if new not in transitions[o]]
    if not olds or illegal:
        raise IllegalTransition(table.name, [str(o) for o in illegal], str(new))
    return olds


def _move(
    conn: Connection,
    table: Table,
    old: StrEnum,
    new: StrEnum,
    where: tuple[ColumnElement[bool], ...],
    values: dict[str, Any],
    *returning: ColumnElement[Any],
) -> list[Row[Any]]:
    """Move the rows in ``old`` matching ``where``; ``returning`` of each row moved."""
    moved = conn.execute(
        update(table)
        .where(table.c.status == old, *where)
        .values(status=new, **values)
        .returning(*returning)
    )
    return list(moved)
