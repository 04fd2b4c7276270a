"""A million runs: what the Store's hot queries cost when the database is big.

The claim: with the indexes of the migrations, finding a run by its Slack thread, listing one
reviewer's pending reviews, recording a decision and claiming a run cost about the same at a
million runs as at a thousand, and a worker's memory does not grow with the runs that wait.

The database is seeded with set-based SQL (``INSERT … SELECT FROM generate_series``, in
bounded chunks) into a PostgreSQL schema of its own (``--schema``, default ``bench_scale``,
dropped and recreated; no other schema is touched): ``--runs`` runs (default 1,000,000) over
400 days and 20 crews, 10% waiting on a pending review, the rest finished with decided reviews
and their decisions, three journal entries and two sent outbox rows a run, and a backlog of
unsent outbox rows. Then, through the Store's own methods (the code the bot and the workers
run), each operation is timed ``--samples`` times (p50/p99) and its statements' plans are
printed (``EXPLAIN (ANALYZE, BUFFERS)``, writes rolled back):

- a run by its thread (``find_run_by_thread``), goal p99 < 5 ms;
- one reviewer's pending reviews (``pending_reviews``, one crew of 20), goal p99 < 50 ms;
- a ``/metrics`` scrape's queries (``storage.stats.read_stats``);
- the outbox's dispatch rate (due, claim, mark sent: rows a second, without Slack);
- recording a decision (``decide``), and claiming a run (``claim_run``), goal p99 < 10 ms;
- a ``countersign worker``'s RSS while the waiting runs wait (``--rss-seconds`` of samples);
- ``countersign audit export``'s peak RSS, of every decision and of a day's: the same if it
  streams;
- a dry run of pruning the runs older than a year (every batch done, then rolled back).

Run: ``.venv/bin/python bench/scale.py [--runs 1000000] [--samples 200] [--database-url URL]``;
``--reuse`` measures an already seeded schema again, ``--keep`` leaves it for that, and
``--revision 0006`` measures the schema as it was before migration 0007's indexes.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# isort: split
from sqlalchemy import Engine, create_engine, event, inspect, text  # noqa: E402

from storage import (  # noqa: E402
    DecisionKind,
    NewDecision,
    OutboxMessage,
    ReviewKind,
    RunStatus,
    Store,
    migrate,
)
from storage.retention import Retention, RetentionPolicy  # noqa: E402
from storage.stats import read_stats  # noqa: E402

PG_DEFAULT = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
CREWS = 20
CHANNELS = 50
DAYS = 400
CHUNK = 50_000
# One run in this many waits for a review; the others are finished. Runs are dealt to crews
# and channels in blocks of this many, so that each crew has as many waiting runs.
WAITING_EVERY = 10

SEED = """
INSERT INTO runs (id, crew, inputs, status, output, error, started_by, request_key, channel,
                  thread_ts, attempts, created_at, updated_at)
SELECT 'run_' || lpad(to_hex(n), 12, '0'),
       'crew' || lpad(((n / {waiting}) % {crews})::text, 2, '0'),
       json_build_object('topic', 'otters ' || n),
       CASE WHEN n % {waiting} = 0 THEN 'waiting'
            WHEN n % 100 = 7 THEN 'failed'
            WHEN n % 100 = 9 THEN 'rejected'
            WHEN n % 200 = 11 THEN 'cancelled'
            ELSE 'succeeded' END,
       CASE WHEN n % {waiting} = 0 THEN NULL ELSE 'An article about otters, number ' || n END,
       CASE WHEN n % 100 = 7 THEN 'the model gave up' END,
       'U' || lpad((n % 500)::text, 8, '0'),
       'cmd:' || n,
       'C' || lpad(((n / {waiting}) % {channels})::text, 8, '0'),
       (1700000000 + n)::text || '.000100',
       1,
       {at},
       {at} + interval '10 minutes'
FROM generate_series(CAST(:lo AS integer), CAST(:hi AS integer)) AS n;

INSERT INTO reviews (id, run_id, kind, status, stream, seq, prompt, details, journal_pos,
                     channel, message_ts, created_at, decided_at)
