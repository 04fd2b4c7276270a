"""What the bot asked of the Web API, and the failures a test wants it to meet.

Why: end-to-end tests assert on the bot's behaviour at the boundary ("it posted once,
retried after the 429, never called views.open twice"), so every call is recorded with
its outcome. Faults are planned per method and consumed in order, so a test states exactly
which call fails and how (Slack's 429 with ``Retry-After``, a 500/503, an application
error such as ``fatal_error`` with HTTP 200, or a dropped connection). A fault may be
limited to the calls a predicate picks (``where``), and may strike after the call was
applied (``after_applying``): Slack stored the message, but its answer was lost, as a
real Slack can do on a timeout, a reset connection or a 5xx from its edge.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["DROP_CONNECTION", "NO_ANSWER", "Call", "CallLog", "Fault", "FaultPlan"]

DROP_CONNECTION = 0  # a fault status: the connection is closed without an answer
NO_ANSWER = -1  # a fault status: no answer ever comes (until the stand-in stops)

Params = dict[str, Any]


@dataclass(frozen=True)
class Call:
    """One Web API request as the stand-in received and answered it.

    ``params`` has the token removed; ``error`` is Slack's error code, ``ratelimited`` for
    an injected 429, ``http_<status>`` for an injected server error, ``dropped`` or
    ``no_answer`` for a connection closed or left hanging. ``applied`` says that the call
    changed the workspace although its answer was lost.
    """

    method: str
    params: dict[str, Any]
    at: float
    ok: bool
    error: str | None
    status: int
    applied: bool = False


@dataclass(frozen=True)
class Fault:
    """A planned failure: HTTP ``status`` and, for HTTP 200, the ``ok: false`` error code.

    ``status`` may also be :data:`DROP_CONNECTION` or :data:`NO_ANSWER`. ``where`` limits
    the fault to calls whose parameters it accepts; ``after_applying`` applies the call
    before failing its answer.
    """

    status: int
    retry_after: int
    error: str | None
    after_applying: bool = False
    where: Callable[[Params], bool] | None = None

    @property
    def loses_answer(self) -> bool:
        """A server error or no answer: the caller cannot tell whether the call was applied."""
        return self.status >= 500 or self.status in (DROP_CONNECTION, NO_ANSWER)

    @property
    def lost_answer(self) -> str:
        """How the call is recorded when its answer is lost."""
        if self.status == DROP_CONNECTION:
            return "dropped"
        if self.status == NO_ANSWER:
            return "no_answer"
        return f"http_{self.status}"


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
        after_applying: bool = False,
        where: Callable[[Params], bool] | None = None,
    ) -> None:
        """Make the next ``times`` calls of ``method`` (that ``where`` accepts) fail.

        Args:
            method: e.g. ``"chat.postMessage"``; ``"*"`` for any method.
            status: 429 (rate limited, sets ``Retry-After``), 500/503, 200 with ``error``,
                :data:`DROP_CONNECTION` or :data:`NO_ANSWER`.
            retry_after: seconds put in ``Retry-After`` for a 429.
            times: how many such calls fail.
            error: for ``status=200``, the ``ok: false`` error code (default ``fatal_error``).
            after_applying: apply the call, then fail its answer (a 5xx, a dropped
                connection or no answer: Slack never applies a call it answers with a 429
                or an error code).
            where: only calls whose parameters (token removed, JSON arguments decoded)
                this accepts; other calls of ``method`` pass untouched.

        Raises:
            ValueError: ``after_applying`` with a status that says the call was refused.
        """
        if status == 200 and error is None:
            error = "fatal_error"
        fault = Fault(status, retry_after, error, after_applying, where)
        if after_applying and not fault.loses_answer:
            raise ValueError(f"Slack does not apply a call it answers with HTTP {status}")
        for _ in range(times):
            self._planned[method].append(fault)

    def take(self, method: str, params: Params) -> Fault | None:
        """The first planned fault for this call, removed from the plan; None if none fits."""
        for key in (method, "*"):
            planned = self._planned[key]
            for fault in planned:
                if fault.where is None or fault.where(params):
                    planned.remove(fault)
                    return fault
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
