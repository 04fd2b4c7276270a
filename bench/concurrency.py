"""How many crews one worker process executes at once: throughput against the ideal.

Real crews spend almost all their time waiting on the model. Here every LLM call waits a fixed
``--delay`` (1 s) in a local stand-in of OpenAI's API (``tests/support/openai_standin.py``), reached
over HTTP by CrewAI's real OpenAI provider, so a worker at ``--concurrency N`` executing N
runs at once could at best make N / delay calls a second. For each N (``--n 1,10,50,200``)
and each database (``--backends sqlite,postgres``), one ``countersign worker --concurrency N``
is started, N runs of ``bench/concurrency_crews.py:team`` (three agents, a lookup tool, the
last task reviewed: 12 LLM calls) are queued at once, every review is approved as soon as it
opens, and the run's end is awaited. Printed per row:

- **throughput**: LLM calls a second over the whole batch and runs a minute, and the calls'
  rate as a fraction of the ideal N / delay (the batch's first call to its last answer;
  claiming N runs, the review's round trip and each run's setup count against it);
- **sched p50/p99**: between the stand-in's answer to a run and that run's next call (what
  the worker spends per call: the provider's parsing, CrewAI's loop, the journal's write,
  the lease's renewal, and waiting for a thread, a connection or SQLite's write lock);
- **RSS max, threads max** of the worker, sampled every 0.2 s;
- **worker CPU/call**: the worker's CPU time (all threads) over the batch, per LLM call: what
  the machine's load does not change much, and what sizes a host (one CPU executes about
  1000 / that many calls a second);
- **leases lost** (the worker's log) and **correct**: runs that succeeded with their final
  answer, every review decided once, no request the stand-in refused.

Run: ``.venv/bin/python bench/concurrency.py [--n 1,10,50,200] [--backends sqlite,postgres]
[--delay 1] [--lookups 3] [--worker-args "..."]``. ``--worker-args`` adds options to the
worker's command line (``--worker-args "--lease 60"``); ``--checkout DIR`` runs another
checkout's worker (a ``git worktree`` of main, say) against the same stand-in, to compare.
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import shlex
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from _common import BENCH, PG_DEFAULT, ROOT, database, machine, table

# isort: split
from concurrency_crews import scripts

from storage import DecisionKind, NewDecision, RunStatus, Store
from tests.support.openai_standin import ChatRequest, OpenAIStandIn

CONFIG = '[crews.team]\nfactory = "concurrency_crews:team"\ndescription = "bench"\n'
TOPIC = re.compile(r"bench-(\d+)-")


@dataclass
class Row:
    backend: str
    n: int
    calls: int
    seconds: float
    ideal: float
    sched: list[float]
    rss_kib: int
    threads: int
    lost: int
    correct: int
    cpu: float  # the worker's CPU seconds over the batch

    def cells(self) -> list[str]:
        rate = self.calls / self.seconds if self.seconds else 0.0
        ordered = sorted(self.sched) or [0.0]
        p50 = ordered[len(ordered) // 2]
        p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
        return [
            self.backend,
            str(self.n),
            f"{rate:.1f}",
            f"{self.n * 60 / self.seconds:.0f}" if self.seconds else "-",
            f"{rate / self.ideal:.0%}",
            f"{p50 * 1000:.0f} / {p99 * 1000:.0f} ms",
            f"{self.rss_kib / 1024:.0f} MiB",
            str(self.threads),
            str(self.lost),
            f"{self.correct}/{self.n}",
            f"{self.cpu * 1000 / max(self.calls, 1):.0f} ms",
        ]


HEADERS = [
    "database",
    "N",
    "LLM calls/s",
    "runs/min",
    "of ideal",
    "sched p50 / p99",
    "RSS max",
    "threads",
    "leases lost",
    "correct",
    "worker CPU/call",
]


def cpu_seconds(pid: int) -> float:
    """User and system CPU time ``pid`` has used, all threads (``/proc/PID/stat``)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc(pid: int) -> tuple[int, int]:
    """(VmRSS KiB, Threads) of ``pid``."""
    found = {"VmRSS": 0, "Threads": 0}
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key in found:
                    found[key] = int(value.split()[0])
    except OSError:
        pass
    return found["VmRSS"], found["Threads"]


def scheduling_delays(requests: list[ChatRequest]) -> list[float]:
    """For each run, from each answer to the run's next call."""
    by_run: dict[str, list[ChatRequest]] = {}
    for request in requests:
        found = TOPIC.search(request.conversation())
        if found:
            by_run.setdefault(found.group(1), []).append(request)
    gaps = []
    for calls in by_run.values():
        calls.sort(key=lambda r: r.received)
        gaps += [b.received - a.answered for a, b in itertools.pairwise(calls)]
    return gaps


