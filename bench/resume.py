"""Resume in constant time: what it costs to bring back a run with 30 or 300 recorded turns.

A suspended run resumes from the snapshot its suspension stored (``crew_runtime.snapshot``):
the crew is built again, the tasks done are skipped with their outputs, the paused agent's
executor is seeded with its conversation, the one turn before the pause is served from the
journal, the decision is applied, and the next turn is live. The journal replay it replaced
(every recorded LLM and tool turn served from the database through CrewAI's own loop) is still
the fallback; each row here is measured on both paths, side by side: ``snapshot``, and
``journal`` (the same copy of the run without its snapshot).

Two crews (bench/_common.py), each brought to exactly N recorded LLM turns (``--turns``,
30 and 300) and a pending task review, then resumed with a "changes" decision:

``review``
    one task, ``Task(human_input=True)``: the draft was sent back N-1 times with feedback,
    so the journal holds N drafts (N LLM turns) and N-1 decisions; the Nth draft waits.
``tools``
    three tasks, N/3-1 tool calls and a final answer each (N LLM turns); the last task's
    output waits for review.

Measured, in this process, on a warm worker (CrewAI imported, a :class:`crew_runtime.Worker`
already polling in a thread, as in ``countersign serve``):

(a) resume latency: from ``Countersign.decide`` returning (the worker is woken, as the bot
    does) to the start of the first live LLM call; median of ``--reps`` runs on the snapshot
    path, ``--journal-reps`` on the journal path. Split into decide→claimed and claimed→first
    live call (build the crew, read the snapshot or journal, replay). Goal: under 100 ms.
(b) journal replay per recorded turn (at the smallest ``--turns``): (a) / N on the journal
    path, against CrewAI's own cost per turn: the same crew and the same conversation run
    live by ``crew.kickoff`` with an instant model and a provider that answers with the same
    feedback at once (no journal, no database), timed from building the crew to the start of
    LLM call N+1, divided by N. Both in wall time and in process CPU time, alternating ours and
    CrewAI's so the machine's noise hits both.
(c) with a 300 ms model (``ScriptedLLM(delay=0.3)``), at the smallest ``--turns``: our resume
    against re-running the crew from scratch, until the next draft is ready for the
    reviewer: wall time and calls.

``--profile`` adds a cProfile of every thread of one resume and one live kickoff, grouped by
who owns the code. Run: ``.venv/bin/python bench/resume.py [--reps 15] [--journal-reps 5]
[--slow-reps 3] [--turns 30 300] [--database-url URL] [--profile] [--only review|tools]``.
About 6 minutes on SQLite.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import logging
import pstats
import sys
import threading
import time
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import _common as c  # first: sets CrewAI's opt-outs, puts the repo on sys.path
from crewai.core.providers.human_input import SyncHumanInputProvider, reset_provider, set_provider
from sqlalchemy import insert, select

from crew_runtime import Countersign, Worker, WorkerSettings, journal_llm, load_config
from crew_runtime.config import Config
from crew_runtime.context import RunContext
from crew_runtime.executor import execute
from crew_runtime.review import feed_back
from storage import (
    DecisionKind,
    JournalEntry,
    NewReview,
    Review,
    ReviewStatus,
    Run,
    RunStatus,
    Snapshot,
    Store,
)
from storage.base import new_id
from storage.schema import decisions, journal, reviews, runs, snapshots

OUT = sys.stdout
CREWS = {"review": "draft", "tools": "research"}


@dataclass(frozen=True)
class Scenario:
    name: str  # "review" or "tools"
    turns: int  # recorded LLM turns before the review the resume answers

    @property
    def crew(self) -> str:
        return CREWS[self.name]

    @property
    def setup_rounds(self) -> int:
        """The "changes" decisions that lead to the last recorded turn."""
        return self.turns - 1 if self.name == "review" else 0

    @property
    def inputs(self) -> dict[str, str]:
        if self.name == "review":
            return {"topic": "otters"}
        return {"topic": "otters", "lookups": str(self.turns // 3 - 1)}

    def feedback(self, n: int) -> str:
        return f"Round {n}: tighten the wording and add one example."


class TimedStore(Store):
    """The real store, noting when the worker claims and suspends a run, and the time spent
    in the reads a replay makes (journal, reviews) before the first live LLM call."""

    claimed_at: float | None = None
    suspended_at: float | None = None
    replay_reads = 0.0

    def load_journal(self, run_id: str, **since: Any) -> list[JournalEntry]:
        t0 = time.perf_counter()
        try:
            return super().load_journal(run_id, **since)
        finally:
            self._count(t0)

    def load_snapshot(self, run_id: str) -> Snapshot | None:
        t0 = time.perf_counter()
        try:
            return super().load_snapshot(run_id)
        finally:
            self._count(t0)

    def list_reviews(
        self,
        *,
        status: ReviewStatus | None = ReviewStatus.PENDING,
        run_id: str | None = None,
        opened_from: int = 0,
    ) -> list[Review]:
        t0 = time.perf_counter()
        try:
            return super().list_reviews(status=status, run_id=run_id, opened_from=opened_from)
        finally:
            self._count(t0)

    def _count(self, t0: float) -> None:
        if c.PROBE.marked_at is None:  # still replaying
            self.replay_reads += time.perf_counter() - t0

    def claim_run(
        self, worker_id: str, lease: timedelta, *, exclude: Collection[str] = ()
    ) -> Run | None:
        run = super().claim_run(worker_id, lease, exclude=exclude)
        if run is not None:
            self.claimed_at = time.perf_counter()
        return run

    def suspend_run(
        self, run_id: str, token: str, asks: Sequence[NewReview], **pause: Any
    ) -> list[Review]:
        reviews = super().suspend_run(run_id, token, asks, **pause)
        self.suspended_at = time.perf_counter()
        return reviews


HASHING = {"seconds": 0.0}
_prompt_hash = journal_llm.prompt_hash


def _timed_prompt_hash(messages: Any, tools: Any) -> str:
    t0 = time.perf_counter()
    try:
        return _prompt_hash(messages, tools)
    finally:
        if c.PROBE.marked_at is None:
            HASHING["seconds"] += time.perf_counter() - t0


@contextlib.contextmanager
def quiet(log: Path) -> Iterator[None]:
    """Send CrewAI's console output (event-pairing warnings on every pause) to a log file."""
    with (
        log.open("a") as fh,
        contextlib.redirect_stdout(fh),
        contextlib.redirect_stderr(fh),
    ):
        yield


