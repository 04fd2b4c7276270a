"""Leases and fencing: the compare-and-set conditions that a claim still holds a run.

Every claim of a run gets a token of its own; each write an execution makes compares it in
the same transaction, so an execution that lost its run can change nothing.
"""

from __future__ import annotations

from sqlalchemy import ColumnElement, Connection, select

from storage.errors import LeaseLost
from storage.schema import runs
from storage.status import RunStatus

# What a run that no worker holds has for a lease.
NO_LEASE: dict[str, None] = {"lease_owner": None, "lease_token": None, "lease_expires": None}


def fence(conn: Connection, run_id: str, token: str) -> None:
    """Lock the run's row for this transaction, if the claim ``token`` still holds it.

    Raises:
        LeaseLost: it does not (cancelled, finished, or claimed again).
    """
    held_row = conn.execute(select(runs.c.id).where(*held(run_id, token)).with_for_update()).first()
    if held_row is None:
        raise LeaseLost(run_id, token)


def held(run_id: str, token: str) -> tuple[ColumnElement[bool], ...]:
    """The compare-and-set condition that the claim ``token`` still holds a run."""
    return runs.c.id == run_id, runs.c.status == RunStatus.RUNNING, claimed_by(token)


def claimed_by(token: str) -> ColumnElement[bool]:
    """With the run ``running``: it is still under the claim ``token``.

    By token, not by worker: every claim gets a new one, so two executions of one run in
    the same worker (one stalled past its lease, one claimed after) are told apart.
    """
    return runs.c.lease_token == token
