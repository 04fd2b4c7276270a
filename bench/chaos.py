"""Exactly once under faults: runs, clicks and replies while processes stall, die and lose the
database, and Slack fails.

The set-up is a deployment: one ``countersign serve --workers 0`` (the Slack side) and
``--workers`` ``countersign worker`` processes, all on PostgreSQL (``--database-url``; a
schema of its own, dropped at the end) through a TCP proxy this script controls, and the
Slack stand-in in this process. ``--runs`` runs of ``bench/chaos_crews.py`` each record a
fact (a side effect), send a message (a gated side effect: its call is approved first) and
have their report reviewed; the reviewer approves each review as it appears, by a click or a
reply in the thread, at random, and again when an ack did not come (as a person would).

Meanwhile, every ``--fault-every`` seconds on average, one fault at random:

* a worker stopped (SIGSTOP) for 2.5 leases, then continued;
* a worker killed (SIGKILL) and started again;
* ``serve`` killed (SIGKILL) and started again;
* every database connection cut (the proxy closes them and refuses new ones for a moment);
* Slack failing the next post or update: a 429, a 5xx, or a post applied whose answer is lost.

At the end (once every run settled, or at ``--seconds``) it prints what the promise is about:
runs settled; decisions acked and recorded; side effects per idempotency key (an effect applies
once per key; a call repeated between its effect and its journal write is counted apart); how
often two executions of one run took turns (each live call is logged with its claim); and
duplicate Slack posts (every post carries its outbox row and step in its metadata). Goal:
every acked decision recorded, no executions taking turns, no duplicate post, every run
settled. Exit status 1 when a goal is missed.

Run: ``.venv/bin/python bench/chaos.py`` (a few minutes; ``--help`` for options).
Everything listens on 127.0.0.1 and stops by itself.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
for _path in (str(ROOT), str(BENCH)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from _common import PG_DEFAULT, database, machine  # noqa: E402
from sqlalchemy import select  # noqa: E402
from sqlalchemy.engine import make_url  # noqa: E402

from bot.slack import text  # noqa: E402
from bot.slack.intake import parse_body  # noqa: E402
from sandbox import SlackStandIn, StandInThread  # noqa: E402
from storage import ReviewStatus, Store  # noqa: E402
from storage.inbox import InboxStore  # noqa: E402
from storage.schema import inbox  # noqa: E402
from tests.support.tcp_proxy import TcpProxy  # noqa: E402

Json = dict[str, Any]

SECRET = "chaos-signing-secret"
CHANNEL = "C0CHAOS01"
REVIEWER = "UREVIEWER"
RETRY_AFTER_S = 12.0  # a person clicks again when nothing happened for this long


class _NoDecision:
    request_key = None


_NONE = _NoDecision()


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


# ------------------------------------------------------------------------ processes


class Deployment:
    """``serve`` and the workers as processes, restarted when a fault killed them."""

    def __init__(
        self, env: dict[str, str], workers: int, lease: float, logs: Path, concurrency: int = 0
    ) -> None:
        self.env = env
        self.concurrency = concurrency  # 0: the worker's default
        self.lease = lease
        self.logs = logs
        self.port = _free_port()
        self.serve: subprocess.Popen[bytes] | None = None
        self.workers: list[subprocess.Popen[bytes] | None] = [None] * workers
        self.lock = threading.Lock()
        self.started = Counter[str]()

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        self.started[name.split("-")[0]] += 1
        log = (self.logs / f"{name}.log").open("ab")
        return subprocess.Popen(
            [sys.executable, "-m", "bot", *argv], env=self.env, stdout=log, stderr=log
        )

    def start_serve(self) -> None:
        argv = ["serve", "--port", str(self.port), "--workers", "0", "--lease", str(self.lease)]
        self.serve = self._spawn("serve", argv)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.serve.poll() is not None:
                # It could not start (its database cut off, say): started again, as a
                # supervisor restarts a service that exited.
                time.sleep(0.5)
                self.serve = self._spawn("serve", argv)
            with contextlib.suppress(OSError):
                url = f"http://127.0.0.1:{self.port}/healthz"
                with urllib.request.urlopen(url, timeout=1) as answer:
                    if json.loads(answer.read())["ok"]:
                        return
            time.sleep(0.1)
        raise RuntimeError("serve did not become healthy")

    def start_worker(self, index: int) -> None:
        argv = ["worker", "--lease", str(self.lease), "--poll", "0.2"]
        if self.concurrency:
            argv += ["--concurrency", str(self.concurrency)]
        self.workers[index] = self._spawn(f"worker-{index}", argv)

    def start(self) -> None:
        self.start_serve()
        for index in range(len(self.workers)):
            self.start_worker(index)

    def stop(self) -> None:
        for proc in [self.serve, *self.workers]:
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.terminate()
        for proc in [self.serve, *self.workers]:
            if proc is not None:
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    proc.kill()


# ----------------------------------------------------------------------------- faults


@dataclass
class Faults:
    """Injects one fault at a time, at random, until stopped."""

    deployment: Deployment
    proxy: TcpProxy | None
    slack: StandInThread
    rng: random.Random
    every: float
    injected: Counter[str] = field(default_factory=Counter)
    stopping: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        kinds = [
            self.stall_worker,
            self.kill_worker,
            self.kill_serve,
            self.cut_database,
            self.fail_slack,
            self.fail_slack,
        ]
        if self.proxy is None:
            kinds.remove(self.cut_database)
        busy: set[str] = set()  # faults overlap, but not two of a kind
        threads = []
        while not self.stopping.wait(self.rng.uniform(0.5, 1.5) * self.every):
            fault = self.rng.choice(kinds)
            if fault.__name__ in busy:
                continue
            self.injected[fault.__name__] += 1
            busy.add(fault.__name__)

            def inject(fault: Any = fault) -> None:
                try:
                    fault()
                finally:
                    busy.discard(fault.__name__)

            threads.append(threading.Thread(target=inject, daemon=True))
            threads[-1].start()
        for thread in threads:
            thread.join(60)

    def _worker(self) -> tuple[int, subprocess.Popen[bytes]] | None:
        alive = [(i, p) for i, p in enumerate(self.deployment.workers) if p and p.poll() is None]
        return self.rng.choice(alive) if alive else None

    def stall_worker(self) -> None:
        chosen = self._worker()
        if chosen is None:
            return
        _, proc = chosen
        proc.send_signal(signal.SIGSTOP)
        self.stopping.wait(2.5 * self.deployment.lease)
        proc.send_signal(signal.SIGCONT)

    def kill_worker(self) -> None:
        chosen = self._worker()
        if chosen is None:
            return
        index, proc = chosen
        proc.kill()
        proc.wait()
        self.stopping.wait(1.0)
        self.deployment.start_worker(index)

    def kill_serve(self) -> None:
        serve = self.deployment.serve
        if serve is None:
            return
        serve.kill()
        serve.wait()
        self.stopping.wait(1.0)
        self.deployment.start_serve()

    def cut_database(self) -> None:
        assert self.proxy is not None
        self.proxy.cut()
        self.stopping.wait(self.rng.uniform(0.5, 2.0))
        self.proxy.restore()

    def fail_slack(self) -> None:
        method = self.rng.choice(["chat.postMessage", "chat.postMessage", "chat.update"])
        how = self.rng.choice(["429", "5xx", "lost"] if method == "chat.postMessage" else ["5xx"])
        if how == "429":
            self.slack.fail_next(method, status=429, retry_after=1)
        elif how == "5xx":
            self.slack.fail_next(method, status=500)
        else:
            self.slack.fail_next(method, status=500, after_applying=True)
        self.injected[f"slack {method} {how}"] += 1


# ----------------------------------------------------------------------------- person


@dataclass
class Action:
    review_id: str
    how: str  # "click" or "reply"
    seen_as: str | None  # its trigger id (a click) or its message (a reply): see _identity
    acked: bool


class Reviewer:
    """Approves every review it sees, by a click or a reply; again when nothing came of it."""

    def __init__(self, slack: StandInThread, rng: random.Random) -> None:
        self.slack = slack
        self.rng = rng
        self.actions: list[Action] = []
        self.refused = 0
        self.last: dict[str, float] = {}
        self.seen: dict[str, float] = {}

    def start_run(self, n: int, store: Store) -> None:
        """``/crew run chaos n=N``, again until the run exists (a person told it failed)."""
        for _ in range(100):
            if any(r.inputs.get("n") == str(n) for r in store.list_runs(limit=1000)):
                return
            delivery = self._send(
                lambda: self.slack.slash_command(REVIEWER, CHANNEL, "/crew", f"run chaos n={n}")
            )
            told = [e.text for e in self.slack.ephemerals(REVIEWER)[-1:]]
            if delivery is None or not delivery.ok or told == [text.NOT_RECORDED]:
                self.refused += 1
                time.sleep(0.5)
                continue
            deadline = time.monotonic() + 30  # recorded: handled now, or after a restart
            while time.monotonic() < deadline and not any(
                r.inputs.get("n") == str(n) for r in store.list_runs(limit=1000)
            ):
                time.sleep(0.1)

    def _send(self, act: Any) -> Any:
        try:
            return act()
        except Exception:  # serve down: the connection was refused
            return None

    def pending_messages(self) -> list[tuple[str, str, str]]:
        """``(review id, message ts, thread ts)`` of every message showing review buttons."""
        found = []
        for message in self.slack.messages(CHANNEL):
            if message.get("thread_ts") not in (None, message["ts"]):
                continue
            for reply in self.slack.thread(CHANNEL, message["ts"]):
                for block in reply.get("blocks") or []:
                    for element in block.get("elements") or []:
                        if element.get("action_id") == "countersign:approve":
                            found.append((element["value"], reply["ts"], message["ts"]))
        return found

    def act(self) -> None:
        for review_id, ts, thread_ts in self.pending_messages():
            now = time.monotonic()
            # A person reads for a moment before deciding.
            seen = self.seen.setdefault(review_id, now + self.rng.uniform(0.5, 4.0))
            if now < seen or now - self.last.get(review_id, -RETRY_AFTER_S) < RETRY_AFTER_S:
                continue
            # Now and then a person clicks and replies at once: one decision all the same.
            for how in self.rng.choice([["click"], ["reply"]] * 4 + [["click", "reply"]]):
                self._decide(review_id, how, ts, thread_ts)

    def _decide(self, review_id: str, how: str, ts: str, thread_ts: str) -> None:
        if how == "click":
            delivery = self._send(
                lambda: self.slack.click_button(REVIEWER, CHANNEL, ts, "countersign:approve")
            )
        else:
            delivery = self._send(
                lambda: self.slack.reply_in_thread(REVIEWER, CHANNEL, thread_ts, "approve")
            )
        acked = delivery is not None and delivery.ok
        seen_as = None
        if delivery is not None and how == "click":
            seen_as = f"trigger:{delivery.payload['trigger_id']}"
        elif delivery is not None:
            seen_as = f"msg:{CHANNEL}:{delivery.payload['event']['ts']}"
        self.actions.append(Action(review_id, how, seen_as, acked))
        # Not acked: a person sees the error and tries again soon.
        now = time.monotonic()
        self.last[review_id] = now if acked else now - RETRY_AFTER_S + 1.0


# ---------------------------------------------------------------------------- figures


def _identity(payload: Json) -> str | None:
    """What a recorded request was, in the reviewer's terms: a click's trigger id, or a reply's
    message (slash commands: None)."""
    if payload.get("type") == "event_callback":
        event = payload.get("event") or {}
        return f"msg:{event.get('channel')}:{event.get('ts')}"
    trigger = payload.get("trigger_id")
    return f"trigger:{trigger}" if trigger and "command" not in payload else None


def executions_taking_turns(log: list[Json]) -> int:
    """How often a run's live calls went back to an execution that another one had followed."""
    turns = 0
    for run_id in {e["run"] for e in log if e["run"]}:
        seen: list[str] = []
        for entry in log:
            if entry["run"] != run_id or entry["what"] not in ("llm", "tool"):
                continue
            execution = entry["execution"]
            if seen and seen[-1] != execution and execution in seen:
                turns += 1
            if not seen or seen[-1] != execution:
                seen.append(execution)
    return turns