def say(text: str) -> None:
    print(text, file=OUT, flush=True)


# ------------------------------------------------------------------------------ setup


def prepare_runs(
    store: Store, config: Config, svc: Countersign, scenario: Scenario, counts: Sequence[int]
) -> list[list[str]]:
    """Bring one run to N recorded LLM turns and a pending review; copy it ``counts[0]`` times
    with its snapshot, then ``counts[1]`` times without (resumed by replaying the journal).

    The copies are the same rows under new ids (run, journal, reviews, decisions), so each
    timed resume starts from exactly the same recorded state.
    """
    run_id = svc.start_run(scenario.crew, scenario.inputs).id
    settings = WorkerSettings(concurrency=1, poll=timedelta(seconds=0.02))
    Worker(store, config, settings).run(until_idle=True)
    for n in range(1, scenario.setup_rounds + 1):
        (review,) = store.list_reviews(run_id=run_id)
        svc.decide(review.id, DecisionKind.CHANGES, scenario.feedback(n), by="U1")
        Worker(store, config, settings).run(until_idle=True)
    llm_turns = [e for e in store.load_journal(run_id) if e.kind == "llm"]
    assert len(llm_turns) == scenario.turns, len(llm_turns)
    assert store.get_run(run_id).status == RunStatus.WAITING
    assert len(store.list_reviews(run_id=run_id)) == 1
    assert store.load_snapshot(run_id) is not None
    with_snapshot, without = counts
    return [
        [copy_run(store, run_id, snapshot=True) for _ in range(with_snapshot)],
        [copy_run(store, run_id, snapshot=False) for _ in range(without)],
    ]