SELECT 'rev_' || lpad(to_hex(n), 12, '0') || 'a',
       'run_' || lpad(to_hex(n), 12, '0'),
       {kind},
       CASE WHEN n % {waiting} = 0 THEN 'pending'
            WHEN n % 200 = 11 THEN 'cancelled' ELSE 'decided' END,
       'task0:Writer', 0,
       'A draft about otters: they hold hands while they sleep, number ' || n,
       {details},
       2,
       'C' || lpad(((n / {waiting}) % {channels})::text, 8, '0'),
       (1700000000 + n)::text || '.000200',
       {at} + interval '1 minute',
       CASE WHEN n % {waiting} <> 0 THEN {at} + interval '5 minutes' END
FROM generate_series(CAST(:lo AS integer), CAST(:hi AS integer)) AS n;

INSERT INTO reviews (id, run_id, kind, status, stream, seq, prompt, details, journal_pos,
                     channel, message_ts, created_at, decided_at)
SELECT 'rev_' || lpad(to_hex(n), 12, '0') || 'b',
       'run_' || lpad(to_hex(n), 12, '0'),
       'task_review', 'decided', 'task1:Writer', 0,
       'The article, number ' || n, '{{"task": "write"}}', 3,
       'C' || lpad(((n / {waiting}) % {channels})::text, 8, '0'),
       (1700000000 + n)::text || '.000300',
       {at} + interval '6 minutes', {at} + interval '9 minutes'
FROM generate_series(CAST(:lo AS integer), CAST(:hi AS integer)) AS n
WHERE n % {waiting} <> 0 AND n % 2 = 0;

INSERT INTO decisions (review_id, run_id, kind, text, original, details, decided_by,
                       request_key, created_at)
SELECT r.id, r.run_id,
       CASE WHEN r.kind = 'question' THEN 'answer'
            WHEN r.kind = 'tool_approval' AND r.id LIKE '%0a' THEN 'edit'
            ELSE 'approve' END,
       CASE WHEN r.kind = 'question' THEN 'casual'
            WHEN r.kind = 'tool_approval' AND r.id LIKE '%0a'
            THEN '{{"subject": "Otter tours"}}' END,
       NULL, '{{"by_name": "Ana"}}', 'U' || lpad((length(r.id) % 500)::text, 8, '0'),
       'act:' || r.id, r.decided_at
FROM reviews r
WHERE r.status = 'decided'
  AND r.run_id BETWEEN 'run_' || lpad(to_hex(CAST(:lo AS integer)), 12, '0')
                   AND 'run_' || lpad(to_hex(CAST(:hi AS integer)), 12, '0');

INSERT INTO journal (run_id, pos, stream, kind, seq, payload, prompt_hash, created_at)
SELECT 'run_' || lpad(to_hex(n), 12, '0'), p,
       'task0:Writer',
       CASE WHEN p = 0 AND n % 3 = 2 THEN 'tool' ELSE 'llm' END,
       p,
       CASE WHEN p = 0 AND n % 3 = 2
            THEN '{{"tool": "send_email", "args": {{"to": "ana@example.com",
                  "subject": "Otter tours"}}, "result": "sent"}}'::json
            ELSE json_build_object('text', 'Thought: I now know the final answer ' || n) END,
       md5(n::text || p), {at} + p * interval '1 minute'
FROM generate_series(CAST(:lo AS integer), CAST(:hi AS integer)) AS n, generate_series(0, 2) AS p;

INSERT INTO outbox (run_id, review_id, kind, payload, created_at, next_attempt_at, attempts,
                    sent_at, progress)
SELECT 'run_' || lpad(to_hex(n), 12, '0'), NULL,
       CASE WHEN k = 0 THEN 'run_started'
            WHEN n % {waiting} = 0 THEN 'review_opened' ELSE 'run_finished' END,
       '{{}}', {at} + k * interval '5 minutes', {at} + k * interval '5 minutes', 1,
       {at} + k * interval '5 minutes' + interval '1 second', '{{}}'