def duplicate_posts(slack: StandInThread) -> tuple[int, int]:
    """``(posts, duplicates)``: messages by outbox row and step, from their metadata."""
    steps: Counter[tuple[Any, Any]] = Counter()
    for post in slack.messages(CHANNEL):  # top-level messages and thread replies alike
        payload = (post.get("metadata") or {}).get("event_payload") or {}
        if "outbox_id" in payload:
            steps[(payload["outbox_id"], payload.get("step"))] += 1
    return sum(steps.values()), sum(n - 1 for n in steps.values() if n > 1)


def report(
    store: Store,
    reviewer: Reviewer,
    faults: Faults,
    deployment: Deployment,
    log: list[Json],
    slack: StandInThread,
    runs: int,
    seconds: float,
) -> bool:
    all_runs = store.list_runs(limit=runs + 10)
    statuses = Counter(r.status for r in all_runs)
    diverged = [(r.id, r.divergence) for r in all_runs if r.divergence]
    settled = sum(n for status, n in statuses.items() if status.is_final)
    reviews = {r.id: r for r in store.list_reviews(status=None)}
    acked = [a for a in reviewer.actions if a.acked]
    # An acked request is in the inbox and was handled: it decided its review, or found it
    # decided by another (an earlier click whose message still showed its buttons).
    with store.engine.connect() as conn:
        rows = conn.execute(
            select(inbox.c.key, inbox.c.body, inbox.c.content_type, inbox.c.done_at, inbox.c.error)
        ).all()
    # Each recorded request, by what the person did: its inbox key (what a decision it made
    # carries), and whether it was handled.
    recorded = {
        _identity(parse_body(row.body, row.content_type)): (
            row.key,
            row.done_at is not None and row.error is None,
        )
        for row in rows
    }
    lost = [a for a in acked if not recorded.get(a.seen_as, ("", False))[1]]
    theirs = [
        a
        for a in acked
        if a.seen_as in recorded
        and (reviews[a.review_id].decision or _NONE).request_key == recorded[a.seen_as][0]
    ]
    undecided = [r.id for r in reviews.values() if r.status == ReviewStatus.PENDING]
    review_statuses = Counter(r.status.value for r in reviews.values())
    applied = Counter(e["key"] for e in log if e["what"] == "effect" and e["applied"])
    executions = Counter(e["key"] for e in log if e["what"] == "tool")
    repeats = sum(n - 1 for n in executions.values() if n > 1)
    turns = executions_taking_turns(log)
    posts, duplicates = duplicate_posts(slack)
    by_how = Counter(a.how for a in acked)
    rows = [
        (
            "runs settled",
            f"{settled}/{runs} ({', '.join(f'{s} {n}' for s, n in statuses.items())})",
            "all",
        ),
        (
            "decisions acked (clicks, replies)",
            f"{len(acked)} ({by_how['click']}, {by_how['reply']})",
            "",
        ),
        ("acked and not recorded, or not handled", str(len(lost)), "0"),
        (
            "acked that made their review's decision / came second",
            f"{len(theirs)} / {len(acked) - len(theirs) - len(lost)}",
            "",
        ),
        ("reviews left pending", str(len(undecided)), "0"),
        ("runs that diverged from their recording", str(len(diverged)), "0"),
        ("reviews", ", ".join(f"{k} {n}" for k, n in sorted(review_statuses.items())), ""),
        (
            "requests not acked (told, then tried again)",
            str(len(reviewer.actions) - len(acked) + reviewer.refused),
            "",
        ),
        (
            "side effects applied more than once for a key",
            str(sum(1 for n in applied.values() if n > 1)),
            "0",
        ),
        ("keys with an effect", str(len(applied)), ""),
        (
            "tool calls repeated between their effect and their journal write",
            str(repeats),
            "counted apart",
        ),
        ("times two executions of one run took turns", str(turns), "0"),
        ("Slack posts (by outbox step) / duplicates", f"{posts} / {duplicates}", "0 duplicates"),
        ("faults injected", ", ".join(f"{k} {n}" for k, n in sorted(faults.injected.items())), ""),
        (
            "processes started",
            ", ".join(f"{k} {n}" for k, n in sorted(deployment.started.items())),
            "",
        ),
        ("wall time", f"{seconds:.0f} s", ""),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"\n| {'measure'.ljust(width)} | value | goal |\n|{'-' * (width + 2)}|-------|------|")
    for name, value, goal in rows:
        print(f"| {name.ljust(width)} | {value} | {goal} |")
    if lost:
        print("acked but lost:", [(a.review_id, a.how, a.seen_as) for a in lost])
    for run_id, note in diverged:
        print(f"diverged: {run_id}: {note}")
    met = not lost and not undecided and not diverged and settled == runs
    met = met and turns == 0 and duplicates == 0
    met = met and all(n == 1 for n in applied.values())
    print("\ngoal", "met" if met else "NOT met")
    return met


