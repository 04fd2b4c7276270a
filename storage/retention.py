"""Retention: how long finished runs, their journals and the audit trail are kept.

Only finished runs (succeeded, failed, rejected, cancelled: statuses no transition leaves) are
ever pruned, aged by their last change; every delete says so in its own ``WHERE``, so a run
that is queued, running or waiting loses no row. A run is deleted whole only once every
message announcing it was delivered. Deletes go in batches of a few hundred runs,
each batch one transaction: pruning a million rows holds no lock for long and never builds a
giant transaction. Before a batch deletes a run's decisions or journal, it copies their
audit records (``storage.audit.copy_audit``) in the same transaction. Claims, reassignments,
standing approvals granted or revoked and Slack steps given up on (``review_events``) need no
copy: they are kept apart from their runs already, and go with the audit records when
``keep_audit`` ends.
Delegations while away are audit records of no crew: the deployment's ``keep_audit`` prunes
them once that long has passed since they ended (early, or at their ``until``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Table,
    delete,
    func,
    literal,
    select,
    true,
    tuple_,
)

from storage.audit import copy_audit
from storage.base import StoreBase
from storage.schema import (
    audit,
    decisions,
    delegations,
    journal,
    outbox,
    review_events,
    reviews,
    runs,
    webhook_events,
)
from storage.status import FINAL_RUN_STATUSES
from storage.tallies import forget

BATCH = 500
"""Runs (or audit records) deleted per transaction."""
NO_CREW = "(no crew)"
"""Where a prune counts the rows of no crew's: delegations while away."""


@dataclass(frozen=True)
class Retention:
    """How long to keep each kind of row; None keeps it for ever."""

    keep_journal: timedelta | None = None
    keep_runs: timedelta | None = None
    keep_audit: timedelta | None = None


@dataclass(frozen=True)
class RetentionPolicy:
    """The deployment's retention, and the crews that have their own."""

    default: Retention = Retention()
    crews: Mapping[str, Retention] = field(default_factory=dict)

    def scopes(self) -> Iterator[tuple[Retention, Callable[[Any], ColumnElement[bool]]]]:
        """Each crew with its own retention, then the rest: (retention, the condition on a
        table's crew column that keeps that scope's rows)."""
        for crew, retention in self.crews.items():
            yield retention, partial(_is_crew, crew)
        yield self.default, partial(_not_crews, list(self.crews))


Pruned = dict[str, Counter[str]]
"""Rows deleted (or that would be): crew -> table -> count."""


