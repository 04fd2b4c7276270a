"""The state of one execution of a run: its journal, counters and what it is waiting for.

A RunContext lives for one claim of a run by one worker, and carries that claim's
fencing token: every write it makes is refused once the run was claimed again, and
before each live LLM or tool call it renews its lease, or stops if it lost it
(``crew_runtime.lease``). It is reached from CrewAI's callbacks (LLM wrapper, tool hooks,
the human-input provider, ``ask_human``) through a ContextVar, which CrewAI copies into
its worker threads.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import replace
from datetime import timedelta
from typing import Any

from crewai.utilities.agent_utils import extract_tool_call_info, is_tool_call_list
from pydantic import BaseModel

from crew_runtime import metrics, streams
from crew_runtime.calls import CallKey, ToolBatch, ToolSlot, Turn
from crew_runtime.config import CrewSpec, rule_of
from crew_runtime.digests import proposed_digest
from crew_runtime.gates import Gate
from crew_runtime.lease import RECHECK_EVERY, LeaseHolder
from crew_runtime.progress import Progress
from crew_runtime.signals import PauseRun, RunRejected, RunSignal
from crew_runtime.specs import Deadlines
from storage import (
    JournalEntry,
    NewReview,
    OnExpire,
    Review,
    ReviewKind,
    ReviewStatus,
    Run,
    Snapshot,
    StandingApproval,
    Store,
)
from storage.journal import RULE_ENTRY

_current: ContextVar[RunContext | None] = ContextVar("countersign_run", default=None)

# The tool calls around the code running now, innermost last. A delegation tool runs its
# coworker's whole agent loop inside the call, in threads whose context is copied from the
# call's, so the coworker's calls see it: their stream hangs off it, and a pause raised
# among them marks it.
_enclosing: ContextVar[tuple[ToolSlot, ...]] = ContextVar("countersign_tool_calls", default=())


# The journal's per-turn kinds: a resume from a snapshot reads none of them before it.
TURN_KINDS = ("llm", "tool")


def current_run() -> RunContext | None:
    return _current.get()


def idempotency_key() -> str | None:
    """The key of the tool call being executed, for tools with side effects.

    A worker can die after a tool's side effect and before its result is
    journaled; the next worker then calls the tool again with the same key.
    Pass it to the system you call (a payment API's idempotency key, a unique
    constraint) so the effect happens once. None outside a Countersign run.
    """
    ctx = _current.get()
    if ctx is None:
        return None
    key = ctx.current_tool_call()
    return None if key is None else str(key)


class RunContext(LeaseHolder):
    """Journal access and pause bookkeeping for one execution of one run, under the lease
    of its claim (:class:`~crew_runtime.lease.LeaseHolder`: ``run``, ``lease_token``)."""

    def __init__(self, run: Run, store: Store, spec: CrewSpec, lease: timedelta) -> None:
        super().__init__(run, store, lease)
        self.spec = spec
        # What the crew is doing, for the run's progress message (a crew's `progress`).
        self.progress = Progress(store, run.id, self.lease_token) if spec.progress else None
        self.stats: Counter[str] = Counter()
        self.asks: list[NewReview] = []
        self.rejection: str | None = None
        self.divergences: list[str] = []
        self._lock = threading.Lock()
        self._counters: Counter[tuple[str, str]] = Counter()
        # A suspension that left a snapshot lets the resume skip the journal's turns before it
        # and the reviews opened before it (crew_runtime.snapshot); they are read after all
        # if the snapshot cannot be used.
        self.snapshot: Snapshot | None = None
        if spec.kind != "flow":
            self.snapshot = store.load_snapshot(run.id)
        self._load(0 if self.snapshot is None else self.snapshot.pos)
        # Per stream, its latest LLM turn and the conversation its executor set up first;
        # per executor's count of repeated tool calls (by id, kept alive), what it counted.
        self.turns: dict[str, Turn] = {}
        self.setups: dict[str, str] = {}
        self._repeats: dict[int, tuple[dict[int, int], Counter[str]]] = {}
        # The crew's tasks by id, with the place their calls take (kept alive: no id reuse).
        self._task_index: dict[int, tuple[Any, str]] = {}
        self.gates: dict[str, Gate] = {}
        self._batches: dict[str, ToolBatch] = {}
        self._holding = False
        # Tasks CrewAI makes up for delegated work, by id (kept alive, so no id is reused),
        # with the place of the tool call they run in.
        self._delegated: dict[int, tuple[Any, str]] = {}
        # Per agent (kept alive, by id): whether its last LLM turn or tool result was
        # replayed, so the step it ends was reported by an earlier execution.
        self._steps: dict[int, tuple[Any, bool]] = {}
        self._changed = threading.Condition(self._lock)
        self._live: dict[int, threading.Thread] = {}
        self._live_ids = 0
        self.signalled = False  # a pause or rejection was raised in this execution
        self._stopping = False  # no new live call may start
        self._closed = False  # kickoff() is over: no review is queued any more

    # -- identity of calls

    def index_tasks(self, tasks: list[Any], prefix: str = "") -> None:
        """Name the streams of a crew's tasks ``{prefix}task{n}``.

        A flow run kicks off several crews; each is indexed under a prefix of its own
        (``flow:write#0/``), so ``task0`` of one crew is not ``task0`` of another.
        """
        with self._lock:
            for n, task in enumerate(tasks):
                self._task_index[id(task)] = (task, streams.task_place(n, prefix))

    def stream_for(self, task: Any, agent: Any) -> str:
        """``task{index}:{agent role}``: the unit whose calls happen in a fixed order.

        Work that is not one of the crew's tasks but runs inside a tool call (the task
        CrewAI makes up for "Delegate work to coworker" or "Ask question to coworker", an
        agent kicked off by a tool) hangs off that call: ``task0:Crew Manager>2:Analyst``
        is the Analyst working inside the manager's tool call 2. That place is the same on
        every replay, even when parallel tasks delegate at once. A crew kicked off in a flow
        step has its tasks' streams under the crew's prefix (``flow:write#0/task0:Writer``).
        Anything else is ``crew:{role}``.
        """
        indexed = self._task_index.get(id(task)) if task is not None else None
        where = indexed[1] if indexed is not None else self._nested_in(task)
        role = getattr(agent, "role", None) or "-"
        return streams.stream(where, role)

    def _nested_in(self, task: Any) -> str:
        with self._lock:
            known = self._delegated.get(id(task)) if task is not None else None
            if known is not None:  # the task's first call fixed its place
                return known[1]
            enclosing = _enclosing.get()
            if not enclosing:
                return streams.OUTSIDE
            key = enclosing[-1].key
            where = streams.nested_place(key.stream, key.seq)
            if task is not None:
                self._delegated[id(task)] = (task, where)
            return where

    def delegated_task(self, output: Any) -> Any:
        """The task CrewAI made up for delegated work whose output this is, if any."""
        with self._lock:
            tasks = [task for task, _ in self._delegated.values()]
        return next((task for task in tasks if getattr(task, "output", None) is output), None)

    def note_step(self, agent: Any, replayed: bool) -> None:
        """An LLM turn or tool result of ``agent`` was replayed (or made live)."""
        if agent is not None:
            with self._lock:
                self._steps[id(agent)] = (agent, replayed)

    def step_replayed(self, agent: Any) -> bool:
        """Whether the step ``agent`` just ended was ended by a replayed turn or result."""
        with self._lock:
            known = self._steps.get(id(agent))
        return known is not None and known[1]

    def next_seq(self, stream: str, kind: str) -> int:
        with self._lock:
            seq = self._counters[(stream, kind)]
            self._counters[(stream, kind)] += 1
            return seq

    def note_turn(self, stream: str, seq: int, messages: Any, tools: Any, agent: Any) -> None:
        """An agent asks for LLM turn ``seq`` of ``stream``: keep what its executor holds
        (the paused stream's latest turn is the run's snapshot, ``crew_runtime.snapshot``)."""
        executor: Any = getattr(agent, "agent_executor", None)
        state = getattr(executor, "state", None)
        if state is None or not isinstance(messages, list):
            return
        handler = getattr(executor, "tools_handler", None)
        last = getattr(handler, "last_used_tool", None)
        counts = getattr(executor, "_tool_call_counts", None)
        self.turns[stream] = Turn(
            seq=seq,
            messages=list(messages),
            tools=tools,
            counters={**self.counters_of(stream), "llm": seq},
            iterations=int(state.iterations),
            native=bool(state.use_native_tools),
            last_tool=last.model_dump(mode="json") if isinstance(last, BaseModel) else None,
            # CrewAI counts repeated tool calls from 1.15.29 on (crew_runtime.compat).
            repeats=self.repeats_of(counts) if counts is not None else {},
        )

    def counters_of(self, stream: str) -> dict[str, int]:
        """The next seq of each kind in ``stream``."""
        with self._lock:
            return {kind: self._counters[(stream, kind)] for kind in ("llm", "tool", "review")}

    def set_counters(self, stream: str, counters: dict[str, int]) -> None:
        """Go on in ``stream`` from these seqs (a resume from a snapshot)."""
        with self._lock:
            for kind, seq in counters.items():
                self._counters[(stream, kind)] = seq

    def note_repeat(self, counts: dict[int, int], blob: str) -> None:
        """CrewAI counted an identical tool call (``blob``, what it hashes) in ``counts``."""
        with self._lock:
            _, seen = self._repeats.setdefault(id(counts), (counts, Counter()))
            seen[blob] += 1

    def seed_repeats(self, counts: dict[int, int], repeats: dict[str, int]) -> None:
        """Set CrewAI's ``counts`` as they were counted (hashes differ between processes)."""
        counts.clear()
        counts.update({hash(blob): n for blob, n in repeats.items()})
        with self._lock:
            self._repeats[id(counts)] = (counts, Counter(repeats))

    def repeats_of(self, counts: dict[int, int]) -> dict[str, int]:
        with self._lock:
            known = self._repeats.get(id(counts))
            return dict(known[1]) if known is not None else {}

    def note_llm_response(self, stream: str, response: Any) -> None:
        """An LLM turn of ``stream`` answered: reserve the seqs of its native tool calls.

        Called for live and replayed turns alike, so the reservation is the same on resume.
        A text answer (ReAct) clears the batch; its tool call then takes :meth:`next_seq`.
        """
        batch = None
        if isinstance(response, list) and response and is_tool_call_list(response):
            calls = [_call_of(info) for info in map(extract_tool_call_info, response) if info]
            with self._lock:
                base = self._counters[(stream, "tool")]
                self._counters[(stream, "tool")] += len(calls)
            expected = sum(1 for _, args in calls if args is not None)
            batch = ToolBatch(base, calls, expected)
        with self._lock:
            if batch is None:
                self._batches.pop(stream, None)
            else:
                self._batches[stream] = batch

    def tool_seq(self, stream: str, name: str, args: Any) -> tuple[int, ToolBatch | None]:
        """The seq of a tool call: its place in the turn's batch, else the next free one."""
        with self._lock:
            batch = self._batches.get(stream)
            if batch is not None:
                free = [i for i in range(len(batch.calls)) if i not in batch.claimed]
                same = [i for i in free if batch.calls[i] == (name, args)]
                named = [i for i in free if batch.calls[i][0] == name]
                for i in same or named:
                    batch.claimed.add(i)
                    return batch.base + i, batch
        return self.next_seq(stream, "tool"), None

    def finish_tool_call(self, slot: ToolSlot) -> bool:
        """Count a call of a batch as done; True when the run must pause now: a call is
        held for approval and every call of its turn has been through the hooks (so all
        their reviews are open). Outside a batch, a held call pauses at once."""
        with self._lock:
            if slot.awaiting_approval:
                self._holding = True
            batch = slot.batch
            if batch is None:
                return slot.awaiting_approval
            batch.finished += 1
            batch.held += slot.awaiting_approval
            return batch.held > 0 and batch.finished >= batch.expected

    @property
    def holding(self) -> bool:
        """A gated call of this execution is waiting: no model may see its placeholder."""
        with self._lock:
            return self._holding

    def key(self, stream: str, seq: int) -> CallKey:
        return CallKey(self.run.id, stream, seq)

    def enter_tool_call(self, slot: ToolSlot) -> None:
        """The before-hook of a call: it encloses what runs until its after-hook (which
        CrewAI runs in the same context)."""
        _enclosing.set((*_enclosing.get(), slot))

    def leave_tool_call(self) -> ToolSlot | None:
        enclosing = _enclosing.get()
        if not enclosing:
            return None
        _enclosing.set(enclosing[:-1])
        return enclosing[-1]

    def tool_slot(self) -> ToolSlot | None:
        enclosing = _enclosing.get()
        return enclosing[-1] if enclosing else None

    def current_tool_call(self) -> CallKey | None:
        slot = self.tool_slot()
        return None if slot is None else slot.key

    # -- the journal

    def _load(self, since: int) -> None:
        """Read the journal and the reviews (from journal position ``since``, bar what is not
        a turn). Decisions cannot change while the run executes (it is not waiting), so one
        read serves every replayed pause point instead of a query per review round."""
        store, run_id = self.store, self.run.id
        entries = store.load_journal(run_id, turns_from=since, turn_kinds=TURN_KINDS)
        opened = store.list_reviews(status=None, run_id=run_id, opened_from=since)
        with self._lock:
            self._recorded = {(e.stream, e.kind, e.seq): e for e in entries}
            self._reviews = {
                (r.kind, r.stream, r.seq): r for r in opened if r.status != ReviewStatus.SUPERSEDED
            }

    def load_whole_journal(self) -> None:
        """The snapshot is not used: read the turns and reviews it let this execution skip."""
        if self.snapshot is None:
            return
        self.snapshot = None
        self._load(0)

    def recorded(self, stream: str, kind: str, seq: int) -> JournalEntry | None:
        with self._lock:
            return self._recorded.get((stream, kind, seq))

    def record(
        self,
        stream: str,
        kind: str,
        seq: int,
        payload: dict[str, Any],
        prompt_hash: str | None = None,
    ) -> None:
        self.check_alive()
        pos = self._until_stored(
            f"a turn of {stream}",
            lambda: self.store.append_journal(
                self.run.id,
                self.lease_token,
                stream=stream,
                kind=kind,
                seq=seq,
                payload=payload,
                prompt_hash=prompt_hash,
            ),
        )
        with self._lock:
            self._recorded[(stream, kind, seq)] = JournalEntry(
                pos, stream, kind, seq, payload, prompt_hash
            )

    def record_auto(
        self, stream: str, kind: str, seq: int, payload: dict[str, Any], *, by: str
    ) -> None:
        """Journal that the gated call at ``(stream, seq)`` was decided by a rule (``kind``
        ``rule``: counted once) or a standing approval (``standing``), with its audit record
        (``Store.record_auto_decision``)."""
        self.check_alive()
        pos, recorded = self._until_stored(
            f"the decision of {stream} without a person",
            lambda: self.store.record_auto_decision(
                self.run.id,
                self.lease_token,
                stream=stream,
                kind=kind,
                seq=seq,
                payload=payload,
                by=by,
            ),
        )
        if recorded and kind == RULE_ENTRY:
            metrics.count_rule(self.run.crew, str(payload["rule"]), str(payload["decide"]))
        with self._lock:
            self._recorded[(stream, kind, seq)] = JournalEntry(
                pos, stream, kind, seq, payload, None
            )

    def void(self, review: Review, details: dict[str, Any]) -> None:
        """The call ``review`` approved will not run (``details``: what was approved, what
        was found): the review is superseded and the refusal audited; the caller asks again."""
        self.check_alive()
        self._until_stored(
            f"the refusal to run {review.id}",
            lambda: self.store.void_decision(self.run.id, self.lease_token, review.id, details),
        )
        with self._lock:
            self._reviews.pop((review.kind, review.stream, review.seq), None)

    def diverge(self, entry: JournalEntry, note: str) -> None:
        """The crew no longer matches its recording: drop the rest and go on live."""
        self._until_stored(
            "the divergence",
            lambda: self.store.record_divergence(self.run.id, self.lease_token, entry.pos, note),
        )
        with self._lock:
            self._recorded = {k: e for k, e in self._recorded.items() if e.pos < entry.pos}
            self._reviews = {k: r for k, r in self._reviews.items() if r.journal_pos <= entry.pos}
        self.divergences.append(note)

    # -- reviews

    def reviews(self) -> list[Review]:
        with self._lock:
            return list(self._reviews.values())

    def next_review_seq(self, kind: ReviewKind, stream: str) -> int:
        """The next free pause point of a stream (flows pause by method, not by turn)."""
        with self._lock:
            taken = [s for (k, st, s) in self._reviews if k == kind and st == stream]
            queued = [a.seq for a in self.asks if a.kind == kind and a.stream == stream]
        return max([*taken, *queued], default=-1) + 1

    def find_review(self, kind: ReviewKind, stream: str, seq: int) -> Review | None:
        """The review opened at this pause point, as it stood when the execution began."""
        with self._lock:
            return self._reviews.get((kind, stream, seq))

    def standing_for(self, tool: str, args: dict[str, Any]) -> StandingApproval | None:
        """The run's standing approval (not revoked, as the database says now) that covers
        a call of ``tool`` with ``args``, if any."""
        return self._until_stored(
            f"the standing approvals of {tool}",
            lambda: self.store.standing_for(self.run.id, tool, args),
        )

    def ask(self, review: NewReview, *, expire_after: timedelta | None = None) -> None:
        """Queue a review to open when the run suspends, with its due times (its gate's or
        its task's, else the crew's; ``expire_after``: the deadline a rule raised).

        Once kickoff() is over the reviews to open are taken; one asked later (by a
        parallel task still stopping) is asked again by the next execution.
        """
        now = self.store.clock()
        tool, task = rule_of(review.kind, review.stream, review.details)
        due = self.spec.deadlines_for(tool=tool, task=task)
        if expire_after is not None:
            due = Deadlines(expire_after=expire_after).over(due)
        review = replace(
            review,
            remind_at=now + due.remind_after if due.remind_after else None,
            escalate_at=now + due.escalate_after if due.escalate_after else None,
            expires_at=now + due.expire_after if due.expire_after else None,
            on_expire=due.on_expire or OnExpire.REJECT,
            digest=proposed_digest(self.run.id, review),
        )
        with self._lock:
            if not self._closed:
                self.asks.append(review)

    def reject(self, reason: str) -> None:
        self.rejection = reason
        self.interrupt()

    # -- pauses that must reach the runtime

    def signal(self, exc: RunSignal) -> RunSignal:
        """Note a pause or rejection about to be raised here, and return it to raise."""
        self.interrupt()
        return exc

    def interrupt(self) -> None:
        """A pause or rejection is raised here (or a paused ``ask_human`` returns).

        It must reach the runtime, but a tool around this point may catch it: CrewAI's
        delegation tools turn any exception of the coworker's work into their result
        ("Error executing task with agent ..."). So every enclosing call is marked, and
        its after-hook raises the signal again instead of journaling that text; and no
        new live call starts in this execution (a parallel task stops at its next one).
        """
        with self._lock:
            self.signalled = True
            self._stopping = True
            for slot in _enclosing.get():
                slot.interrupted = True

    def signal_again(self, what: str) -> RunSignal:
        """The signal to raise for a call that caught one (see :meth:`interrupt`)."""
        if self.rejection is not None:
            return self.signal(RunRejected(self.rejection))
        return self.signal(PauseRun(f"{what} was interrupted by a pause inside it"))

    def begin_live(self) -> int | None:
        """A live LLM or tool call starts; None if the run is stopping (it must not)."""
        with self._lock:
            if self._stopping:
                return None
            self._live_ids += 1
            self._live[self._live_ids] = threading.current_thread()
            return self._live_ids

    def end_live(self, live: int | None) -> None:
        """A live call ended (journaled, or failed)."""
        if live is None:
            return
        with self._changed:
            self._live.pop(live, None)
            self._changed.notify_all()

    @property
    def closed(self) -> bool:
        """``kickoff()`` is over: no live call starts any more; a call still running (in a
        parallel task's thread) is waited for; reviews asked now are left to the next
        execution."""
        with self._lock:
            return self._closed

    def close(self) -> None:
        """``kickoff()`` is over: start no live call, and wait for those still running.

        A pause leaves ``kickoff()`` while a parallel task (``async_execution``) may be in
        the middle of a call, in a thread nobody waits for. Its result is journaled before
        the run suspends, so resuming does not do it again; its next call is refused. A
        call whose thread died without ending it is not waited for.
        """
        with self._changed:
            self._stopping = True
            self._closed = True
            while any(thread.is_alive() for thread in self._live.values()):
                self._changed.wait(RECHECK_EVERY)
        if self.progress is not None:  # before the run is suspended or settled: still held
            self.progress.close()

    @property
    def stopping_on_purpose(self) -> bool:
        """This execution will stop for a person (a review queued, a rejection) or because it
        lost its run: what leaves ``kickoff()`` then is no failure (``crew_runtime.quiet``)."""
        return bool(self.asks) or self.rejection is not None or self.aborted

    @contextmanager
    def active(self) -> Iterator[RunContext]:
        token = _current.set(self)
        try:
            yield self
        finally:
            _current.reset(token)


def _call_of(info: tuple[str, str, Any]) -> tuple[str, Any]:
    """(name, arguments as the hooks will see them, or None when CrewAI cannot parse them)."""
    _, name, args = info
    if isinstance(args, str):
        try:
            return name, json.loads(args)
        except json.JSONDecodeError:
            return name, None
    return name, args