def copy_run(store: Store, run_id: str, *, snapshot: bool) -> str:
    """A new run with the same rows as ``run_id`` (its snapshot too, or not): the bench's
    shortcut, not a runtime API."""
    new_run = new_id("run")
    with store.engine.begin() as conn:
        run = conn.execute(select(runs).where(runs.c.id == run_id)).mappings().one()
        conn.execute(insert(runs).values({**run, "id": new_run}))
        for turn in conn.execute(select(journal).where(journal.c.run_id == run_id)).mappings():
            conn.execute(insert(journal).values({**turn, "run_id": new_run}))
        if snapshot:
            row = conn.execute(select(snapshots).where(snapshots.c.run_id == run_id)).mappings()
            conn.execute(insert(snapshots).values({**row.one(), "run_id": new_run}))
        review_ids: dict[str, str] = {}
        for review in conn.execute(select(reviews).where(reviews.c.run_id == run_id)).mappings():
            review_ids[review["id"]] = new_id("rev")
            values = {**review, "id": review_ids[review["id"]], "run_id": new_run}
            conn.execute(insert(reviews).values(values))
        for decision in conn.execute(
            select(decisions).where(decisions.c.run_id == run_id)
        ).mappings():
            values = {k: v for k, v in decision.items() if k != "id"}
            values.update(review_id=review_ids[decision["review_id"]], run_id=new_run)
            conn.execute(insert(decisions).values(values))
    return new_run


# ----------------------------------------------------------------------- measurements


@dataclass
class Resume:
    to_first_live: float  # decide returned → first live LLM call started
    cpu_to_first_live: float  # the same in process CPU time
    to_claim: float  # decide returned → worker claimed the run
    replay_reads: float  # of which in the store reading the journal and reviews
    hashing: float  # of which hashing prompts to check them against the journal
    to_next_review: float  # decide returned → run waiting again with the next review
    llm_calls: int
    stats: dict[str, int]


def resume(
    store: TimedStore, svc: Countersign, worker: Worker, run_id: str, scenario: Scenario
) -> Resume:
    """Decide the pending review of ``run_id`` and time the warm worker's resume."""
    (review,) = store.list_reviews(run_id=run_id)
    c.PROBE.reset(mark=1)
    store.claimed_at = store.suspended_at = None
    store.replay_reads = HASHING["seconds"] = 0.0
    done = len(worker.finished)
    svc.decide(
        review.id, DecisionKind.CHANGES, scenario.feedback(scenario.setup_rounds + 1), by="U1"
    )
    t0 = time.perf_counter()
    worker.wake()
    cpu0 = time.process_time()
    first, cpu_first = c.PROBE.wait(timeout=60)
    while len(worker.finished) == done:
        time.sleep(0.001)
    finished_id, outcome = worker.finished[done]
    assert finished_id == run_id
    assert outcome.status == RunStatus.WAITING, outcome
    assert store.claimed_at is not None
    assert store.suspended_at is not None
    return Resume(
        to_first_live=first - t0,
        cpu_to_first_live=cpu_first - cpu0,
        to_claim=store.claimed_at - t0,
        replay_reads=store.replay_reads,
        hashing=HASHING["seconds"],
        to_next_review=store.suspended_at - t0,
        llm_calls=c.PROBE.calls,
        stats=outcome.stats,
    )


class ScriptedFeedback(SyncHumanInputProvider):
    """Answers each review round at once with the next scripted feedback, then approves.

    It revises like Countersign's provider (the draft put back before the feedback), so the
    live conversation is message for message the one the journal recorded.
    """

    def __init__(self, feedback: list[str], ready: list[float]) -> None:
        self.feedback = feedback
        self.ready = ready  # when each draft was handed to the "reviewer"

    def handle_feedback(self, formatted_answer: Any, context: Any) -> Any:
        answer = formatted_answer
        for text in self.feedback:
            self.ready.append(time.perf_counter())
            feed_back(answer, text, context)
            answer = context._invoke_loop()
        self.ready.append(time.perf_counter())
        return answer


@dataclass
class Live:
    to_call_31: float  # build the crew → LLM call N+1 started
    cpu_to_call_31: float  # the same in process CPU time
    to_next_review: float  # build the crew → the (N+1)th-turn draft is ready for review
    llm_calls: int


def live_kickoff(scenario: Scenario) -> Live:
    """The same crew and conversation, run by CrewAI alone: no journal, no database."""
    rounds = scenario.setup_rounds + 1
    ready: list[float] = []
    c.PROBE.reset(mark=scenario.turns + 1)
    token = set_provider(
        ScriptedFeedback([scenario.feedback(n) for n in range(1, rounds + 1)], ready)
    )
    try:
        t0, cpu0 = time.perf_counter(), time.process_time()
        crew = getattr(c, scenario.crew)(scenario.inputs)
        crew.kickoff(inputs=scenario.inputs)
    finally:
        reset_provider(token)
    call_31, cpu_31 = c.PROBE.wait(timeout=0)
    next_review = ready[rounds]  # the draft after the last scripted feedback
    calls_then = c.PROBE.calls  # every call was made before that draft: it ends the task
    return Live(call_31 - t0, cpu_31 - cpu0, next_review - t0, calls_then)


