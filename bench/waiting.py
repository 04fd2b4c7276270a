"""Waiting costs nothing: what 10,000 suspended runs cost a Countersign worker.

The claim: a run waiting for a person is rows in the database, not a thread or an object in
a worker, so a worker's threads and memory do not grow with the number of waiting runs.
The comparison: CrewAI's own ``Task(human_input=True)`` waits inside ``input()``, one blocked
thread (and one live crew) per waiting run.

Two parts, each in a fresh process started by this script, one after the other, both
warmed up the same way (CrewAI imported, a few crews run to their first review):

``countersign``
    One worker process. Baseline threads and RSS; then ``--real`` runs (default 200) of a
    one-task crew with ``Task(human_input=True)`` are executed for real by
    :class:`crew_runtime.Worker` until each suspends on its task review; then the rest,
    up to ``--runs`` (default 10,000), are created with the storage calls the runtime makes
    for such a run (``create_run``, ``claim_run``, ``append_journal`` of the recorded LLM
    turn, ``suspend_run`` with the same ``NewReview``), because executing 10,000 crews takes
    ~11 minutes on 2 cores. Measured again with every run waiting in the database, and
    checked: no ``RunContext``/``Crew``/``Agent``/``Task`` of a waiting run is alive.

``crewai``
    ``--blocking`` (default 200) crews like the one above, each ``crew.kickoff()`` in its
    own thread with CrewAI's default provider, whose ``_prompt_input`` (the ``input()``
    call) is replaced by a wait on a ``threading.Event``. Measured while all of them wait,
    then released (an empty answer approves) and measured again.

Figures are threads (``threading.active_count()`` and ``Threads`` of /proc/self/status)
and RSS (``VmRSS``), after ``gc.collect()`` and glibc ``malloc_trim(0)`` (RSS without the
trim is shown too). No tracemalloc: it would add its own memory.

Run: ``.venv/bin/python bench/waiting.py [--runs 10000] [--real 200] [--blocking 200]
[--database-url URL]``. About 3 minutes on SQLite, 7 on PostgreSQL.
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import _common as c  # first: sets CrewAI's opt-outs, puts the repo on sys.path
from crewai import Agent, Crew, Task
from crewai.core.providers.human_input import SyncHumanInputProvider, set_provider

from crew_runtime import Countersign, Worker, WorkerSettings, load_config
from crew_runtime.context import RunContext
from crew_runtime.journal_llm import JournalLLM
from storage import NewReview, ReviewKind, RunStatus

WARMUP = 10
# CrewAI leaves one event scope open on the worker thread per paused run, and fails every run
# after ~97 on one thread (see docs/benchmarks.md); fresh pool threads every batch avoid it.
BATCH = 80


def snapshot() -> dict[str, int]:
    """Threads and RSS (KiB), after a full collection, before and after malloc_trim."""
    gc.collect()
    objects = len(gc.get_objects())
    raw = c.proc_status()["VmRSS"]
    c.trim()
    status = c.proc_status()
    return {
        "names": sorted({t.name.rstrip("0123456789") for t in threading.enumerate()}),
        "py_objects": objects,
        "alloc_blocks": sys.getallocatedblocks(),
        "py_threads": threading.active_count(),
        "os_threads": status["Threads"],
        "rss_raw_kib": raw,
        "rss_kib": status["VmRSS"],
    }


def alive(*types: type) -> dict[str, int]:
    gc.collect()
    counts = dict.fromkeys((t.__name__ for t in types), 0)
    for obj in gc.get_objects():
        name = type(obj).__name__
        if name in counts and isinstance(obj, types):
            counts[name] += 1
    return counts


# ------------------------------------------------------------------- countersign part


def execute_real(store: Any, config: Any, svc: Countersign, n: int, tag: str) -> list[str]:
    """Start ``n`` runs and let workers execute them until each one suspends.

    A batch at a time, each with a new :class:`Worker` (so new pool threads): see ``BATCH``.
    """
    settings = WorkerSettings(concurrency=2, poll=timedelta(seconds=0.02))
    ids: list[str] = []
    for start in range(0, n, BATCH):
        for i in range(start, min(n, start + BATCH)):
            ids.append(svc.start_run("draft", {"topic": f"{tag} {i}"}).id)
        Worker(store, config, settings).run(until_idle=True)
    return ids


def create_waiting(store: Any, n: int, template: str, worker_id: str) -> None:
    """Make ``n`` waiting runs with the storage calls the runtime makes for one real run."""
    (review,) = store.list_reviews(run_id=template)
    journal = store.load_journal(template)
    for i in range(n):
        run = store.create_run("draft", {"topic": f"synthetic {i}"})
        claimed = store.claim_run(worker_id, timedelta(seconds=30))
        assert claimed is not None
        assert claimed.id == run.id
        assert claimed.lease_token is not None
        for entry in journal:
            store.append_journal(
                run.id,
                claimed.lease_token,
                stream=entry.stream,
                kind=entry.kind,
                seq=entry.seq,
                payload=entry.payload,
                prompt_hash=entry.prompt_hash,
            )
        ask = NewReview(ReviewKind.TASK_REVIEW, review.stream, review.seq, review.prompt)
        store.suspend_run(run.id, claimed.lease_token, [ask])


def part_countersign(args: argparse.Namespace) -> dict[str, Any]:
    with c.database(args.database_url) as (url, workdir):
        config = load_config(c.write_config(workdir))
        store = c.open_store(url)
        svc = Countersign(store, config)
        execute_real(store, config, svc, WARMUP, "warm-up")
        gc.collect()
        warm_contexts = {o.run.id for o in gc.get_objects() if type(o) is RunContext}
        c.fill_crewai_event_pool()

        before = snapshot()
        t0 = time.perf_counter()
        real_ids = execute_real(store, config, svc, args.real, "real")
        real_s = time.perf_counter() - t0
        after_real = snapshot()

        t0 = time.perf_counter()
        create_waiting(store, args.runs - args.real, real_ids[0], "bench:synthetic")
        synthetic_s = time.perf_counter() - t0
        after = snapshot()

        contexts = [o.run.id for o in gc.get_objects() if type(o) is RunContext]
        objects = alive(RunContext, Crew, Agent, Task, JournalLLM)
        waiting = store.count_runs(RunStatus.WAITING)
        pending = len(store.list_reviews())
        failed = store.count_runs(RunStatus.FAILED)
        store.close()
    measured = args.runs
    assert failed == 0, f"{failed} runs failed"
    assert waiting == measured + WARMUP, (waiting, measured)
    assert pending == measured + WARMUP, (pending, measured)
    assert not set(contexts) - warm_contexts, "a waiting run's RunContext is alive"
    assert after["os_threads"] == before["os_threads"], (before, after)
    return {
        "backend": c.backend(url),
        "runs": measured,
        "real": args.real,
        "real_ms_per_run": real_s / args.real * 1000,
        "synthetic_ms_per_run": synthetic_s / (measured - args.real) * 1000,
        "before": before,
        "after_real": after_real,
        "after": after,
        "objects": objects,
        "warm_contexts": len(warm_contexts),
        "waiting": waiting,
        "pending": pending,
    }


# ------------------------------------------------------------------------ crewai part


class BlockingProvider(SyncHumanInputProvider):
    """CrewAI's console provider, with ``input()`` replaced by a wait for a release."""

    def __init__(self, release: threading.Event, arrived: threading.Semaphore) -> None:
        self.release = release
        self.arrived = arrived

    def _prompt_input(self, crew: Any) -> str:  # type: ignore[override]
        self.arrived.release()
        self.release.wait()
        return ""  # an empty answer approves the draft


