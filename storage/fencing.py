"""Fencing: every claim of a run gets a token of its own (its lease, ``storage.leases.RUNS``);
each write an execution makes compares it in the same transaction, so an execution that lost
its run can change nothing.

By token, not by worker: every claim gets a new one, so two executions of one run in the same
worker (one stalled past its lease, one claimed after) are told apart.
"""

from __future__ import annotations

from sqlalchemy import Connection

from storage import leases
from storage.errors import LeaseLost

# What a run that no worker holds has for a lease.
NO_LEASE: dict[str, None] = {"lease_owner": None, "lease_token": None, "lease_expires": None}


def fence(conn: Connection, run_id: str, token: str) -> None:
    """Lock the run's row for this transaction, if the claim ``token`` still holds it.

    Raises:
        LeaseLost: it does not (cancelled, finished, or claimed again).
    """
    if not leases.RUNS.holds(conn, run_id, token, lock=True):
        raise LeaseLost(run_id, token)