class RetentionStore(StoreBase):
    """Prune what retention no longer keeps."""

    def prune(
        self, policy: RetentionPolicy, *, dry_run: bool = False, batch: int = BATCH
    ) -> Pruned:
        """Delete the finished runs, journals and audit records older than ``policy`` keeps.

        ``dry_run`` does every batch and rolls it back: what it reports is what a real
        prune would have deleted then, and nothing changes. A batch that fails (the
        database went away) is rolled back whole; the batches before it stay done.
        """
        now = self.clock()
        pruned: Pruned = {}
        for retention, in_scope in policy.scopes():
            crew_is = in_scope(runs.c.crew)
            audit_since = now - retention.keep_audit if retention.keep_audit else None
            # The runs deleted whole: a dry run still finds them, and must not count their
            # journal a second time.
            gone: set[str] = set()
            if retention.keep_runs is not None:
                for ids in self._old_runs(crew_is, now - retention.keep_runs, batch):
                    gone.update(self._batch(pruned, dry_run, ids, audit_since, whole=True))
            if retention.keep_journal is not None:
                cutoff = now - retention.keep_journal
                with_journal = select(journal.c.run_id).where(journal.c.run_id == runs.c.id)
                for ids in self._old_runs(crew_is & with_journal.exists(), cutoff, batch):
                    left = {run_id: crew for run_id, crew in ids.items() if run_id not in gone}
                    if left:
                        self._batch(pruned, dry_run, left, audit_since, whole=False)
            if audit_since is not None:
                for table, at, key in (
                    (audit, audit.c.decided_at, audit.c.review_id),
                    (review_events, review_events.c.at, review_events.c.id),
                ):
                    where = in_scope(table.c.crew) & (at < audit_since)
                    self._prune_audit(pruned, dry_run, (table, at, key), where, batch)
        if policy.default.keep_audit is not None:  # delegations belong to no crew
            over = func.coalesce(delegations.c.ended_at, delegations.c.until)
            aged = over < now - policy.default.keep_audit
            self._prune_audit(pruned, dry_run, (delegations, over, delegations.c.id), aged, batch)
        return pruned

    def _old_runs(
        self, where: ColumnElement[bool], before: datetime, batch: int
    ) -> Iterator[dict[str, str]]:
        """Finished runs last changed before ``before``, ``batch`` at a time: id -> crew."""
        after: tuple[datetime, str] | None = None
        while True:
            query = (
                select(runs.c.id, runs.c.crew, runs.c.updated_at)
                .where(_finished(), runs.c.updated_at < before, where)
                .order_by(runs.c.updated_at, runs.c.id)
                .limit(batch)
            )
            if after is not None:
                query = query.where(tuple_(runs.c.updated_at, runs.c.id) > tuple_(*after))
            with self.engine.connect() as conn:
                rows = conn.execute(query).all()
            if not rows:
                return
            after = (rows[-1].updated_at, rows[-1].id)
            yield {row.id: row.crew for row in rows}

    def _batch(
        self,
        pruned: Pruned,
        dry_run: bool,
        crews: dict[str, str],
        audit_since: datetime | None,
        *,
        whole: bool,
    ) -> list[str]:
        """Copy the audit records of the runs ``crews`` and delete their journal (and, if
        ``whole``, the runs with every row of theirs), in one transaction; the runs it
        deleted from (or would have)."""
        with self._tx() as conn:
            ids = _prunable(conn, list(crews), whole=whole)
            copy_audit(conn, ids, since=audit_since)
            if whole:
                forget(conn, ids)
            tables = (
                (journal, outbox, webhook_events, decisions, reviews, runs) if whole else (journal,)
            )
            for table in tables:
                where = (
                    table.c.id.in_(ids) & _finished() if table is runs else table.c.run_id.in_(ids)
                )
                for crew, count in _deleted(conn, table, where, crews).items():
                    pruned.setdefault(crew, Counter())[table.name] += count
            _end(conn, dry_run)
        return ids

    def _prune_audit(
        self,
        pruned: Pruned,
        dry_run: bool,
        columns: tuple[Table, Any, Any],
        where: ColumnElement[bool],
        batch: int,
    ) -> None:
        """Delete the kept audit rows (``columns``: the table, its time and its key) that
        ``where`` says, ``batch`` at a time."""
        table, at, key = columns
        crew = table.c.crew if "crew" in table.c else literal(NO_CREW)
        after: tuple[datetime, Any] | None = None
        while True:
            query = (
                select(key.label("key"), crew.label("crew"), at.label("at"))
                .where(where)
                .order_by(at, key)
                .limit(batch)
            )
            if after is not None:
                query = query.where(tuple_(at, key) > tuple_(*after))
            with self._tx() as conn:
                rows = conn.execute(query).all()
                conn.execute(delete(table).where(key.in_([row.key for row in rows])))
                _end(conn, dry_run)
            if not rows:
                return
            after = (rows[-1].at, rows[-1].key)
            for row in rows:
                pruned.setdefault(row.crew, Counter())[table.name] += 1


def _is_crew(crew: str, column: Any) -> ColumnElement[bool]:
    return column == crew  # type: ignore[no-any-return]


def _not_crews(crews: list[str], column: Any) -> ColumnElement[bool]:
    return column.not_in(crews) if crews else true()


def _end(conn: Connection, dry_run: bool) -> None:
    """A dry run's batch is rolled back once counted; a real one commits as it closes."""
    transaction = conn.get_transaction()
    if dry_run and transaction is not None:
        transaction.rollback()


def _finished() -> ColumnElement[bool]:
    return runs.c.status.in_(sorted(FINAL_RUN_STATUSES))


def _prunable(conn: Connection, ids: list[str], *, whole: bool) -> list[str]:
    """The runs of ``ids`` that are finished, their rows locked for the transaction; to be
    deleted ``whole``, also with every message announcing them delivered and every webhook
    event done (a run whose end Slack or a webhook has not been told yet waits for the
    dispatcher or the webhook sender)."""
    query = select(runs.c.id).where(runs.c.id.in_(ids), _finished())
    if whole:
        unsent = select(outbox.c.id).where(outbox.c.run_id == runs.c.id, outbox.c.sent_at.is_(None))
        untold = select(webhook_events.c.id).where(
            webhook_events.c.run_id == runs.c.id, webhook_events.c.done_at.is_(None)
        )
        query = query.where(~unsent.exists(), ~untold.exists())
    return list(conn.execute(query.with_for_update()).scalars())


def _deleted(
    conn: Connection, table: Any, where: ColumnElement[bool], crews: dict[str, str]
) -> Counter[str]:
    """Delete ``table``'s rows ``where`` says; how many per crew (``crews``: run -> crew)."""
    column = table.c.id if table is runs else table.c.run_id
    gone = conn.execute(delete(table).where(where).returning(column)).scalars()
    return Counter(crews[run_id] for run_id in gone)