def kickoff_blocking(release: threading.Event, arrived: threading.Semaphore, n: int) -> None:
    set_provider(BlockingProvider(release, arrived))
    c.draft({}).kickoff(inputs={"topic": f"blocking {n}"})


def start_blocking(n: int, tag: int) -> tuple[threading.Event, list[threading.Thread]]:
    release = threading.Event()
    arrived = threading.Semaphore(0)
    threads = [
        threading.Thread(target=kickoff_blocking, args=(release, arrived, tag + i), daemon=True)
        for i in range(n)
    ]
    for thread in threads:
        thread.start()
    for _ in threads:
        if not arrived.acquire(timeout=120):
            raise TimeoutError("a crew never reached its human_input prompt")
    return release, threads


def part_crewai(args: argparse.Namespace) -> dict[str, Any]:
    release, threads = start_blocking(WARMUP, 0)
    release.set()
    for thread in threads:
        thread.join()
    c.fill_crewai_event_pool()

    before = snapshot()
    t0 = time.perf_counter()
    release, threads = start_blocking(args.blocking, WARMUP)
    start_s = time.perf_counter() - t0
    waiting = snapshot()
    objects = alive(Crew, Agent, Task)
    release.set()
    for thread in threads:
        thread.join()
    after = snapshot()
    return {
        "runs": args.blocking,
        "ms_per_run": start_s / args.blocking * 1000,
        "before": before,
        "waiting": waiting,
        "after": after,
        "objects": objects,
    }


# --------------------------------------------------------------------------- driver