FROM generate_series(CAST(:lo AS integer), CAST(:hi AS integer)) AS n, generate_series(0, 1) AS k;
"""

# What the Store counts as it goes (storage.tallies), counted once for the rows seeded: the
# statements of the migration that made the table.
TALLIES = (
    "INSERT INTO tallies (crew, what, n) SELECT crew, status, count(*) FROM runs "
    "GROUP BY crew, status",
    "INSERT INTO tallies (crew, what, n) SELECT runs.crew, 'pending_review', count(*) "
    "FROM reviews JOIN runs ON runs.id = reviews.run_id WHERE reviews.status = 'pending' "
    "GROUP BY runs.crew",
)

AT = "(now() at time zone 'utc') - ({total} - n) * interval '{step} seconds'"
KIND = "CASE n % 3 WHEN 0 THEN 'task_review' WHEN 1 THEN 'question' ELSE 'tool_approval' END"
DETAILS = (
    'CASE n % 3 WHEN 0 THEN \'{"task": "outline", "agent": "Writer"}\'::json '
    'WHEN 1 THEN \'{"agent": "Researcher"}\'::json '
    'ELSE \'{"tool": "send_email", "args": {"to": "ana@example.com", '
    '"subject": "Otters"}}\'::json END'
)

BACKLOG = """
INSERT INTO outbox (run_id, kind, payload, created_at, next_attempt_at, attempts, progress)
SELECT id, 'run_note', '{}', now() at time zone 'utc', now() at time zone 'utc', 0, '{}'
FROM runs WHERE status = 'waiting' ORDER BY id LIMIT :rows
"""


# ---------------------------------------------------------------------------- seeding


@contextmanager
def schema_url(url: str, schema: str, *, fresh: bool, keep: bool) -> Iterator[str]:
    """The URL of ``schema`` in ``url``'s database; ``fresh`` drops and recreates it first,
    and without ``keep`` it is dropped at the end."""
    admin = create_engine(url)
    if fresh:
        with admin.begin() as conn:
            conn.execute(text(f"DROP SCHEMA IF EXISTS {schema} CASCADE"))
            conn.execute(text(f"CREATE SCHEMA {schema}"))
    sep = "&" if "?" in url else "?"
    try:
        yield f"{url}{sep}options=-csearch_path%3D{schema}"
    finally:
        if not keep:
            with admin.begin() as conn:
                conn.execute(text(f"DROP SCHEMA IF EXISTS {schema} CASCADE"))
        admin.dispose()


def seed(engine: Engine, runs: int) -> None:
    """Fill the tables with ``runs`` runs and their rows, ``CHUNK`` runs a transaction."""
    step = DAYS * 86400 / runs
    at = AT.format(total=runs, step=step)
    statements = [
        s.strip()
        for s in SEED.format(
            crews=CREWS,
            channels=CHANNELS,
            waiting=WAITING_EVERY,
            at=at,
            kind=KIND,
            details=DETAILS,
        ).split(";\n")
        if s.strip()
    ]
    started = time.perf_counter()
    for lo in range(1, runs + 1, CHUNK):
        hi = min(lo + CHUNK - 1, runs)
        with engine.begin() as conn:
            for statement in statements:
                conn.execute(text(statement), {"lo": lo, "hi": hi})
        print(f"  seeded {hi:,} runs ({time.perf_counter() - started:.0f} s)", flush=True)
    with engine.begin() as conn:
        if inspect(conn).has_table("tallies"):  # below migration 0021 it counts them itself
            for statement in TALLIES:
                conn.execute(text(statement))
    analyze(engine)


def analyze(engine: Engine) -> None:
    """What autovacuum does to a live database and not yet to one just loaded: statistics,
    and the visibility map that lets a count read an index alone."""
    with engine.connect() as conn:
        conn.execution_options(isolation_level="AUTOCOMMIT").execute(text("VACUUM ANALYZE"))


def row_counts(engine: Engine) -> dict[str, int]:
    tables = ("runs", "reviews", "decisions", "journal", "outbox")
    with engine.connect() as conn:
        return {
            t: int(conn.execute(text(f"SELECT count(*) FROM {t}")).scalar_one()) for t in tables
        }


# -------------------------------------------------------------------------- measuring


class Statements:
    """The statements an engine runs while recording, with their parameters."""

    def __init__(self, engine: Engine) -> None:
        self.recording = False
        self.seen: list[tuple[str, Any]] = []
        event.listen(engine, "before_cursor_execute", self._saw)

    def _saw(self, _conn: Any, _cursor: Any, statement: str, params: Any, *_: Any) -> None:
        if self.recording:
            self.seen.append((statement, params))

    @contextmanager
    def record(self) -> Iterator[list[tuple[str, Any]]]:
        self.seen = []
        self.recording = True
        try:
            yield self.seen
        finally:
            self.recording = False


def explain(engine: Engine, statements: list[tuple[str, Any]]) -> str:
    """``EXPLAIN (ANALYZE, BUFFERS)`` of each statement, in a transaction rolled back.

    Inserts are left out: they were made already, and a plan of one row's insert says nothing.
    """
    out = []
    for statement, params in statements:
        verb = statement.lstrip().split(None, 1)[0].upper()
        if verb not in {"SELECT", "UPDATE", "DELETE"}:
            continue
        with engine.connect() as conn, conn.begin() as tx:
            plan = conn.exec_driver_sql(f"EXPLAIN (ANALYZE, BUFFERS) {statement}", params)
            lines = [row[0] for row in plan]
            tx.rollback()
        first = " ".join(statement.split())
        out.append(f"-- {first[:160]}{'…' if len(first) > 160 else ''}\n" + "\n".join(lines))
    return "\n\n".join(out)


def timed(samples: int, call: Callable[[int], Any]) -> list[float]:
    """Milliseconds of each of ``samples`` calls of ``call(i)``."""
    took = []
    for i in range(samples):
        started = time.perf_counter()
        call(i)
        took.append((time.perf_counter() - started) * 1000)
    return took


def p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Report:
    def __init__(self, statements: Statements, engine: Engine, plans: bool) -> None:
        self.statements = statements
        self.engine = engine
        self.plans = plans
        self.rows: list[list[str]] = []

    def measure(
        self,
        name: str,
        samples: int,
        call: Callable[[int], Any],
        goal: float | None = None,
        *,
        plans: bool = True,
    ) -> None:
        """Time ``call`` ``samples`` times after one recorded run whose plans are printed."""
        with self.statements.record() as seen:
            call(samples)
        if self.plans and plans:
            print(f"\n### plans: {name}\n{explain(self.engine, seen)}", flush=True)
        took = timed(samples, call)
        p50, p99 = p(took, 0.5), p(took, 0.99)
        verdict = "" if goal is None else ("met" if p99 < goal else "MISSED")
        goal_text = "" if goal is None else f"< {goal:g} ms {verdict}"
        self.rows.append([name, str(samples), f"{p50:.2f}", f"{p99:.2f}", goal_text])
        print(f"{name}: p50 {p50:.2f} ms, p99 {p99:.2f} ms {goal_text}", flush=True)

    def table(self) -> str:
        headers = ["operation", "samples", "p50 ms", "p99 ms", "goal (p99)"]
        cells = [headers, *self.rows]
        widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
        lines = [
            "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |"
            for r in cells
        ]
        lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
        return "\n".join(lines)


def status_kib(pid: int, key: str = "VmRSS") -> int:
    """A memory figure of process ``pid`` (KiB), from ``/proc/PID/status``."""
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith(f"{key}:"):
                return int(line.split()[1])
    raise RuntimeError(f"no {key} for {pid}")


def export_peak(url: str, since: str, until: str) -> tuple[int, int, float]:
    """``countersign audit export`` of ``[since, until)`` as JSON lines: (records, peak RSS in
    KiB, seconds). The peak is the command's own high-water mark (``VmHWM``), read until it
    exits: ``wait4``'s would count this process's memory, which a fork starts from."""
    env = {**os.environ, "DATABASE_URL": url}
    command = [str(Path(sys.executable).parent / "countersign"), "audit", "export"]
    started = time.perf_counter()
    peak = 0
    with tempfile.TemporaryFile() as out:
        export = subprocess.Popen(
            [*command, "--since", since, "--until", until, "--workspace", "https://bench"],
            env=env,
            stdout=out,
        )
        while export.poll() is None:
            with contextlib.suppress(OSError, RuntimeError):  # it may exit between checks
                peak = max(peak, status_kib(export.pid, "VmHWM"))
            time.sleep(0.05)
        took = time.perf_counter() - started
        if export.returncode != 0:
            raise RuntimeError(f"audit export failed with {export.returncode}")
        out.seek(0)
        records = sum(1 for _ in out)
    return records, peak, took


def worker_rss(url: str, seconds: float) -> tuple[int, int, int]:
    """A ``countersign worker``'s RSS (KiB) over ``seconds`` once it started: first, max, last."""
    with tempfile.TemporaryDirectory(prefix="countersign-scale-") as tmp:
        log = Path(tmp) / "worker.log"
        env = {**os.environ, "DATABASE_URL": url, "LOG_LEVEL": "INFO"}
        config = ROOT / "examples" / "countersign.toml"
        command = [str(Path(sys.executable).parent / "countersign"), "--config", str(config)]
        with log.open("w") as out:
            worker = subprocess.Popen([*command, "worker"], env=env, stdout=out, stderr=out)
        try:
            deadline = time.monotonic() + 180
            while " started: " not in log.read_text():
                if worker.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the worker did not start:\n{log.read_text()}")
                time.sleep(0.2)
            samples = []
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                samples.append(status_kib(worker.pid))
                time.sleep(0.5)
            return samples[0], max(samples), samples[-1]
        finally:
            worker.terminate()
            worker.wait(timeout=60)