def measure(url: str, workdir: Path, n: int, args: argparse.Namespace) -> Row:
    config = workdir / "countersign.toml"
    config.write_text(CONFIG)
    store = Store.open(url)
    log_path = workdir / f"worker-{n}.log"
    with OpenAIStandIn(scripts(args.lookups), delay=args.delay) as standin:
        checkout = Path(args.checkout).resolve() if args.checkout else ROOT
        env = {
            **os.environ,
            **standin.env(),
            "DATABASE_URL": url,
            "LOG_LEVEL": "INFO",
            "PYTHONPATH": os.pathsep.join([str(checkout), str(BENCH), str(ROOT)]),
        }
        argv = [sys.executable, "-m", "bot", "--config", str(config), "worker"]
        argv += ["--concurrency", str(n), *shlex.split(args.worker_args)]
        with log_path.open("w") as log:
            worker = subprocess.Popen(argv, env=env, stdout=log, stderr=log, cwd=checkout)
        print(f"  worker {worker.pid}: {' '.join(argv[3:])}", flush=True)
        peak = [0, 0]
        stop = threading.Event()

        def sample() -> None:
            while not stop.wait(0.2):
                rss, threads = proc(worker.pid)
                peak[0], peak[1] = max(peak[0], rss), max(peak[1], threads)

        try:
            deadline = time.monotonic() + 180
            while " started: " not in log_path.read_text():
                if worker.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the worker did not start:\n{log_path.read_text()}")
                time.sleep(0.1)
            threading.Thread(target=sample, daemon=True).start()
            cpu_before = cpu_seconds(worker.pid)
            ids = [store.create_run("team", {"topic": f"bench-{i}-"}).id for i in range(n)]
            decided: set[str] = set()
            deadline = time.monotonic() + args.timeout
            while True:
                for review in store.list_reviews():
                    if review.id not in decided:
                        store.decide(review.id, NewDecision(DecisionKind.APPROVE, "U0BENCH"))
                        decided.add(review.id)
                if (
                    store.count_runs(RunStatus.QUEUED)
                    + store.count_runs(RunStatus.RUNNING)
                    + store.count_runs(RunStatus.WAITING)
                    == 0
                ):
                    break
                if time.monotonic() > deadline or worker.poll() is not None:
                    raise RuntimeError(f"runs left after {args.timeout} s; see {log_path}")
                time.sleep(0.05)
            cpu = cpu_seconds(worker.pid) - cpu_before
        finally:
            stop.set()
            worker.terminate()
            worker.wait(timeout=60)
        requests = standin.requests()
        problems = standin.problems
    runs = [store.get_run(run_id) for run_id in ids]
    correct = sum(
        run.status == RunStatus.SUCCEEDED and "Report" in (run.output or "") for run in runs
    )
    if problems or len(decided) != n:
        correct = 0
        print(f"  stand-in refused {len(problems)} request(s), {len(decided)} reviews", flush=True)
    store.close()
    lost = log_path.read_text().count("lease lost")
    if args.logs:
        Path(args.logs).mkdir(parents=True, exist_ok=True)
        (Path(args.logs) / log_path.name).write_text(log_path.read_text())
    first = min(r.received for r in requests)
    last = max(r.answered for r in requests)
    return Row(
        backend="PostgreSQL" if url.startswith("postgres") else "SQLite",
        n=n,
        calls=len(requests),
        seconds=last - first,
        ideal=n / args.delay,
        sched=scheduling_delays(requests),
        rss_kib=peak[0],
        threads=peak[1],
        lost=lost,
        correct=correct,
        cpu=cpu,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--n", default="1,10,50,200", help="concurrencies, comma-separated")
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--database-url", default=PG_DEFAULT, help="the PostgreSQL database")
    parser.add_argument("--delay", type=float, default=1.0, help="seconds the model takes")
    parser.add_argument("--lookups", type=int, default=3, help="tool calls per task")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per batch")
    parser.add_argument("--worker-args", default="", help="more options for the worker")
    parser.add_argument("--checkout", default="", help="run this checkout's worker instead")
    parser.add_argument("--logs", default="", help="keep the workers' logs in this directory")
    args = parser.parse_args()
    print(machine(), flush=True)
    rows = []
    for backend in args.backends.split(","):
        for n in [int(v) for v in args.n.split(",")]:
            url = None if backend == "sqlite" else args.database_url
            with database(url) as (db_url, workdir):
                load = os.getloadavg()[0]
                row = measure(db_url, workdir, n, args)
                rows.append(row)
                print(
                    " | ".join(row.cells()) + f" (load {load:.1f}-{os.getloadavg()[0]:.1f})",
                    flush=True,
                )
    print()
    print(table(HEADERS, [row.cells() for row in rows]))


if __name__ == "__main__":
    main()