def child(part: str, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    out = workdir / f"{part}.json"
    log = workdir / f"{part}.log"
    cmd = [sys.executable, __file__, "--part", part, "--result", str(out)]
    cmd += ["--runs", str(args.runs), "--real", str(args.real), "--blocking", str(args.blocking)]
    if args.database_url:
        cmd += ["--database-url", args.database_url]
    print(f"  {part}: running in a fresh process ...", flush=True)
    with log.open("w") as fh:
        done = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        sys.stdout.write(log.read_text()[-4000:])
        raise SystemExit(f"the {part} part failed (exit {done.returncode})")
    result: dict[str, Any] = json.loads(out.read_text())
    return result


HEADERS = ["moment", "py threads", "OS threads", "RSS MB", "RSS MB (no trim)", "Python objects"]


def row(moment: str, snap: dict[str, Any]) -> list[Any]:
    return [
        moment,
        snap["py_threads"],
        snap["os_threads"],
        f"{snap['rss_kib'] / 1024:.1f}",
        f"{snap['rss_raw_kib'] / 1024:.1f}",
        f"{snap['py_objects']:,}",
    ]


def report(cs: dict[str, Any], ca: dict[str, Any]) -> str:
    n, real = cs["runs"], cs["real"]
    lines = [
        f"Countersign worker ({cs['backend']}): {n:,} runs waiting; {real} executed for real "
        f"({cs['real_ms_per_run']:.0f} ms/run), {n - real:,} created with the runtime's "
        f"storage calls ({cs['synthetic_ms_per_run']:.1f} ms/run)",
        "",
        c.table(
            HEADERS,
            [
                row("before (warm, idle)", cs["before"]),
                row(f"{real} real runs waiting", cs["after_real"]),
                row(f"{n:,} runs waiting", cs["after"]),
            ],
        ),
        "",
        f"alive with {n:,} waiting: {cs['objects']}; the RunContext is a warm-up run's "
        f"(CrewAI's event loop pins the context it started in); none is a waiting run's",
        f"in the database: {cs['waiting']:,} waiting runs, {cs['pending']:,} pending reviews "
        f"(incl. {WARMUP} warm-up)",
        "",
        f"CrewAI blocking human_input: {ca['runs']} crews waiting in input(), one thread each "
        f"({ca['ms_per_run']:.0f} ms/run to reach the prompt)",
        "",
        c.table(
            HEADERS,
            [
                row("before (warm)", ca["before"]),
                row(f"{ca['runs']} waiting", ca["waiting"]),
                row("released", ca["after"]),
            ],
        ),
        "",
        f"alive while waiting: {ca['objects']}",
        "",
    ]
    before, after = cs["before"], cs["after"]
    cs_threads = (after["os_threads"] - before["os_threads"]) / n
    cs_kib = (after["rss_kib"] - before["rss_kib"]) / n
    cs_real_kib = (cs["after_real"]["rss_kib"] - before["rss_kib"]) / real
    ca_threads = (ca["waiting"]["os_threads"] - ca["before"]["os_threads"]) / ca["runs"]
    ca_kib = (ca["waiting"]["rss_kib"] - ca["before"]["rss_kib"]) / ca["runs"]
    grow_mb = (after["rss_kib"] - before["rss_kib"]) / 1024
    lines += [
        "Per waiting run",
        "",
        c.table(
            ["", "threads/run", "KB/run", f"at {n:,} waiting runs"],
            [
                [
                    f"Countersign, all {n:,}",
                    f"{cs_threads:.4f}",
                    f"{cs_kib:.2f}",
                    f"+{grow_mb:.1f} MB, +{after['os_threads'] - before['os_threads']} threads",
                ],
                [
                    f"Countersign, first {real} (executed for real)",
                    "0",
                    f"{cs_real_kib:.1f}",
                    "RSS growth while executing, not held per run (see Python objects)",
                ],
                [
                    "CrewAI human_input (blocking)",
                    f"{ca_threads:.2f}",
                    f"{ca_kib:.1f}",
                    f"+{ca_kib * n / 1024:,.0f} MB, +{ca_threads * n:,.0f} threads (extrapolated)",
                ],
            ],
        ),
    ]
    verdict = "PASS" if grow_mb < 20 and cs_threads == 0 else "FAIL"
    lines += ["", f"goal: no thread and < 20 MB for {n:,} waiting runs: {verdict}"]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    c.add_database_arg(parser)
    parser.add_argument("--runs", type=int, default=10_000, help="waiting runs in all")
    parser.add_argument("--real", type=int, default=200, help="of which executed for real")
    parser.add_argument("--blocking", type=int, default=200, help="blocked CrewAI crews")
    parser.add_argument("--part", choices=["countersign", "crewai"], help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.part:
        measure = part_countersign if args.part == "countersign" else part_crewai
        args.result.write_text(json.dumps(measure(args)))
        return
    print(f"waiting.py on {c.machine()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="countersign-bench-") as tmp:
        cs = child("countersign", args, Path(tmp))
        ca = child("crewai", args, Path(tmp))
    print()
    print(report(cs, ca))


if __name__ == "__main__":
    main()
