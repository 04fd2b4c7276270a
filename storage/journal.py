"""The Store's journal: each run's recorded turns, appended under the claim's fence, and cut
where a replay found that the crew changed."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from sqlalchemy import Connection, delete, func, insert, select, update

from storage.base import StoreBase
from storage.fencing import fence
from storage.records import JSON, JournalEntry, Run, Snapshot
from storage.rows import load_review, load_run
from storage.schema import PERSON_LENGTH, journal, outbox, review_events, reviews, runs, snapshots
from storage.status import OutboxKind, ReviewEventKind, ReviewKind, ReviewStatus, RunNote
from storage.transitions import move_reviews

# The reviews a dropped part of the journal takes with it: those asked and those answered.
REPLAYABLE = (ReviewStatus.PENDING, ReviewStatus.DECIDED)


class JournalStore(StoreBase):
    """Read and append a run's journal; record a divergence; note a run once."""

    def load_journal(
        self, run_id: str, *, turns_from: int = 0, turn_kinds: Collection[str] = ()
    ) -> list[JournalEntry]:
        """The run's journal in order; entries of ``turn_kinds`` before ``turns_from`` left
        out (a resume from a snapshot needs none of them)."""
        query = select(journal).where(journal.c.run_id == run_id)
        if turns_from and turn_kinds:
            query = query.where(journal.c.kind.not_in(turn_kinds) | (journal.c.pos >= turns_from))
        with self.engine.connect() as conn:
            rows = conn.execute(query.order_by(journal.c.pos))
            return [
                JournalEntry(
                    pos=row.pos,
                    stream=row.stream,
                    kind=row.kind,
                    seq=row.seq,
                    payload=row.payload,
                    prompt_hash=row.prompt_hash,
                )
                for row in rows
            ]

    def append_journal(
        self,
        run_id: str,
        token: str,
        *,
        stream: str,
        kind: str,
        seq: int,
        payload: JSON,
        prompt_hash: str | None = None,
    ) -> int:
        """Append one turn, fenced by the claim: an execution that lost the run cannot write.

        Idempotent: asked again for a turn it holds (a retry after a commit whose answer
        the connection lost), it returns that turn's position and writes nothing.
        """
        with self._tx() as conn:
            fence(conn, run_id, token)
            return append_entry(
                conn, run_id, stream, kind, seq, payload, prompt_hash, now=self.clock()
            )

    def load_snapshot(self, run_id: str) -> Snapshot | None:
        """The snapshot the run's last suspension left, if it left one and no cut of the
        journal dropped it since."""
        with self.engine.connect() as conn:
            row = conn.execute(
                select(snapshots.c.pos, snapshots.c.payload).where(snapshots.c.run_id == run_id)
            ).first()
        return None if row is None else Snapshot(row.pos, row.payload)

    def record_divergence(self, run_id: str, token: str, from_pos: int, note: str) -> None:
        """Drop the journal from ``from_pos`` on and supersede the reviews opened after it.

        The run then continues live from that point; the note is kept on the run
        and announced in its thread. Decisions stay in the audit trail.
        """
        with self._tx() as conn:
            fence(conn, run_id, token)
            conn.execute(
                delete(journal).where(journal.c.run_id == run_id, journal.c.pos >= from_pos)
            )
            conn.execute(delete(snapshots).where(snapshots.c.run_id == run_id))
            move_reviews(
                conn,
                REPLAYABLE,
                ReviewStatus.SUPERSEDED,
                reviews.c.run_id == run_id,
                reviews.c.journal_pos > from_pos,
            )
            conn.execute(update(runs).where(runs.c.id == run_id).values(divergence=note))
            self._enqueue(conn, run_id, OutboxKind.RUN_DIVERGED, payload={"note": note})

    def note_run(self, run_id: str, token: str, note: RunNote) -> bool:
        """Announce ``note`` in the run's thread, at most once per run and note.

        Fenced by the claim like the journal: the run's row is locked while the outbox is
        checked, so two executions (a resume, a takeover) cannot both enqueue it.

        Returns:
            True if the note was enqueued now, False if it had been already.

        Raises:
            LeaseLost: the claim ``token`` no longer holds the run.
        """
        with self._tx() as conn:
            fence(conn, run_id, token)
            earlier = conn.execute(
                select(outbox.c.payload).where(
                    outbox.c.run_id == run_id, outbox.c.kind == OutboxKind.RUN_NOTE
                )
            ).scalars()
            if any(payload.get("note") == note for payload in earlier):
                return False
            self._enqueue(conn, run_id, OutboxKind.RUN_NOTE, payload={"note": note.value})
            return True

    def record_auto_decision(
        self, run_id: str, token: str, *, stream: str, kind: str, seq: int, payload: JSON, by: str
    ) -> tuple[int, bool]:
        """Journal that a gated call at ``(stream, seq)`` was decided without a person, with
        its audit record (``review_events``, under the call's digest), in one transaction
        fenced by the claim: ``kind`` :data:`RULE_ENTRY`, a rule decided it (``payload``:
        ``rule``, ``decide``, ``tool``, ``args``, ``digest``; its line in the thread too), or
        :data:`STANDING_ENTRY`, a standing approval approved it (``standing``, ``match``,
        ``tool``, ``args``, ``digest``). ``by`` is who the audit says decided
        (``rule:NAME``, or who granted the standing approval). A replay reads the journal and
        makes the same choice whatever the rules or the standing approvals say since.

        Returns:
            The entry's journal position, and True if recorded now (False: the journal held
            it already, and nothing was written).

        Raises:
            LeaseLost: the claim ``token`` no longer holds the run.
        """
        with self._tx() as conn:
            fence(conn, run_id, token)
            earlier = _entry_pos(conn, run_id, stream, kind, seq)
            if earlier is not None:
                return earlier, False
            pos = append_entry(conn, run_id, stream, kind, seq, payload, now=self.clock())
            ruled = kind == RULE_ENTRY
            _audit_event(
                conn,
                load_run(conn, run_id),
                str(payload["digest"])[:32],
                ReviewKind.TOOL_APPROVAL,
                ReviewEventKind.RULE if ruled else ReviewEventKind.STANDING_APPLIED,
                by=by[:PERSON_LENGTH],
                request_key=f"{kind}:{payload['digest']}",
                at=self.clock(),
                details=payload,
            )
            if ruled:
                self._enqueue(conn, run_id, OutboxKind.RULE_DECIDED, payload=payload)
            return pos, True

    def void_decision(self, run_id: str, token: str, review_id: str, details: JSON) -> bool:
        """The worker will not run the call ``review_id`` approved (what it is about to run
        has another digest, ``details`` say which): the review is superseded, so the call
        is asked again, and the refusal is recorded for the audit (``review_events``, kind
        ``digest_mismatch``), in one transaction fenced by the claim.

        Returns:
            False if the review was no longer decided (voided already: nothing written).

        Raises:
            LeaseLost: the claim ``token`` no longer holds the run.
        """
        with self._tx() as conn:
            fence(conn, run_id, token)
            review = load_review(conn, review_id, lock=True)
            moved = move_reviews(
                conn, ReviewStatus.DECIDED, ReviewStatus.SUPERSEDED, reviews.c.id == review_id
            )
            if moved != 1:
                return False
            _audit_event(
                conn,
                load_run(conn, run_id),
                review_id,
                review.kind,
                ReviewEventKind.DIGEST_MISMATCH,
                by="countersign",
                request_key=f"digest_mismatch:{review_id}",
                at=self.clock(),
                details=details,
            )
            return True