# ------------------------------------------------------------------------------- main


def run(args: argparse.Namespace) -> bool:
    info = machine()
    print(f"machine: {info}", flush=True)
    rng = random.Random(args.seed)
    with database(args.database_url) as (url, work):
        chaos_dir = work / "chaos"
        chaos_dir.mkdir()
        (chaos_dir / "log.jsonl").touch()
        config = work / "countersign.toml"
        config.write_text(
            f'[crews.chaos]\nfactory = "chaos_crews:chaos"\nchannel = "{CHANNEL}"\n'
            f'reviewers = ["{REVIEWER}"]\n'
        )
        store = Store.open(url)  # this process's own view, not through the proxy
        target = make_url(url)
        postgres = target.get_backend_name() == "postgresql"
        proxy = TcpProxy(target.host or "127.0.0.1", target.port or 5432) if postgres else None
        with contextlib.ExitStack() as stack:
            if proxy is not None:
                stack.enter_context(proxy)
            standin = SlackStandIn(signing_secret=SECRET)
            standin.add_user(REVIEWER, "reviewer")
            standin.add_channel(CHANNEL, "chaos", [REVIEWER])
            slack = stack.enter_context(StandInThread(standin))
            env = dict(os.environ)
            env.update(
                PYTHONPATH=f"{ROOT}{os.pathsep}{BENCH}",
                DATABASE_URL=proxy.url_through(url) if proxy else url,
                COUNTERSIGN_CONFIG=str(config),
                SLACK_BOT_TOKEN=standin.bot_token,
                SLACK_SIGNING_SECRET=SECRET,
                SLACK_API_URL=slack.api_url,
                CHAOS_DIR=str(chaos_dir),
                LOG_LEVEL="WARNING",
                CREWAI_STORAGE_DIR="countersign-chaos",
            )
            deployment = Deployment(env, args.workers, args.lease, work, args.concurrency)
            standin.bot_endpoint = f"http://127.0.0.1:{deployment.port}/slack/events"
            deployment.start()
            stack.callback(deployment.stop)
            reviewer = Reviewer(slack, rng)
            faults = Faults(deployment, proxy, slack, rng, args.fault_every)
            injector = threading.Thread(target=faults.run, name="faults", daemon=True)
            started = time.monotonic()
            injector.start()
            print(
                f"{args.runs} runs, one every {args.start_every:.1f} s; a fault every "
                f"~{args.fault_every:.1f} s",
                flush=True,
            )
            deadline = started + args.seconds
            next_start, started_runs = started, 0
            while time.monotonic() < deadline:
                if started_runs < args.runs and time.monotonic() >= next_start:
                    reviewer.start_run(started_runs, store)
                    started_runs += 1
                    next_start += args.start_every
                runs = store.list_runs(limit=args.runs + 10)
                if len(runs) >= args.runs and all(r.status.is_final for r in runs):
                    break
                reviewer.act()
                time.sleep(0.2)
            faults.stopping.set()
            injector.join(60)
            elapsed = time.monotonic() - started
            # A request handled just before a fault may still wait for its mark (a killed
            # serve's, or one the outage refused): the sweep handles it again, and finds its
            # decision made. Judge once that is done; what stays open is lost.
            drained = time.monotonic() + 60
            while InboxStore(store).count_open() and time.monotonic() < drained:
                time.sleep(0.2)
            log = [
                json.loads(line)
                for line in (chaos_dir / "log.jsonl").read_text().splitlines()
                if line
            ]
            met = report(store, reviewer, faults, deployment, log, slack, args.runs, elapsed)
            if args.keep:
                kept = Path(tempfile.mkdtemp(prefix="countersign-chaos-"))
                shutil.copytree(work, kept, dirs_exist_ok=True)
                print(f"logs kept in {kept}")
        store.close()
        return met


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--workers", type=int, default=3, help="countersign worker processes")
    parser.add_argument(
        "--concurrency", type=int, default=0, help="runs per worker (default: the worker's)"
    )
    parser.add_argument("--lease", type=float, default=3.0, help="seconds")
    parser.add_argument("--fault-every", type=float, default=3.0, help="seconds, on average")
    parser.add_argument("--start-every", type=float, default=2.0, help="seconds between runs")
    parser.add_argument("--seconds", type=float, default=600.0, help="give up after this")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--database-url", default=PG_DEFAULT, help=f"default {PG_DEFAULT}")
    parser.add_argument("--keep", action="store_true", help="keep the processes' logs")
    args = parser.parse_args()
    return 0 if run(args) else 1


if __name__ == "__main__":
    raise SystemExit(main())