@contextlib.contextmanager
def profiled(profiles: list[cProfile.Profile]) -> Iterator[None]:
    """cProfile this thread and every thread started meanwhile (CrewAI's ``to_thread``s)."""

    def boot(*_: Any) -> None:
        sys.setprofile(None)
        profile = cProfile.Profile()
        profiles.append(profile)
        profile.enable()

    main = cProfile.Profile()
    profiles.append(main)
    threading.setprofile(boot)
    main.enable()
    try:
        yield
    finally:
        main.disable()
        threading.setprofile(None)


# Where the time goes, by who runs the code (tottime of functions, all threads).
GROUPS = [
    ("waiting on other threads (epoll, locks, queues)", ("'poll' of", "'acquire' of", "_queue")),
    ("Countersign runtime (journal, hooks, reviews)", ("/crew_runtime/",)),
    ("database (storage, SQLAlchemy, driver)", ("/storage/", "sqlalchemy", "sqlite3", "psycopg")),
    ("scripted model", ("/crew_runtime/offline/",)),
    ("CrewAI", ("/crewai/",)),
    ("pydantic", ("pydantic",)),
    ("asyncio, threads, json, logging, other stdlib", ("",)),
]


def grouped(profiles: list[cProfile.Profile]) -> tuple[dict[str, float], list[tuple[float, str]]]:
    """Tottime per group of :data:`GROUPS`, and the top functions outside the waits."""
    stats = pstats.Stats(*profiles)
    totals = dict.fromkeys((name for name, _ in GROUPS), 0.0)
    top: list[tuple[float, str]] = []
    for (filename, line, func), (_cc, _nc, tottime, _ct, _callers) in stats.stats.items():  # type: ignore
        where = f"{filename}:{func}"
        if not any(mark in func for mark in GROUPS[0][1]):
            top.append((tottime, f"{'/'.join(Path(filename).parts[-2:])}:{line}({func})"))
        if "/crew_runtime/offline/" in filename:
            totals["scripted model"] += tottime
            continue
        for name, marks in GROUPS:
            if any(mark in where for mark in marks):
                totals[name] += tottime
                break
    return totals, sorted(top, reverse=True)[:12]


Grouped = tuple[dict[str, float], list[tuple[float, str]]]


def profile_both(
    store: Store, config: Config, svc: Countersign, run_id: str, scenario: Scenario
) -> tuple[Grouped, Grouped]:
    """Profile one resume (executed in this thread) and one live kickoff of the same crew."""
    (review,) = store.list_reviews(run_id=run_id)
    svc.decide(
        review.id, DecisionKind.CHANGES, scenario.feedback(scenario.setup_rounds + 1), by="U1"
    )
    lease = timedelta(seconds=60)
    run = store.claim_run("bench:profile", lease)
    assert run is not None
    assert run.id == run_id
    ours: list[cProfile.Profile] = []
    with profiled(ours):
        ctx = RunContext(run, store, config.get(run.crew), lease)
        execute(store, config, ctx)
    live: list[cProfile.Profile] = []
    with profiled(live):
        live_kickoff(scenario)
    return grouped(ours), grouped(live)


# --------------------------------------------------------------------------- driver


