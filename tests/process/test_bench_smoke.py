"""`make bench` runs: each benchmark its recipe names, at a size that takes seconds, not minutes.

The figures are not checked here (timings belong in docs/benchmarks.md, not in tests); what is
checked is that every script `make bench` runs (docs/README.md) starts, measures and reports.
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from tests.support.database import PG_BASE, pg_required
from tests.support.zygote import Zygote

ROOT = Path(__file__).resolve().parents[2]

SMALL = {
    "bench/waiting.py": (["--runs", "20", "--real", "2", "--blocking", "2"], "goal: "),
    "bench/resume.py": (
        [
            "--reps",
            "1",
            "--journal-reps",
            "1",
            "--slow-reps",
            "1",
            "--only",
            "review",
            "--turns",
            "6",
        ],
        "re-run",
    ),
    "bench/ack_latency.py": (
        ["--requests", "20", "--bursts", "1", "--workers", "1", "--warmup", "1", "--no-floor"],
        "Goal p99",
    ),
    "bench/demo_start.py": (["--reps", "1"], "| first review |"),
    "bench/outbox.py": (["--runs", "5"], "commits/row"),
    "bench/wakeup.py": (["--samples", "3"], "goal p99"),
    # One batch size (grouped: 2 at once) on both backends: a worker process each.
    "bench/batch.py": (["--reviews", "5", "--at-once", "2"], "goal: last run claimed"),
    "bench/rules.py": (["--runs", "2", "--calls", "3"], "goal p99 < 1 ms"),
    "bench/concurrency.py": (
        ["--n", "3", "--backends", "sqlite", "--delay", "0.2", "--lookups", "1"],
        "| 3/3     |",
    ),
    "bench/chaos.py": (
        [
            "--runs",
            "3",
            "--workers",
            "2",
            "--start-every",
            "1",
            "--fault-every",
            "6",
            "--seconds",
            "300",
        ],
        "goal met",
    ),
}


# Its load generator is a multiprocessing child, which pickles classes of the script's
# ``__main__``: in a zygote's fork, ``__main__`` is the zygote's module.
COLD = {"bench/ack_latency.py"}


def make_bench_scripts() -> list[str]:
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^bench:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert recipe, "no bench target in the Makefile"
    return re.findall(r"(bench/\w+\.py)", recipe.group(1))


def test_every_benchmark_of_make_bench_runs() -> None:
    """Each script `make bench` runs is sized below (and so run by the test after this)."""
    assert set(make_bench_scripts()) == set(SMALL), "a benchmark was added to make bench: size it"


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(SMALL))
def test_the_benchmark_runs_at_a_small_size(script: str, tmp_path: Path) -> None:
    """Forked from the zygote, which imported CrewAI and the bot already (seconds a script
    otherwise); what the script starts (serve, workers, the demo) starts as it does. Except
    the scripts in :data:`COLD`, started as ``python SCRIPT``."""
    args, expected = SMALL[script]
    if script in COLD:
        done = subprocess.run(
            [sys.executable, script, *args], cwd=ROOT, capture_output=True, text=True, timeout=420
        )
        out = done.stdout + done.stderr
        code = done.returncode
    else:
        forked = Zygote.fork(args, dict(os.environ), ROOT, tmp_path / "bench.log", ROOT / script)
        try:
            code = forked.wait(timeout=420)  # a loaded machine: the scripts stop well before
        finally:
            if forked.poll() is None:
                forked.kill()
                forked.wait(30)
        out = forked.stdout
    assert code == 0, f"{script}:\n{out}"
    assert expected in out, f"{script} printed no figures:\n{out}"


@pytest.mark.slow
def test_the_scale_benchmark_runs_at_a_small_size() -> None:
    """bench/scale.py (a million runs, minutes: not part of `make bench`) seeds, measures
    every operation through the Store, prints their plans, and drops its schema. Without its
    worker (which imports CrewAI: seconds), so that the test takes a few."""
    pg_required()
    schema = f"bench_scale_{secrets.token_hex(4)}"
    done = subprocess.run(
        [
            *(sys.executable, "bench/scale.py", "--runs", "300", "--samples", "5"),
            *("--rss-seconds", "0", "--database-url", PG_BASE, "--schema", schema),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    for figure in ("run by its thread", "pending reviews", "claim a run", "rows/s", "peak RSS"):
        assert figure in done.stdout, f"no {figure!r} figure:\n{done.stdout}"
    assert "Index Scan" in done.stdout, f"no plans printed:\n{done.stdout}"
    engine = create_engine(PG_BASE)
    try:
        with engine.connect() as conn:
            left = conn.execute(
                text("SELECT count(*) FROM pg_namespace WHERE nspname = :s"), {"s": schema}
            ).scalar_one()
    finally:
        engine.dispose()
    assert left == 0, "the benchmark left its schema behind"