RULE_ENTRY = "rule"
"""The journal's kind of a rule's decision of a gated call."""
RAISE_ENTRY = "raised"
"""The journal's kind of a rule's raise of a gated call's review: which rule, and what the
review keeps (its reviewers or stages, its quorum, its deadline)."""
STANDING_ENTRY = "standing"
"""The journal's kind of a standing approval's approval of a gated call (and which one)."""


def _audit_event(
    conn: Connection,
    run: Run,
    review_id: str,
    review_kind: str,
    kind: ReviewEventKind,
    *,
    by: str,
    request_key: str,
    at: datetime,
    details: JSON,
) -> None:
    """The audit record (``review_events``) of something the runtime did to a call of
    ``run``: decided it by rule, or refused to run what a person had not approved."""
    conn.execute(
        insert(review_events).values(
            review_id=review_id,
            run_id=run.id,
            crew=run.crew,
            review_kind=review_kind,
            kind=kind,
            by=by,
            to=run.started_by or "",
            request_key=request_key,
            at=at,
            channel=run.channel,
            thread_ts=run.thread_ts,
            details=details,
        )
    )


def _entry_pos(conn: Connection, run_id: str, stream: str, kind: str, seq: int) -> int | None:
    pos = conn.execute(
        select(journal.c.pos).where(
            journal.c.run_id == run_id,
            journal.c.stream == stream,
            journal.c.kind == kind,
            journal.c.seq == seq,
        )
    ).scalar_one_or_none()
    return None if pos is None else int(pos)


def append_entry(
    conn: Connection,
    run_id: str,
    stream: str,
    kind: str,
    seq: int,
    payload: JSON,
    prompt_hash: str | None = None,
    *,
    now: datetime,
) -> int:
    """The position of the turn ``(stream, kind, seq)``, appended unless it is there."""
    earlier = _entry_pos(conn, run_id, stream, kind, seq)
    if earlier is not None:
        return earlier
    pos = next_pos(conn, run_id)
    conn.execute(
        insert(journal).values(
            run_id=run_id,
            pos=pos,
            stream=stream,
            kind=kind,
            seq=seq,
            payload=payload,
            prompt_hash=prompt_hash,
            created_at=now,
        )
    )
    return pos


def next_pos(conn: Connection, run_id: str) -> int:
    """The position of the run's next journal entry."""
    last = conn.execute(
        select(func.max(journal.c.pos)).where(journal.c.run_id == run_id)
    ).scalar_one()
    return 0 if last is None else int(last) + 1
