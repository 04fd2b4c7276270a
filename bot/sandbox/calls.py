"""What the bot asked of the Web API, and the failures a test wants it to meet.

Why: end-to-end tests assert on the bot's behaviour at the boundary ("it posted once,
retried after the 429, never called views.open twice"), so every call is recorded with
its outcome. Faults are planned per method and consumed in order, so a test states exactly
which call fails and how (Slack's 429 with ``Retry-After``, a 500/503, or an application
error such as ``fatal_error`` with HTTP 200).
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass
from typing import Any

__all__ = ["Call", "CallLog", "Fault", "FaultPlan"]


@dataclass(frozen=True)
class Call:
    """One Web API request as the stand-in received and answered it.

    ``params`` has the token removed; ``error`` is Slack's error code, ``ratelimited`` for
    an injected 429, or ``http_<status>`` for an injected server error.
    """

    method: str
    params: dict[str, Any]
    at: float
    ok: bool
    error: str | None
    status: int


@dataclass(frozen=True)
class Fault:
    """A planned failure: HTTP ``status`` and, for HTTP 200, the ``ok: false`` error code."""

    status: int
    retry_after: int
    error: str | None


class FaultPlan:
    """Failures to inject, per Web API method, consumed first in first out."""

    def __init__(self) -> None:
        self._planned: dict[str, deque[Fault]] = defaultdict(deque)

    def fail_next(
        self,
        method: str,
        *,
        status: int = 429,
        retry_after: int = 1,
        times: int = 1,
        error: str | None = None,
    ) -> None:
        """Make the next ``times`` calls of ``method`` fail.

        Args:
            method: e.g. ``"chat.postMessage"``; ``"*"`` for any method.
            status: 429 (rate limited, sets ``Retry-After``), 500/503, or 200 with ``error``.
            retry_after: seconds put in ``Retry-After`` for a 429.
            times: how many consecutive calls fail.
            error: for ``status=200``, the ``ok: false`` error code (default ``fatal_error``).
        """
        if status == 200 and error is None:
            error = "fatal_error"
        for _ in range(times):
            self._planned[method].append(Fault(status, retry_after, error))

    def take(self, method: str) -> Fault | None:
        for key in (method, "*"):
            if self._planned[key]:
                return self._planned[key].popleft()
        return None

    def clear(self) -> None:
        self._planned.clear()


class CallLog:
    """Every call received, in order."""

    def __init__(self) -> None:
        self._calls: list[Call] = []

    def record(self, call: Call) -> None:
        self._calls.append(call)

    def calls(self, method: str | None = None) -> list[Call]:
        return [c for c in self._calls if method is None or c.method == method]
