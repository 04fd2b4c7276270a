"""A run's live progress, as its crew moves: which tasks started and finished, the last tool
called and how many were, written for the run's progress message (``storage.progress``).

The worker runs in a process of its own, so the state goes through the database: at most one
write per :data:`storage.EDIT_EVERY` per run, however many events come (a hot loop of tool
calls writes one row every two seconds, not one per call). An event within that time marks the
state changed and leaves a timer to write it when the time is up; the execution writes what is
left when its crew stops (paused, finished, failed). Writes are fenced by the execution's
lease: one that lost its run writes nothing more. A failed write is logged and never stops the
crew: progress is a courtesy, the journal is the record.

A resumed execution starts from the state its run's last execution wrote: events that a
replay does not emit again (``crew_runtime.options``) are already there.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from storage import EDIT_EVERY, LeaseLost, Store

log = logging.getLogger(__name__)

JSON = dict[str, Any]
STARTED, FINISHED = "started", "finished"
NAME_CHARS = 200  # of a task's name or description, an agent's role, a tool's name


class Progress:
    """One execution's view of its run's progress; thread-safe (CrewAI runs parallel tasks
    and tools in threads of its own)."""

    def __init__(
        self,
        store: Store,
        run_id: str,
        token: str,
        *,
        every: float = EDIT_EVERY.total_seconds(),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.run_id = run_id
        self.token = token
        self.every = every
        self.clock = clock
        found = store.load_progress(run_id)
        self._state: JSON = _fresh() if found is None else {**_fresh(), **found.state}
        self._lock = threading.Lock()
        self._writing = threading.Lock()  # one write at a time, in the order of the states
        self._dirty = False
        self._last = float("-inf")
        self._timer: threading.Timer | None = None
        self._stopped = False

    def task(self, place: str, what: str, task: Any, agent: Any) -> None:
        """A task started or finished (``what``); ``place`` is its stream, the same on
        every execution."""
        name = str(getattr(task, "name", None) or getattr(task, "description", "") or place)
        role = str(
            getattr(agent, "role", None) or getattr(getattr(task, "agent", None), "role", "")
        )
        with self._lock:
            tasks: list[JSON] = self._state["tasks"]
            entry = next((t for t in tasks if t["place"] == place), None)
            if entry is None:
                entry = {"place": place, "name": name[:NAME_CHARS], "agent": role[:NAME_CHARS]}
                tasks.append(entry)
            entry["state"] = what
        self._changed()

    def tool(self, name: str, agent: str) -> None:
        """A tool is called (live: a replayed call was reported by an earlier execution)."""
        with self._lock:
            self._state["tool"] = {"name": name[:NAME_CHARS], "agent": agent[:NAME_CHARS]}
            self._state["tools"] = int(self._state.get("tools", 0)) + 1
        self._changed()

    def close(self) -> None:
        """The crew stopped: write what is left now, and nothing after."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
        self._flush()
        with self._lock:
            self._stopped = True

    def _changed(self) -> None:
        with self._lock:
            self._dirty = True
            if self._stopped or self._timer is not None:
                return
            wait = self._last + self.every - self.clock()
            if wait > 0:  # written lately: once the time is up, with all that came meanwhile
                self._timer = threading.Timer(wait, self._flush_timed)
                self._timer.daemon = True
                self._timer.start()
                return
        self._flush()

    def _flush_timed(self) -> None:
        with self._lock:
            self._timer = None
        self._flush()

    def _flush(self) -> None:
        with self._writing:
            with self._lock:
                if not self._dirty or self._stopped:
                    return
                state = _copy(self._state)
                self._dirty = False
                self._last = self.clock()
            try:
                self.store.save_progress(self.run_id, self.token, state)
            except LeaseLost:
                with self._lock:
                    self._stopped = True
            except Exception:
                log.warning("run %s: progress not written", self.run_id, exc_info=True)
                with self._lock:
                    self._dirty = True  # the next event, or the close, tries again


def _fresh() -> JSON:
    return {"tasks": [], "tool": None, "tools": 0}


def _copy(state: JSON) -> JSON:
    return {
        "tasks": [dict(t) for t in state["tasks"]],
        "tool": None if state.get("tool") is None else dict(state["tool"]),
        "tools": state.get("tools", 0),
    }
