"""What the outbox dispatcher and the webhook sender share: a loop that commits wake.

In this process a commit's code calls :meth:`Waking.wake` (from any thread); on PostgreSQL a
transaction anywhere that writes an outbox row notifies its topic (``storage.wakeups``), which
every webhook event's transaction does too; and the loop looks anyway every ``interval``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from storage import Store
from storage.wakeups import OUTBOX


class Waking:
    """A loop woken by what commits: :meth:`listening` around it, :meth:`doze` between turns."""

    def __init__(self) -> None:
        self._wake: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def wake(self) -> None:
        """Thread-safe: look now rather than at the next tick."""
        if self._loop is not None and self._wake is not None:
            self._loop.call_soon_threadsafe(self._wake.set)

    @contextlib.asynccontextmanager
    async def listening(self, store: Store) -> AsyncIterator[None]:
        """Be woken, on this loop, by :meth:`wake` and by the outbox's notifications."""
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        wakeups = store.wakeups({OUTBOX: self.wake})
        wakeups.start()
        try:
            yield
        finally:
            await asyncio.to_thread(wakeups.stop)

    async def doze(self, interval: float) -> None:
        """Wait until woken, or ``interval`` seconds."""
        assert self._wake is not None, "doze() is for inside listening()"
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout=interval)
        self._wake.clear()
