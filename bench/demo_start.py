"""Try it in minutes: how long `countersign demo` takes to be usable, and to answer a person.

Each repetition starts the demo as a reader does (its own process group, a fresh state
directory), and times, through the sandbox page's own routes:

- start: from the command to the printed URL (the bot, the sandbox and the scheduler up;
  the worker process imports CrewAI meanwhile);
- first review: from `/crew run writer topic=otters` to the outline's review in the thread
  (the first run also waits for the worker's CrewAI import);
- resume: from a click on Approve to the article's review (the run resumed from the
  database, its outline task replayed, the article written);
- stop: from Ctrl+C to every process of the demo gone.

Building `.venv` is not timed here (it depends on the network): docs/benchmarks.md gives
`make venv` from a fresh clone, measured once.

Usage: python bench/demo_start.py [--reps N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import _common as c  # first: sets CrewAI's opt-outs, puts the repo on sys.path

from tests.support.demo_process import DemoProcess, SandboxClient, pending_button, run_thread

PHASES = ("start", "first review", "resume", "stop")


def one(workdir: Path) -> dict[str, float]:
    took: dict[str, float] = {}
    began = time.perf_counter()
    demo = DemoProcess([sys.executable, "-m", "bot", "demo", "--port", "0"], workdir)
    took["start"] = time.perf_counter() - began
    try:
        page = SandboxClient(demo.url)
        began = time.perf_counter()
        page.post("send", {"text": "/crew run writer topic=otters"})
        outline = page.wait(
            lambda s: (t := run_thread(s, "writer")) and pending_button(t, "approve"),
            "the outline's review",
            timeout=120,
        )
        took["first review"] = time.perf_counter() - began
        began = time.perf_counter()
        page.post("click", outline)
        page.wait(
            lambda s: (
                (t := run_thread(s, "writer"))
                and (b := pending_button(t, "approve"))
                and b["ts"] != outline["ts"]
                and b
            ),
            "the article's review",
            timeout=120,
        )
        took["resume"] = time.perf_counter() - began
    finally:
        began = time.perf_counter()
        demo.stop()
        took["stop"] = time.perf_counter() - began
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=5, help="demo starts to time")
    args = parser.parse_args()
    if args.reps < 1:
        parser.error("--reps must be at least 1")
    print(c.machine())
    runs = []
    for rep in range(args.reps):
        with tempfile.TemporaryDirectory(prefix="countersign-demo-bench-") as tmp:
            runs.append(one(Path(tmp)))
        print(f"rep {rep + 1}: " + ", ".join(f"{k} {v:.2f} s" for k, v in runs[-1].items()))
    print()
    print("| phase | median s | min s | max s |")
    print("|---|---|---|---|")
    for phase in PHASES:
        values = [run[phase] for run in runs]
        print(
            f"| {phase} | {statistics.median(values):.2f} | {min(values):.2f} | {max(values):.2f} |"
        )


if __name__ == "__main__":
    main()
