"""How soon a batch approval of many reviews from the Home tab has every run resumed.

The claim: a reviewer approving 100 pending reviews at once from the Home tab (Decide
several…, all ticked, the confirmation clicked) has the last of the 100 runs claimed by a
worker within 5 s on this machine, each decision recorded exactly once.

The real bot (``Deployment``, its HTTP endpoint, inbox, dispatcher and Home tab) serves the
Slack stand-in in this process, with no workers of its own; one real ``countersign worker``
process claims the runs. The 100 runs are paused at one task review each through the store,
as a worker pauses them, on a crew the worker's configuration does not have: the worker
fails each in the transaction after its claim, so what is measured is the batch (100
decisions through the one decision path, each policy-checked), the wake-up and the claims,
not a crew's work. Measured from the instant before the confirmation's click: when the last
decision was recorded (its ``created_at``) and when the last run was claimed (the worker's
write, ``updated_at``; the same machine's clock). Then every review has exactly one decision.

Run: ``.venv/bin/python bench/batch.py [--reviews 100] [--at-once 1,8] [--database-url URL]``
(default: both a SQLite file and the local PostgreSQL test server; the batch recorded one
decision at a time and as the bot does, side by side). About three minutes on 2 CPUs.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import _common as c  # first: sets CrewAI's opt-outs, puts the repo on sys.path
from sqlalchemy import func, select

from bot.slack import handlers
from bot.slack.batch_payloads import CONFIRM
from bot.slack.payloads import action_id
from storage import RunStatus, Store
from storage.base import utc_now
from storage.schema import decisions
from tests.support.batch import answered, choose, from_home, paused
from tests.support.slack_harness import ALICE, CHANNEL, configured, slack_and_bot, wait_until

GOAL = 5.0
CREW = "batch"  # the bot's; not the worker's, which fails its runs as it claims them
CONFIG = f"""
[crews.{CREW}]
factory = "_common:draft"
channel = "{CHANNEL}"
reviewers = ["{ALICE}"]
"""


def worker(url: str, workdir: Path) -> subprocess.Popen[bytes]:
    """A real ``countersign worker`` on ``url`` whose configuration lacks :data:`CREW`."""
    env = {**os.environ, "DATABASE_URL": url, "COUNTERSIGN_CONFIG": str(c.write_config(workdir))}
    env["PYTHONPATH"] = os.pathsep.join([str(c.ROOT), str(c.BENCH)])
    with (workdir / "worker.log").open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "bot", "worker", "--poll", "0.5"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def failed(store: Store, run_ids: list[str], timeout: float) -> list[datetime]:
    """When the worker failed each run (it claimed it), once all are."""

    def done() -> list[datetime] | None:
        runs = [store.get_run(r) for r in run_ids]
        ended = all(r.status == RunStatus.FAILED for r in runs)
        return [r.updated_at for r in runs] if ended else None

    return wait_until(done, timeout=timeout, what="the worker to claim every run")


def measure(url: str, workdir: Path, reviews: int, at_once: int) -> list[str]:
    """One batch of ``reviews`` on ``url``, recorded ``at_once`` at a time: a row."""
    handlers.BATCH_AT_ONCE = at_once  # read by each batch as it starts
    with configured(workdir, url, CONFIG) as (config, store):
        review_ids = paused(store, *[CREW] * reviews)
        run_ids = [store.get_review(r).run_id for r in review_ids]
        proc = worker(url, workdir)
        try:
            warm = store.create_run(CREW, {}).id  # the worker is up (it imported CrewAI)
            failed(store, [warm], timeout=180)
            with slack_and_bot(config, store, workers=0) as (slack, _bot):
                from_home(slack, ALICE)
                _, confirm = choose(slack, ALICE)
                started = utc_now()
                clicked = time.perf_counter()
                slack.click_in_view(ALICE, confirm["id"], action_id(CONFIRM))
                claimed = failed(store, run_ids, timeout=120)
                last_claim = (max(claimed) - started).total_seconds()
                said = answered(slack, ALICE, confirm["id"])
                answer = time.perf_counter() - clicked
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
        recorded = [store.get_review(r).decision for r in review_ids]
        assert all(d is not None and d.decided_by == ALICE for d in recorded), "not all recorded"
        last_decision = (max(d.created_at for d in recorded if d) - started).total_seconds()
        with store.engine.connect() as conn:
            rows = conn.execute(
                select(func.count()).where(decisions.c.review_id.in_(review_ids))
            ).scalar()
        assert rows == reviews, f"{rows} decisions for {reviews} reviews"
        assert f"Approved {reviews} reviews" in said, said
    return [
        c.backend(url),
        str(reviews),
        str(at_once),
        f"{last_decision:.2f}",
        f"{last_claim:.2f}",
        f"{answer:.2f}",
        str(rows),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reviews", type=int, default=100)
    parser.add_argument(
        "--at-once",
        default=f"1,{handlers.BATCH_AT_ONCE}",
        help="how many decisions of the batch are recorded at once, each value side by side "
        f"(default: one at a time, and the bot's {handlers.BATCH_AT_ONCE})",
    )
    c.add_database_arg(parser)
    args = parser.parse_args()
    urls = [args.database_url] if args.database_url else [None, c.PG_DEFAULT]
    rows = []
    for url in urls:
        for at_once in (int(n) for n in args.at_once.split(",")):
            with c.database(url) as (db_url, workdir):
                rows.append(measure(db_url, workdir, args.reviews, at_once))
    print(f"load: {os.getloadavg()[0]:.1f}; {c.machine()}")
    headers = ["backend", "reviews", "at once", "last decision s", "last run claimed s"]
    headers.append("answer shown s")
    print(c.table([*headers, "decisions"], rows))
    default = [r for r in rows if r[2] == str(handlers.BATCH_AT_ONCE)] or rows
    worst = max(float(r[4]) for r in default)
    print(
        f"goal: last run claimed < {GOAL:.0f} s (at once {handlers.BATCH_AT_ONCE}): "
        f"{'met' if worst < GOAL else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