def run_scenario(
    args: argparse.Namespace, url: str, workdir: Path, scenario: Scenario, compare: bool
) -> dict:
    """Time resumes of one crew at one size on both paths; with ``compare``, also CrewAI
    running the same turns itself (b) and the 300 ms model (c)."""
    log = workdir / "crewai-console.log"
    config = load_config(c.write_config(workdir))
    store = TimedStore.open(url)
    svc = Countersign(store, config)
    name = f"{scenario.name}/{scenario.turns}"
    snap_runs, journal_runs = 1 + args.reps, 1 + args.journal_reps  # one warm-up each
    slow_reps = args.slow_reps if compare else 0
    with_snapshot = snap_runs + slow_reps + (1 if args.profile else 0)
    say(f"  {name}: preparing a run, {with_snapshot} + {journal_runs} copies ...")
    with quiet(log):
        c.LLM_DELAY["seconds"] = 0.0
        snap_ids, journal_ids = prepare_runs(
            store, config, svc, scenario, [with_snapshot, journal_runs]
        )
    counts: dict[str, int] = {}
    for entry in store.load_journal(snap_ids[0]):
        counts[entry.kind] = counts.get(entry.kind, 0) + 1

    # As `countersign worker` does before its loop (and `serve` before it listens): what is
    # built so far stays out of the collector's full passes.
    gc.freeze()
    # A long poll: the worker is woken by the decision, as the bot does (LISTEN/NOTIFY on PG).
    worker = Worker(store, config, WorkerSettings(concurrency=1, poll=timedelta(seconds=5)))
    thread = threading.Thread(target=worker.run, name="bench-worker", daemon=True)
    thread.start()
    snap: list[Resume] = []
    journal_path: list[Resume] = []
    live: list[Live] = []
    slow: list[Resume] = []
    rerun: list[Live] = []
    say(f"  {name}: {args.reps} x snapshot, {args.journal_reps} x journal, instant model ...")
    try:
        with quiet(log):
            # Side by side, alternating, so that the machine's noise hits all alike.
            for n in range(max(snap_runs, journal_runs)):
                if n < snap_runs:
                    snap.append(resume(store, svc, worker, snap_ids[n], scenario))
                if n < journal_runs:
                    journal_path.append(resume(store, svc, worker, journal_ids[n], scenario))
                    if compare:
                        live.append(live_kickoff(scenario))
            snap, journal_path, live = snap[1:], journal_path[1:], live[1:]  # warm-ups
        if compare:
            say(f"  {name}: {slow_reps} x resume and re-run, 300 ms model ...")
            with quiet(log):
                c.LLM_DELAY["seconds"] = 0.3
                for run_id in snap_ids[snap_runs : snap_runs + slow_reps]:
                    slow.append(resume(store, svc, worker, run_id, scenario))
                    rerun.append(live_kickoff(scenario))
                c.LLM_DELAY["seconds"] = 0.0
    finally:
        worker.stop()
        thread.join()
    assert all(x.stats.get("snapshot") == 1 for x in snap), "a snapshot was not used"
    assert not any(x.stats.get("snapshot") for x in journal_path)
    profile = None
    if args.profile:
        say(f"  {name}: profiling one resume and one live kickoff ...")
        with quiet(log):
            profile = profile_both(store, config, svc, snap_ids[-1], scenario)
    store.close()
    return {
        "scenario": scenario,
        "journal": counts,
        "snapshot_path": snap,
        "journal_path": journal_path,
        "live": live,
        "slow": slow,
        "rerun": rerun,
        "profile": profile,
    }


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


def pct(ours: float, theirs: float) -> str:
    return f"{(ours / theirs - 1) * 100:+.0f}%"