# ------------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--database-url", default=PG_DEFAULT, help="a PostgreSQL database")
    parser.add_argument("--schema", default="bench_scale")
    parser.add_argument("--reuse", action="store_true", help="measure a schema seeded before")
    parser.add_argument(
        "--revision",
        default="head",
        help="the schema's migration, e.g. 0006 to measure without later indexes",
    )
    parser.add_argument("--keep", action="store_true", help="leave the schema for --reuse")
    parser.add_argument(
        "--rss-seconds", type=float, default=20.0, help="0: no worker (it imports CrewAI)"
    )
    parser.add_argument("--no-plans", action="store_true", help="print the figures only")
    args = parser.parse_args()
    random.seed(12)

    with schema_url(args.database_url, args.schema, fresh=not args.reuse, keep=args.keep) as url:
        started = time.perf_counter()
        store = Store.open(url, upgrade=False)
        migrate.upgrade(store.engine, args.revision)  # reused: the migrations since its seed
        print(f"schema at {args.revision} in {time.perf_counter() - started:.1f} s", flush=True)
        engine = store.engine
        if not args.reuse:
            print(f"seeding {args.runs:,} runs into schema {args.schema}", flush=True)
            started = time.perf_counter()
            seed(engine, args.runs)
            print(f"seeded in {time.perf_counter() - started:.0f} s", flush=True)
        counts = row_counts(engine)
        print("rows: " + ", ".join(f"{t} {n:,}" for t, n in counts.items()), flush=True)
        runs = counts["runs"]
        report = Report(Statements(engine), engine, plans=not args.no_plans)
        samples = args.samples

        # The worker and the export are commands: they bring the schema to the head revision.
        at_head = args.revision == "head"
        if args.rss_seconds > 0 and at_head:
            first, peak, last = worker_rss(url, args.rss_seconds)
            waiting = store.count_runs(RunStatus.WAITING)
            print(
                f"worker RSS while {waiting:,} runs wait: {first / 1024:.0f} MiB at start, "
                f"{peak / 1024:.0f} MiB max, {last / 1024:.0f} MiB after {args.rss_seconds:g} s",
                flush=True,
            )

        picks = [random.randrange(1, runs + 1) for _ in range(samples + 1)]
        report.measure(
            "run by its thread",
            samples,
            lambda i: store.find_run_by_thread(
                f"C{(picks[i] // WAITING_EVERY) % CHANNELS:08d}", f"{1700000000 + picks[i]}.000100"
            ),
            goal=5,
        )
        crews = [f"crew{(n % CREWS):02d}" for n in range(samples + 1)]
        report.measure(
            "one reviewer's pending reviews (one crew, 50 listed)",
            samples,
            lambda i: store.pending_reviews({crews[i]: None}, limit=50),
            goal=50,
        )
        # What /crew pending read before Store.pending_reviews: every pending review, and the
        # decisions of each (their plans list 100,000 ids: left out).
        report.measure(
            "every pending review (list_reviews, the old /crew pending)",
            1,
            lambda _i: store.list_reviews(),
            plans=False,
        )
        report.measure(
            "/metrics scrape (read_stats: runs by crew and status, pending by crew and age, "
            "backlogs)",
            samples,
            lambda _i: read_stats(store),
            goal=50,
        )

        with engine.begin() as conn:
            conn.execute(text(BACKLOG), {"rows": max(10, min(2_000, runs // 100))})
        sent = dispatch_rate(store, report)
        print(f"outbox dispatch: {sent[0]} rows in {sent[1]:.2f} s, {sent[0] / sent[1]:.0f} rows/s")

        listed = store.pending_reviews(
            {f"crew{c:02d}": None for c in range(CREWS)}, limit=samples + 1
        )
        pending = listed.reviews
        # The floor under every write: one row changed and committed (the commit's flush).
        report.measure(
            "floor: one row updated and committed",
            samples,
            lambda i: _touch(engine, listed.reviews[i % len(listed.reviews)].run_id),
        )
        report.measure(
            "record a decision",
            min(samples, len(pending) - 1),
            lambda i: store.decide(pending[i].id, decision(pending[i].kind)),
            goal=10,
        )
        report.measure(
            "claim a run",
            min(samples, len(pending) - 1),
            lambda _i: store.claim_run("bench", timedelta(minutes=5)),
            goal=10,
        )
        for since, until in (("2000-01-01", "2100-01-01"), (day_before(), "2100-01-01"))[
            : 2 if at_head else 0
        ]:
            records, peak, took = export_peak(url, since, until)
            print(
                f"audit export {since}..{until}: {records:,} records in {took:.1f} s, "
                f"peak RSS {peak / 1024:.0f} MiB",
                flush=True,
            )
        if at_head:
            started = time.perf_counter()
            year = RetentionPolicy(Retention(keep_runs=timedelta(days=365)))
            pruned = store.prune(year, dry_run=True)
            took = time.perf_counter() - started
            gone = sum(sum(tables.values()) for tables in pruned.values())
            found = sum(tables["runs"] for tables in pruned.values())
            print(
                f"prune --dry-run, keep_runs 1y: {found:,} runs ({gone:,} rows) in {took:.1f} s, "
                f"{gone / took:,.0f} rows/s (rolled back)",
                flush=True,
            )
        print(f"\n{runs:,} runs on PostgreSQL\n{report.table()}", flush=True)
        store.close()


def decision(kind: ReviewKind) -> NewDecision:
    """An answer to a question, an approval of anything else."""
    if kind == ReviewKind.QUESTION:
        return NewDecision(DecisionKind.ANSWER, "U0BENCH", text="casual")
    return NewDecision(DecisionKind.APPROVE, "U0BENCH")


def _touch(engine: Engine, run_id: str) -> None:
    with engine.begin() as conn:
        conn.execute(text("UPDATE runs SET attempts = attempts WHERE id = :id"), {"id": run_id})


def day_before() -> str:
    """Yesterday (UTC), ISO: an export of about a day of decisions."""
    return (datetime.now(UTC) - timedelta(days=1)).date().isoformat()


def dispatch_rate(store: Store, report: Report) -> tuple[int, float]:
    """Drain the unsent outbox rows as the dispatcher does, without Slack: (rows, seconds).

    The statements of the first row delivered are explained after the drain.
    """
    sent = 0
    started = time.perf_counter()
    with report.statements.record() as first:
        sent += deliver(store, store.due_outbox()[:1])
    while batch := store.due_outbox():
        sent += deliver(store, batch)
    took = time.perf_counter() - started
    if report.plans:
        print(f"\n### plans: outbox dispatch\n{explain(report.engine, first)}", flush=True)
    return sent, took


def deliver(store: Store, batch: list[OutboxMessage]) -> int:
    sent = 0
    for message in batch:
        if store.claim_outbox(message.id, "bench", timedelta(minutes=1)) is None:
            continue
        store.save_outbox_progress(message.id, "bench", {"post": {"done": True}})
        sent += store.mark_sent(message.id, "bench")
    return sent


if __name__ == "__main__":
    main()
