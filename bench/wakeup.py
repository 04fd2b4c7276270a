"""How soon a worker in another process claims a run once it is queued: LISTEN/NOTIFY vs polling.

The claim: on PostgreSQL, a run queued by one process (a decision, a new run) is claimed by an
idle worker in another process within milliseconds (goal: p99 under 50 ms), where polling alone
takes up to its interval (0.5 s by default), half of it on average.

Two real ``countersign worker`` processes, one after the other, on one PostgreSQL schema: the
default (listening) and ``--no-listen`` (polling only), both with ``--poll 0.5``. This process
queues ``--samples`` runs one at a time, each after a random pause of up to the poll interval (so
the queueing falls anywhere in it), and waits for each to be claimed before the next.
The runs name a crew the configuration does not have, so the worker fails each at once, in the
transaction after its claim: no crew runs, and what is measured is the wake-up and the claim.
Measured: the worker's own timestamp of that write (``updated_at``, same machine, same clock)
minus the instant the queueing transaction had committed here.

Run: ``.venv/bin/python bench/wakeup.py [--samples 100] [--database-url URL]`` (PostgreSQL;
by default the local test server, ``127.0.0.1`` only). About two minutes on 2 CPUs.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import _common as c  # first: sets CrewAI's opt-outs, puts the repo on sys.path

from storage import RunStatus, Store
from storage.base import utc_now

POLL = 0.5
MISSING_CREW = "absent"  # not in the configuration: the worker fails the run as it claims it


def worker(url: str, config: Path, log: Path, *extra: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "DATABASE_URL": url, "COUNTERSIGN_CONFIG": str(config)}
    env["PYTHONPATH"] = str(c.ROOT)
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "bot", "worker", "--poll", str(POLL), *extra],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def claimed(store: Store, run_id: str, timeout: float) -> float:
    """When the worker failed the run it claimed (its clock, as naive UTC), in seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = store.get_run(run_id)
        if run.status == RunStatus.FAILED:
            return run.updated_at.timestamp()
        time.sleep(0.005)
    raise TimeoutError(f"run {run_id} was not claimed within {timeout} s")


def measure(store: Store, samples: int, rng: random.Random) -> list[float]:
    """Latencies (ms) from each queueing's commit to the worker's claim."""
    for _ in range(2):  # the worker is up (it imported CrewAI) and listening, if it listens
        claimed(store, store.create_run(MISSING_CREW, {}).id, timeout=120)
    found = []
    for _ in range(samples):
        time.sleep(rng.uniform(0, POLL))  # anywhere in the worker's poll interval
        run = store.create_run(MISSING_CREW, {})
        committed = utc_now().timestamp()
        found.append(1000 * (claimed(store, run.id, timeout=30) - committed))
    return found


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--database-url", default=c.PG_DEFAULT, help="a PostgreSQL URL")
    args = parser.parse_args()
    if not args.database_url.startswith("postgres"):
        parser.error("wake-ups across processes are PostgreSQL's LISTEN/NOTIFY: give its URL")
    rng = random.Random(args.seed)
    rows = []
    with c.database(args.database_url) as (url, workdir):
        store = c.open_store(url)
        config = c.write_config(workdir)
        for label, extra in (("LISTEN/NOTIFY", ()), ("poll only", ("--no-listen",))):
            proc = worker(url, config, workdir / f"worker-{len(rows)}.log", *extra)
            try:
                latencies = measure(store, args.samples, rng)
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.wait(60)
            rows.append(
                [
                    label,
                    str(len(latencies)),
                    f"{percentile(latencies, 0.5):.1f}",
                    f"{percentile(latencies, 0.99):.1f}",
                    f"{max(latencies):.1f}",
                ]
            )
        store.close()
    print(f"{c.backend(url)}, worker --poll {POLL}; {c.machine()}")
    print(c.table(["wake-up", "runs", "p50 ms", "p99 ms", "max ms"], rows))
    notify_p99 = float(rows[0][3])
    print(f"goal p99 < 50 ms with LISTEN/NOTIFY: {'met' if notify_p99 < 50 else 'NOT met'}")


if __name__ == "__main__":
    main()
