"""The Store's delegations while away: who reviews for whom, until when.

A delegation is active while it is not ended and its ``until`` is still ahead: the time is
compared in each query, so one that ran out ends by itself. Writers of this small table take
it in turn (``BEGIN IMMEDIATE`` on SQLite, a table lock on PostgreSQL), so the checks that a
new one is no circle and that a person has one at most hold whatever runs at the same time.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from sqlalchemy import Connection, insert, select, text, update

from storage.base import StoreBase
from storage.errors import DelegationRefused
from storage.records import Delegation
from storage.schema import delegations


class DelegationStore(StoreBase):
    def away(self, person: str, delegate: str, until: datetime, *, by: str) -> Delegation:
        """``person``'s reviews go to ``delegate`` until ``until``; a delegation ``person``
        had already ends (the new one replaces it).

        Raises:
            DelegationRefused: ``until`` is not ahead, ``delegate`` is ``person``, or
                ``delegate``'s own delegations lead back to ``person``.
        """
        if delegate == person:
            raise DelegationRefused(person, delegate, "one cannot delegate to oneself")
        with self._tx() as conn:
            now = self.clock()
            if until <= now:
                raise DelegationRefused(
                    person, delegate, f"{until:%Y-%m-%d %H:%M} UTC is already past"
                )
            _take_turn(conn)
            active = _active(conn, now)
            chain = [person, delegate]
            while chain[-1] in active and chain[-1] not in chain[:-1]:
                chain.append(active[chain[-1]])
                if chain[-1] == person:
                    circle = " → ".join(chain)
                    raise DelegationRefused(
                        person, delegate, f"that makes a circle ({circle}), where nobody reviews"
                    )
            conn.execute(
                update(delegations)
                .where(delegations.c.person == person, delegations.c.ended_at.is_(None))
                .values(ended_at=now, ended_by=by)
            )
            row = conn.execute(
                insert(delegations)
                .values(
                    person=person, delegate=delegate, until=until, created_by=by, created_at=now
                )
                .returning(*delegations.c)
            ).one()
        return Delegation(**row._mapping)

    def back(self, person: str, *, by: str) -> Delegation | None:
        """End ``person``'s active delegation now (a compare-and-set on its still being
        active); the delegation ended, or None when there was none."""
        with self._tx() as conn:
            now = self.clock()
            row = conn.execute(
                update(delegations)
                .where(
                    delegations.c.person == person,
                    delegations.c.ended_at.is_(None),
                    delegations.c.until > now,
                )
                .values(ended_at=now, ended_by=by)
                .returning(*delegations.c)
            ).one_or_none()
        return None if row is None else Delegation(**row._mapping)

    def active_delegations(self) -> list[Delegation]:
        """The delegations in force now, by person."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(delegations)
                .where(delegations.c.ended_at.is_(None), delegations.c.until > self.clock())
                .order_by(delegations.c.person)
            ).all()
        return [Delegation(**row._mapping) for row in rows]

    def delegates(self) -> dict[str, str]:
        """Who reviews for whom now: each away person's final delegate, following a chain
        (A → B while B → C gives A → C)."""
        with self.engine.connect() as conn:
            return resolve(_active(conn, self.clock()))


def resolve(direct: Mapping[str, str]) -> dict[str, str]:
    """Each person's delegate at the end of their chain of delegations."""
    final: dict[str, str] = {}
    for person, delegate in direct.items():
        seen = {person}
        while delegate in direct and delegate not in seen:
            seen.add(delegate)
            delegate = direct[delegate]
        final[person] = delegate
    return final


def _active(conn: Connection, now: datetime) -> dict[str, str]:
    rows = conn.execute(
        select(delegations.c.person, delegations.c.delegate).where(
            delegations.c.ended_at.is_(None), delegations.c.until > now
        )
    ).all()
    return {row.person: row.delegate for row in rows}


def _take_turn(conn: Connection) -> None:
    """Wait for any other writer of delegations to finish (SQLite's ``BEGIN IMMEDIATE``
    already has)."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("LOCK TABLE delegations IN SHARE ROW EXCLUSIVE MODE"))
