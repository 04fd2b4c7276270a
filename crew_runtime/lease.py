"""One execution's hold on its run: the claim's fencing token and lease.

Before each live LLM or tool call the execution renews its lease, or stops if it lost it
(another execution claimed the run, or it was cancelled or finished); a write the database
does not answer is retried until the lease would end. Whatever ends an execution from inside
CrewAI is raised as :class:`RunAborted`, which CrewAI lets through.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import NoReturn, TypeVar

from crew_runtime.signals import RunAborted
from storage import LeaseLost, Run, Store, UnstorableValue

log = logging.getLogger(__name__)

T = TypeVar("T")

# How often an execution retries a lease check the database did not answer.
RECHECK_EVERY = 0.25


def unstorable_reason(what: str, refused: UnstorableValue) -> str:
    """Why a run fails when the database refused what it wrote (it would every time)."""
    return f"{what} could not be stored: the database refused its text ({refused})"


class LeaseHolder:
    """The lease of one claim of a run, held by its execution (a :class:`RunContext`).

    ``run`` is the run as :meth:`Store.claim_run` returned it: its ``lease_token``
    fences every write of this execution, and ``lease`` is how long each renewal holds.
    """

    def __init__(self, run: Run, store: Store, lease: timedelta) -> None:
        if run.lease_token is None:
            raise ValueError(f"run {run.id} was not claimed: it has no lease token")
        self.run = run
        self.store = store
        self.lease_token = run.lease_token
        self.lease = lease
        # Set when the database refused something this execution wrote: the run fails.
        self.refused: str | None = None
        self._aborted = threading.Event()
        self._renewing = threading.Lock()
        self._renewed_at = time.monotonic()

    def _until_stored(self, what: str, write: Callable[[], T]) -> T:
        """``write``, retried while the database does not answer, until the lease would end.

        Called from inside CrewAI (an LLM wrapper, a tool hook), which swallows or retries
        what is raised there: a tool's after-hook logs the error and goes on with the result
        the journal does not have, which a later replay calls again and finds different. So
        a write is retried (the journal's are idempotent by turn), and whatever ends the
        attempt stops the execution with :class:`RunAborted`, which CrewAI lets through.

        Raises:
            RunAborted: the lease is lost, the database refused the value (``refused`` says
                why; the run fails), or it did not answer before the lease would end.
        """
        failing = False
        while True:
            self.check_alive()
            try:
                return write()
            except LeaseLost:
                self._lost()
            except UnstorableValue as exc:
                self.refused = unstorable_reason(what, exc)
                self.abort()
                raise RunAborted(f"run {self.run.id}: {self.refused}") from None
            except Exception as exc:  # the database's failure, whatever the driver calls it
                failure = type(exc).__name__  # the message would quote the parameters
                if self._ran_out():
                    log.warning("run %s: %s not written (%s); stopping", self.run.id, what, failure)
                    self._lost()
                if not failing:
                    log.warning(
                        "run %s: %s not written (%s); retrying until the lease ends",
                        self.run.id,
                        what,
                        failure,
                    )
                    failing = True
                self._aborted.wait(RECHECK_EVERY)

    def renew(self) -> bool:
        """Extend the lease if this execution's claim still holds the run (the heartbeat).

        Returns:
            False if the run was cancelled, finished or claimed again since.
        """
        asked_at = time.monotonic()
        held = self.store.extend_lease(self.run.id, self.lease_token, self.lease)
        if held:
            self.renewed(asked_at)
        return held

    def renewed(self, asked_at: float) -> None:
        """The lease was renewed by a statement sent at ``asked_at`` (``time.monotonic``):
        by :meth:`renew`, or by the worker's heartbeat for all its runs at once."""
        with self._renewing:
            self._renewed_at = max(self._renewed_at, asked_at)

    def _ran_out(self) -> bool:
        """Whether the lease, as last renewed, has run out."""
        with self._renewing:
            deadline = self._renewed_at + self.lease.total_seconds()
        return time.monotonic() >= deadline

    def hold_lease(self, *, renewed_within: float = 0.0) -> None:
        """Before a live LLM or tool call: renew the lease, or stop if it is lost.

        ``renewed_within``: seconds; if the lease was renewed (asked, and confirmed) more
        recently than that, by this call or the heartbeat, it is held without asking the
        database again. The lease was then extended by its whole length less than that ago,
        so no other execution can have claimed the run; a cancellation is not seen until the
        next renewal or fenced write. An LLM call passes a third of the lease (its answer
        is journaled by a fenced write before anything acts on it); a tool call, which acts,
        passes nothing and always asks.

        The heartbeat alone is not enough: a process stalled past its lease (stopped,
        swapped out, cut off from the database) wakes up inside a call and would go on to
        the next side effect before its heartbeat noticed that another execution took the
        run. A database that does not answer is asked again until the lease, as last
        renewed, would have run out; then nobody can tell whether another execution took
        over, so this one stops.

        Raises:
            RunAborted: the lease is lost, or could not be confirmed in time.
        """
        if renewed_within > 0:
            self.check_alive()
            with self._renewing:
                if time.monotonic() - self._renewed_at < renewed_within:
                    return
        while True:
            self.check_alive()
            try:
                held = self.renew()
            except Exception as exc:  # the database's failure, whatever the driver calls it
                # The class only: SQLAlchemy's message quotes the statement's parameters.
                failure = type(exc).__name__
                if self._ran_out():
                    log.warning(
                        "run %s: cannot confirm the lease (%s); stopping", self.run.id, failure
                    )
                    self._lost()
                log.info("run %s: cannot confirm the lease (%s); retrying", self.run.id, failure)
                self._aborted.wait(RECHECK_EVERY)
                continue
            if not held:
                self._lost()
            return

    def abort(self) -> None:
        """Called by the worker when the lease is lost: stop at the next call."""
        self._aborted.set()

    @property
    def aborted(self) -> bool:
        return self._aborted.is_set()

    def _lost(self) -> NoReturn:
        """Another worker owns the run now (or it was cancelled): stop at once.

        Raised as a ``RunAborted`` (a ``HookAborted``) because CrewAI swallows or
        retries other exceptions from LLM calls and hooks.
        """
        self.abort()
        raise RunAborted(f"run {self.run.id}: lease lost")

    def check_alive(self) -> None:
        if self._aborted.is_set():
            raise RunAborted(f"run {self.run.id}: lease lost")