def report(results: list[dict[str, Any]], backend: str) -> str:
    med = c.median
    rows_a, rows_b, rows_c = [], [], []
    for r in results:
        scenario: Scenario = r["scenario"]
        journal_rows = ", ".join(f"{n} {k}" for k, n in sorted(r["journal"].items()))
        for path in ("snapshot", "journal"):
            resumes: list[Resume] = r[f"{path}_path"]
            firsts = [x.to_first_live for x in resumes]
            first, claim = med(firsts), med([x.to_claim for x in resumes])
            rows_a.append(
                [
                    f"{scenario.name} ({journal_rows}; {scenario.setup_rounds} decisions)",
                    path,
                    len(resumes),
                    ms(first),
                    ms(c.p99(firsts)),
                    f"{ms(min(firsts))}-{ms(max(firsts))}",
                    ms(med([x.cpu_to_first_live for x in resumes])),
                    ms(c.p99([x.cpu_to_first_live for x in resumes])),
                    ms(claim),
                    ms(first - claim),
                    ms(med([x.replay_reads for x in resumes])),
                    ms(med([x.hashing for x in resumes])),
                    resumes[0].stats.get("llm_replayed", 0),
                ]
            )
        live: list[Live] = r["live"]
        if not live:
            continue
        journal_path: list[Resume] = r["journal_path"]
        turns = scenario.turns
        first = med([x.to_first_live for x in journal_path])
        theirs = med([x.to_call_31 for x in live])
        ours_cpu = med([x.cpu_to_first_live for x in journal_path])
        theirs_cpu = med([x.cpu_to_call_31 for x in live])
        rows_b.append(
            [
                f"{scenario.name}/{turns}",
                ms(first / turns),
                ms(theirs / turns),
                pct(first, theirs),
                ms(ours_cpu / turns),
                ms(theirs_cpu / turns),
                pct(ours_cpu, theirs_cpu),
            ]
        )
        ours_s = med([x.to_next_review for x in r["slow"]])
        rerun_s = med([x.to_next_review for x in r["rerun"]])
        rows_c.append(
            [
                f"{scenario.name}/{turns}",
                f"{ours_s:.2f}",
                med([x.llm_calls for x in r["slow"]]),
                f"{rerun_s:.2f}",
                med([x.llm_calls for x in r["rerun"]]),
                f"{rerun_s / ours_s:.1f}x",
            ]
        )
    lines = [
        f"Resume of a run with recorded LLM turns ({backend}, warm worker)",
        "",
        "(a) decide() returned -> first live LLM call, ms (medians and p99; goal < 100 ms, < 50 ms "
        "p99 at 1,000 turns); CPU: this "
        "process's CPU time meanwhile, all threads",
        "",
        c.table(
            [
                "crew",
                "path",
                "runs",
                "median",
                "p99",
                "min-max",
                "CPU",
                "CPU p99",
                "to claim",
                "claim -> live",
                "DB reads",
                "prompt hashes",
                "turns replayed",
            ],
            rows_a,
        ),
    ]
    if rows_b:
        lines += [
            "",
            "(b) per recorded turn: journal replay vs CrewAI running the turn itself (instant "
            "model), ms; medians, measured alternately",
            "",
            c.table(
                [
                    "crew",
                    "ours wall",
                    "CrewAI wall",
                    "overhead",
                    "ours CPU",
                    "CrewAI CPU",
                    "overhead",
                ],
                rows_b,
            ),
            "",
            "(c) with a 300 ms model: until the next draft is ready for review (medians)",
            "",
            c.table(
                ["crew", "resume s", "LLM calls", "re-run s", "LLM calls", "re-run / resume"],
                rows_c,
            ),
        ]
    for r in results:
        if r["profile"] is None:
            continue
        (ours, top), (live, _) = r["profile"]
        rows = [[name, ms(ours[name]), ms(live[name])] for name, _ in GROUPS]
        rows.append(["total", ms(sum(ours.values())), ms(sum(live.values()))])
        hot = [[ms(t), where] for t, where in top]
        lines += [
            "",
            f"cProfile, all threads, {r['scenario'].name}/{r['scenario'].turns}: tottime by "
            "owner, ms "
            f"(one resume to its next review vs one live kickoff)",
            "",
            c.table(["owner", "resume", "CrewAI live"], rows),
            "",
            "hottest functions of the resume (tottime, waits excluded)",
            "",
            c.table(["ms", "function"], hot),
        ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    c.add_database_arg(parser)
    parser.add_argument("--reps", type=int, default=15, help="snapshot resumes per crew (a)")
    parser.add_argument(
        "--journal-reps", type=int, default=5, help="journal replays per crew (a, b)"
    )
    parser.add_argument(
        "--turns",
        type=int,
        nargs="+",
        default=[30, 300],
        help="recorded turns (multiples of 3 unless --only review)",
    )
    parser.add_argument("--slow-reps", type=int, default=3, help="repetitions of (c)")
    parser.add_argument("--profile", action="store_true", help="cProfile one resume per crew")
    parser.add_argument("--only", choices=sorted(CREWS), help="one crew only")
    args = parser.parse_args()
    if min(args.reps, args.journal_reps, args.slow_reps) < 1:
        parser.error("--reps, --journal-reps and --slow-reps must be at least 1")
    if any(turns < 6 or (turns % 3 and args.only != "review") for turns in args.turns):
        parser.error("--turns: from 6; multiples of 3 unless --only review")
    # JournalLLM does not forward get_input_tokens_count, so CrewAI logs a warning on every
    # turn (docs/benchmarks.md); the records are still made, only not printed.
    logging.getLogger("crewai.llms.base_llm").addHandler(logging.NullHandler())
    journal_llm.prompt_hash = _timed_prompt_hash  # type: ignore[assignment]
    say(f"resume.py on {c.machine()}")
    smallest = min(args.turns)
    scenarios = [
        Scenario(name, turns)
        for turns in sorted(args.turns)
        for name in sorted(CREWS)
        if args.only in (None, name)
    ]
    with c.database(args.database_url) as (url, workdir):
        results = [
            run_scenario(args, url, workdir, s, compare=s.turns == smallest) for s in scenarios
        ]
        backend = c.backend(url)
    say("")
    say(report(results, backend))


if __name__ == "__main__":
    main()
