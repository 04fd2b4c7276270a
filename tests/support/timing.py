"""Time moved by hand, and acts started together on threads of their own."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime, timedelta


class FakeClock:
    """Time that tests move by hand instead of sleeping."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, 12, 0, 0)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **kwargs: float) -> None:
        self.now += timedelta(**kwargs)


def at_once(act: Callable[[int], None], count: int) -> None:
    """``act(0)`` … ``act(count - 1)`` on threads of their own, let go together (a barrier), to
    the end of each."""
    barrier = threading.Barrier(count)

    def go(n: int) -> None:
        barrier.wait()
        act(n)

    threads = [threading.Thread(target=go, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
