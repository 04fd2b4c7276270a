"""Ack latency of ``/crew`` slash commands and button clicks, idle and with crews executing.

Slack gives an app 3 s to answer (ack) each slash command and interaction; Countersign's
goal is a p99 under 100 ms even while its embedded workers execute crews. Measured end to
end, as Slack sees it:

1. The Slack stand-in (``sandbox.SlackStandIn``) runs in this process on its own event
   loop (a thread). A real ``python -m bot serve --workers 4`` process is started against
   it, with a throwaway SQLite database (or ``--database-url``) and a ``countersign.toml``
   naming the crews of ``bench/ack_crews.py`` (``bench/`` on its ``PYTHONPATH``).
2. ``/crew run review`` four times: four runs pause on a task review and the bot posts four
   review messages with buttons, which the clicks target.
3. **idle** (no run executing): ``--bursts`` bursts of ``--requests`` correctly signed
   requests to ``/slack/events``, all in flight at once (``--concurrency``): half slash
   commands (``/crew list``, ``/crew status RUN_ID``, ``/crew help``), half ``block_actions``
   clicks on the bot's review messages (Approve by a non-reviewer, told so ephemerally;
   Request changes by the reviewer, which opens a modal). None changes a run, so every
   burst meets the same state. ``--mix static``: only ``/crew list`` and ``/crew help``.
4. **busy**: ``/crew run busy`` once per worker; once the store shows them all ``running``,
   the same bursts. Each busy run makes hundreds of real CrewAI turns (``ack_crews.busy``,
   ``--load cpu`` or ``io``); every run must still be ``running`` after each burst and its
   journal must grow during the bursts, or the figures are declared invalid.
5. **floor**: the same bursts against a bare aiohttp handler (a ``web.Response`` and
   nothing else) in its own process, up all along: what this machine can do at all. Each
   round of a mode is a burst to the bot and one to the floor, in alternating order, so the
   floor is measured under the same load; the p99 ratio is taken round by round and printed
   as its median (min..max), with the CPU per request of each (``/proc``).

Latency is measured per request by a small HTTP/1.1 client on asyncio streams in a process
of its own (spawned once): the connections are opened before the clock starts, each
request's clock starts just before its bytes are written and stops when the whole response
(the ack) is read. Bodies and signatures are prepared beforehand. Also printed per burst:
the CPU time the serve process's event-loop thread and the whole process used during it
(from ``/proc``), and the Web API calls the bot made after the acks (ephemerals, modals,
``response_url`` posts), with how long after its click each ``views.open`` reached Slack
(matched by trigger_id; a trigger_id is valid 3 s). ``--serve-tree DIR`` runs another
checkout's bot (its ``.venv``) in the same harness: main beside a branch.

Run: ``.venv/bin/python bench/ack_latency.py`` (about one minute; ``--help`` for options).
Everything listens on 127.0.0.1 and stops by itself; the serve process gets SIGTERM and
must exit 0. Exit status 1 when the measurement is not valid (see PROBLEM lines); FINDING
lines report the bot misbehaving under the load.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import datetime as dt
import json
import multiprocessing
import os
import platform
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import metadata
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parent.parent
BENCH = Path(__file__).resolve().parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sandbox import SlackStandIn, sign  # noqa: E402
from sandbox import payloads as slack_payloads  # noqa: E402
from sandbox.delivery import encode  # noqa: E402
from sandbox.workspace import ResponseUrl  # noqa: E402
from storage import RunStatus, Store  # noqa: E402

T = TypeVar("T")
Json = dict[str, Any]

SECRET = "bench-signing-secret"
CHANNEL = "C0BENCH01"
REVIEWER = "UALICE"  # the review crew's only reviewer
STRANGER = "UMALLORY"  # in the channel, not a reviewer
SLACK_LIMIT_MS = 3000.0
GOAL_P99_MS = 100.0
# Every request is recorded in the database before its ack: that may cost, within bounds.
GOAL_FLOOR_RATIO = 1.5
# A click's trigger_id lives 3 s; its modal should open well within that, busy.
GOAL_VIEWS_OPEN_MS = 1000.0
REQUEST_TIMEOUT_S = 10.0

CONFIG = f"""
[crews.busy]
factory = "ack_crews:busy"
description = "Hundreds of tool-calling turns, then a review"
channel = "{CHANNEL}"
reviewers = ["{REVIEWER}"]

[crews.review]
factory = "ack_crews:review"
description = "One reviewed note"
channel = "{CHANNEL}"
reviewers = ["{REVIEWER}"]
"""


# ---------------------------------------------------------------- the stand-in's loop


class StandInLoop:
    """The stand-in served on its own event loop in a daemon thread.

    Everything that reads or changes its state runs on that loop (:meth:`call`), so the
    bot's Web API calls and this benchmark's payload building never race.
    """

    def __init__(self, standin: SlackStandIn) -> None:
        self.standin = standin
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="standin", daemon=True)

    def __enter__(self) -> StandInLoop:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.standin.start("127.0.0.1", 0), self.loop).result(10)
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            asyncio.run_coroutine_threadsafe(self.standin.stop(), self.loop).result(10)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()

    def call(self, fn: Callable[[], T]) -> T:
        async def on_loop() -> T:
            return fn()

        return asyncio.run_coroutine_threadsafe(on_loop(), self.loop).result(10)


# ---------------------------------------------------------------- requests


@dataclass(frozen=True)
class Prepared:
    """One request ready to post: its kind (for the table), body and content type."""

    kind: str  # "slash" or "click"
    label: str
    body: bytes
    content_type: str
    trigger: str = ""  # a click's trigger_id, which its views.open carries


@dataclass(frozen=True)
class Result:
    kind: str
    label: str
    status: int  # 0: no answer within REQUEST_TIMEOUT_S (or a connection error)
    ms: float
    error: str = ""
    trigger: str = ""
    sent: float = 0.0  # time.time() just before its bytes were written


def _response_url(standin: SlackStandIn, user: str, **where: Any) -> str:
    ws = standin.workspace
    record = ResponseUrl(secrets.token_hex(8), user, CHANNEL, ws.clock(), **where)
    return ws.issue_response_url(standin.base_url, record)


def slash(standin: SlackStandIn, user: str, text: str) -> Prepared:
    """A ``/crew`` command exactly as ``PersonSide.slash_command`` builds it (not sent)."""
    ws = standin.workspace
    form = slack_payloads.slash_command(
        ws,
        user=user,
        channel=ws.channel(CHANNEL),
        command="/crew",
        text=text,
        response_url=_response_url(standin, user),
        trigger_id=ws.issue_trigger(user),
    )
    body, content_type = encode("slash_commands", form)
    return Prepared("slash", "/crew " + text.split(" ")[0], body.encode(), content_type)


def click(standin: SlackStandIn, user: str, ts: str, action_id: str) -> Prepared:
    """A ``block_actions`` click on the bot's message ``ts``, as ``PersonSide.click_button``."""
    ws = standin.workspace
    channel = ws.channel(CHANNEL)
    message = ws.message(CHANNEL, ts)
    block, element = slack_payloads.find_element(message["blocks"], action_id)
    thread_ts = message.get("thread_ts")
    trigger = ws.issue_trigger(user)
    payload = slack_payloads.interaction_base(ws, "block_actions", user, trigger)
    container: Json = {
        "type": "message",
        "message_ts": ts,
        "channel_id": channel.id,
        "is_ephemeral": False,
    }
    if thread_ts:
        container["thread_ts"] = thread_ts
    payload.update(
        container=container,
        channel={"id": channel.id, "name": channel.name},
        state={"values": {}},
        message=copy.deepcopy(message),
        response_url=_response_url(
            standin, user, thread_ts=thread_ts, message_ts=ts, is_ephemeral=False
        ),
        actions=[slack_payloads.action(block, element, ws.next_ts(), None)],
    )
    body, content_type = encode("interactive", payload)
    return Prepared("click", action_id.split(":")[-1], body.encode(), content_type, trigger)


def mix(
    standin: SlackStandIn, n: int, review_ts: list[str], status_run: str, *, static: bool = False
) -> list[Prepared]:
    """``n`` requests: slash commands and clicks alternate, each cycling through its kinds.

    ``static``: only ``/crew list`` and ``/crew help``, which the bot answers in the ack
    itself with nothing to do after it: the cost of the ack path alone.
    """
    commands = ["list", "help"] if static else ["list", f"status {status_run}", "help"]
    clicks = [(STRANGER, "countersign:approve"), (REVIEWER, "countersign:changes")]
    out: list[Prepared] = []
    for i in range(n):
        j = i // 2
        if static or i % 2 == 0:
            out.append(slash(standin, REVIEWER, commands[j % len(commands)]))
        else:
            user, action_id = clicks[j % len(clicks)]
            out.append(click(standin, user, review_ts[j % len(review_ts)], action_id))
    return out


def http_request(port: int, req: Prepared) -> bytes:
    """The whole HTTP/1.1 request, signed now (Slack accepts 5 minutes of clock skew)."""
    timestamp = int(time.time())
    head = (
        f"POST /slack/events HTTP/1.1\r\n"
        f"Host: 127.0.0.1:{port}\r\n"
        f"Content-Type: {req.content_type}\r\n"
        f"Content-Length: {len(req.body)}\r\n"
        f"X-Slack-Request-Timestamp: {timestamp}\r\n"
        f"X-Slack-Signature: {sign(SECRET, timestamp, req.body.decode())}\r\n"
        f"User-Agent: Slackbot 1.0 (+https://api.slack.com/robots)\r\n"
        f"\r\n"
    )
    return head.encode() + req.body


async def _read_response(reader: asyncio.StreamReader) -> int:
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
    status = int(head[0].split(" ")[1])
    fields = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in head[1:])}
    if "chunked" in fields.get("transfer-encoding", ""):
        raise RuntimeError("chunked responses are not expected from the bot")
    length = int(fields.get("content-length", "0"))
    if length:
        await reader.readexactly(length)
    return status


async def fire(port: int, requests: list[Prepared], concurrency: int) -> list[Result]:
    """Post all ``requests`` at once over ``concurrency`` connections opened beforehand.

    A minimal HTTP/1.1 client on asyncio streams: an aiohttp client costs about a
    millisecond of this process's CPU per request, which for a burst of 200 would be
    measured as the bot's latency. Connections are opened (and accepted by the bot)
    before the clock starts; each connection then sends its requests one after another,
    so with ``concurrency >= len(requests)`` every request is written in the same
    event-loop pass and the clock of each starts just before its own write.
    """
    n = max(1, min(concurrency, len(requests)))
    conns = await asyncio.gather(*(asyncio.open_connection("127.0.0.1", port) for _ in range(n)))
    wires = [(req, http_request(port, req)) for req in requests]
    results: list[Result] = []

    async def worker(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, mine: list[Any]
    ) -> None:
        for req, wire in mine:
            sent, started = time.time(), time.perf_counter()
            writer.write(wire)
            try:
                status = await asyncio.wait_for(_read_response(reader), REQUEST_TIMEOUT_S)
                error = ""
            except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError) as exc:
                status, error = 0, type(exc).__name__
            ms = (time.perf_counter() - started) * 1000
            results.append(Result(req.kind, req.label, status, ms, error, req.trigger, sent))
            if error:
                return

    try:
        await asyncio.gather(*(worker(r, w, wires[i::n]) for i, (r, w) in enumerate(conns)))
    finally:
        for _, writer in conns:
            writer.close()
    return results


def _client_main(conn: Connection) -> None:
    """The client process: fire each burst it is sent, send back the results."""
    while (job := conn.recv()) is not None:
        port, requests, concurrency = job
        conn.send(asyncio.run(fire(port, requests, concurrency)))
    conn.close()


class Client:
    """The HTTP client in a process of its own (``spawn``), started once.

    Why not in this process: the stand-in serves the bot's Web API calls (ephemerals,
    modals, ``response_url`` posts) from a thread here; sharing a GIL with it would delay
    the client's reading of the acks and be measured as the bot's latency.
    """

    def __init__(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_client_main, args=(child,), name="ack-client")

    def __enter__(self) -> Client:
        self._proc.start()
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(OSError):
            self._conn.send(None)
        self._proc.join(30)
        if self._proc.is_alive():
            self._proc.terminate()
            self._proc.join(10)

    def fire(self, port: int, requests: list[Prepared], concurrency: int) -> list[Result]:
        self._conn.send((port, requests, concurrency))
        if not self._conn.poll(REQUEST_TIMEOUT_S * len(requests) + 60):
            raise TimeoutError("the client process did not answer")
        results: list[Result] = self._conn.recv()
        return results

    def one(self, port: int, request: Prepared) -> Result:
        return self.fire(port, [request], 1)[0]


# ---------------------------------------------------------------- figures


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (p99 of 200 values is the 198th smallest)."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))
    return ordered[int(rank) - 1]


def summary(results: list[Result]) -> Json:
    ms = [r.ms for r in results]
    return {
        "n": len(results),
        "p50": percentile(ms, 50),
        "p90": percentile(ms, 90),
        "p99": percentile(ms, 99),
        "max": max(ms),
        "mean": statistics.fmean(ms),
        "non_200": sum(r.status != 200 for r in results),
        "over_3s": sum(r.ms > SLACK_LIMIT_MS or r.status == 0 for r in results),
    }


def table(rows: list[tuple[str, str, Json]]) -> str:
    head = (
        f"{'mode':<6} {'requests':<9} {'n':>5} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} "
        f"{'max ms':>8} {'non-200':>8} {'>3 s':>5}"
    )
    lines = [head, "-" * len(head)]
    for mode, what, s in rows:
        lines.append(
            f"{mode:<6} {what:<9} {s['n']:>5} {s['p50']:>8.1f} {s['p90']:>8.1f} "
            f"{s['p99']:>8.1f} {s['max']:>8.1f} {s['non_200']:>8} {s['over_3s']:>5}"
        )
    return "\n".join(lines)


# ---------------------------------------------------------------- processes

FLOOR_APP = """
import sys
from aiohttp import web

async def ack(request):
    await request.read()
    return web.Response(text="")

app = web.Application()
app.router.add_post("/slack/events", ack)
app.router.add_get("/healthz", lambda request: web.json_response({"ok": True}))
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None)
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_until(predicate: Callable[[], T | None], timeout: float, what: str) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.05)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")


@contextlib.contextmanager
def process(
    argv: list[str], env: dict[str, str], port: int, log_path: Path, cwd: Path | None = None
) -> Iterator[Json]:
    """A server process until the block ends, then SIGTERM; yields its pid and exit status."""
    outcome: Json = {"returncode": None}
    with log_path.open("w") as log:
        proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=cwd)
        try:

            def healthy() -> bool:
                if proc.poll() is not None:
                    raise RuntimeError(
                        f"{argv[1:3]} exited {proc.returncode}:\n{log_path.read_text()}"
                    )
                try:
                    url = f"http://127.0.0.1:{port}/healthz"
                    with urllib.request.urlopen(url, timeout=1) as r:
                        return bool(json.loads(r.read())["ok"])
                except OSError:
                    return False

            wait_until(healthy, 90, f"{argv[1:3]} to answer /healthz")
            outcome["pid"] = proc.pid
            yield outcome
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(90)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)
            outcome["returncode"] = proc.returncode


# ---------------------------------------------------------------- the benchmark


def machine() -> Json:
    model = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    ram = "unknown"
    with contextlib.suppress(OSError, ValueError, IndexError):
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        ram = f"{kb / 1024 / 1024:.1f} GiB"
    return {
        "cpus": os.cpu_count(),
        "cpu": model,
        "ram": ram,
        "python": platform.python_version(),
        "crewai": metadata.version("crewai"),
        "slack_bolt": metadata.version("slack_bolt"),
        "aiohttp": metadata.version("aiohttp"),
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


def cpu_ms(pid: int) -> tuple[float, float]:
    """CPU time (user + system) of ``pid``'s main thread (its event loop) and of the process."""

    def read(path: str) -> float:
        fields = Path(path).read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")

    return read(f"/proc/{pid}/task/{pid}/stat"), read(f"/proc/{pid}/stat")


def settle(
    slack: StandInLoop, at_least: int = 0, quiet: float = 0.5, timeout: float = 30.0
) -> None:
    """Wait until the bot's after-ack work (ephemerals, modals, responses) has stopped.

    That is: at least ``at_least`` Web API calls in the stand-in's log, then none for
    ``quiet`` seconds (or ``timeout``).
    """
    last, since = -1, time.monotonic()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        count = slack.call(lambda: len(slack.standin.calls()))
        if count != last:
            last, since = count, time.monotonic()
        elif count >= at_least and time.monotonic() - since >= quiet:
            return
        time.sleep(0.05)


class Bench:
    """One benchmark: the stand-in, the store, and the serve process's port."""

    def __init__(
        self,
        args: argparse.Namespace,
        slack: StandInLoop,
        client: Client,
        store: Store,
        port: int,
    ) -> None:
        self.args = args
        self.client = client
        self.slack = slack
        self.standin = slack.standin
        self.store = store
        self.port = port
        self.per_burst: list[str] = []
        self.problems: list[str] = []  # the measurement is not valid
        self.findings: list[str] = []  # the bot misbehaved under the load
        self.opens: dict[str, list[float]] = {}  # per mode: views.open, ms after its click
        self.review_ts: list[str] = []
        self.status_run = ""
        # per mode, per burst: p99 ms and CPU ms per request (event loop, whole process)
        self.rounds: dict[str, list[Json]] = {}
        self.open_p99s: dict[str, list[float]] = {}  # per mode: views.open p99 per burst

    def command(self, text: str, user: str = REVIEWER) -> Result:
        result = self.client.one(
            self.port, self.slack.call(lambda: slash(self.standin, user, text))
        )
        if result.status != 200:
            raise RuntimeError(f"/crew {text}: HTTP {result.status} {result.error}")
        return result

    def reviews_to_click(self, count: int) -> None:
        for i in range(count):
            self.command(f"run review topic=note{i}")

        def review_messages() -> list[str] | None:
            found = [
                m["ts"]
                for m in self.standin.messages(CHANNEL)
                if m.get("thread_ts") and '"countersign:approve"' in json.dumps(m.get("blocks"))
            ]
            return found if len(found) >= count else None

        self.review_ts = wait_until(
            lambda: self.slack.call(review_messages), 120, f"{count} review messages"
        )
        self.status_run = self.store.list_runs(crew="review")[0].id

    def start_busy(self, count: int) -> list[str]:
        inputs = f"topic=load steps={self.args.steps} load={self.args.load}"
        for _ in range(count):
            self.command(f"run busy {inputs}")

        def running() -> list[str] | None:
            ids = [r.id for r in self.store.list_runs(status=RunStatus.RUNNING, crew="busy")]
            return ids if len(ids) == count else None

        return wait_until(running, 120, f"{count} busy runs running")

    def after_acks(self, mode: str, since: int, burst: list[Result]) -> str:
        """The Web API calls the bot made since call number ``since``, and their failures.

        Also how long after its click (sent in ``burst``) each ``views.open`` reached Slack:
        a click's trigger_id is valid for 3 s, so a later call fails (expired_trigger_id).
        """
        calls = self.slack.call(lambda: self.standin.calls()[since:])
        if not calls:
            return "nothing"
        sent = {r.trigger: r.sent for r in burst if r.trigger}
        opens = sorted(
            (c.at - sent[c.params["trigger_id"]]) * 1000
            for c in calls
            if c.method == "views.open" and c.params.get("trigger_id") in sent
        )
        self.opens.setdefault(mode, []).extend(opens)
        if opens:
            self.open_p99s.setdefault(mode, []).append(percentile(opens, 99))
        methods: dict[str, int] = {}
        errors: dict[str, int] = {}
        for call in calls:
            methods[call.method] = methods.get(call.method, 0) + 1
            if not call.ok:
                key = f"{call.method}: {call.error}"
                errors[key] = errors.get(key, 0) + 1
        text = ", ".join(f"{m} x{n}" for m, n in sorted(methods.items()))
        if opens:
            text += (
                f"; views.open reached Slack {percentile(opens, 50):.0f} ms (p50) / "
                f"{percentile(opens, 99):.0f} ms (p99) / {opens[-1]:.0f} ms (max) after the "
                "click"
            )
        if errors:
            text += "; FAILED: " + ", ".join(f"{k} x{n}" for k, n in sorted(errors.items()))
            self.findings.append(f"Web API calls failed after the acks: {sorted(errors)}")
        return text

    def bursts(
        self, mode: str, port: int, pid: int, busy: list[str] | None, floor: Json | None
    ) -> tuple[list[Result], list[Result]]:
        """``--bursts`` rounds; with ``busy``, check those runs executed during each one.

        With ``floor`` (its port and pid), each round is a burst to the bot and one to the
        floor, in alternating order (the bot first in odd rounds), the bot's work after its
        acks done before the floor's burst starts: the floor is measured under the same
        load as the bot, round by round. The bot's results, the floor's.
        """
        results: list[Result] = []
        floor_results: list[Result] = []
        phase_growth: dict[str, int] = {}
        for b in range(self.args.bursts):
            if floor is not None and b % 2 == 1:
                floor_results += self.floor_burst(mode, b, floor)
            if busy is not None:
                before = {r: len(self.store.load_journal(r)) for r in busy}
                if {r.id for r in self.store.list_runs(status=RunStatus.RUNNING)} != set(busy):
                    self.problems.append(f"{mode} burst {b + 1}: other runs running before it")
            reqs = self.requests()
            calls0 = self.slack.call(lambda: len(self.standin.calls()))
            # every click and every /crew status makes at least one Web API call after the ack
            expected = sum(r.kind == "click" or r.label == "/crew status" for r in reqs)
            got, line = self.burst(mode, b, port, pid, reqs)
            results += got
            settle(self.slack, at_least=calls0 + expected)
            if busy:
                # Counted once the bot's work after the acks is done too: a small burst
                # takes milliseconds, less than one turn of a busy run.
                running = {r.id for r in self.store.list_runs(status=RunStatus.RUNNING)}
                grew = [len(self.store.load_journal(r)) - before[r] for r in busy]
                line += (
                    f"; runs running after it: {len(running & set(busy))}/{len(busy)}, "
                    f"journal entries each busy run added during it and its aftermath: {grew}"
                )
                for run_id, added in zip(busy, grew, strict=True):
                    phase_growth[run_id] = phase_growth.get(run_id, 0) + added
                if not running >= set(busy):
                    self.problems.append(f"{mode} burst {b + 1}: a busy run stopped running")
            self.per_burst.append(line)
            self.per_burst.append(
                "    after the acks, the bot called: " + self.after_acks(mode, calls0, got)
            )
            if floor is not None and b % 2 == 0:
                floor_results += self.floor_burst(mode, b, floor)
        if busy and not all(phase_growth.get(r, 0) > 0 for r in busy):
            self.problems.append(f"{mode}: a busy run added no journal entry during the bursts")
        return results, floor_results

    def requests(self) -> list[Prepared]:
        return self.slack.call(
            lambda: mix(
                self.standin,
                self.args.requests,
                self.review_ts,
                self.status_run,
                static=self.args.mix == "static",
            )
        )

    def burst(
        self, mode: str, b: int, port: int, pid: int, reqs: list[Prepared]
    ) -> tuple[list[Result], str]:
        """One burst: its results and its line (latency, and the server's CPU during it)."""
        cpu0 = cpu_ms(pid)
        t0 = time.perf_counter()
        got = self.client.fire(port, reqs, self.args.concurrency)
        wall = (time.perf_counter() - t0) * 1000
        loop_cpu, all_cpu = (a - b for a, b in zip(cpu_ms(pid), cpu0, strict=True))
        s = summary(got)
        self.rounds.setdefault(mode, []).append(
            {"p99": s["p99"], "loop_cpu": loop_cpu / len(got), "cpu": all_cpu / len(got)}
        )
        errors = sorted({r.error for r in got if r.error})
        if errors:
            self.problems.append(f"{mode} burst {b + 1}: client errors {errors}")
        line = (
            f"{mode} burst {b + 1}: {len(got)} requests answered in {wall:.0f} ms "
            f"(connecting included), p50 {s['p50']:.1f} / p99 {s['p99']:.1f} / "
            f"max {s['max']:.1f} ms; server CPU meanwhile: event-loop thread {loop_cpu:.0f} ms "
            f"({loop_cpu / len(got):.2f} ms/request), whole process {all_cpu:.0f} ms"
        )
        return got, line

    def floor_burst(self, mode: str, b: int, floor: Json) -> list[Result]:
        got, line = self.burst(f"floor {mode}", b, floor["port"], floor["pid"], self.requests())
        self.per_burst.append(line)
        return got


def spread(values: list[float], fmt: str = ".2f") -> str:
    """Median (min..max) of ``values``."""
    return f"{statistics.median(values):{fmt}} ({min(values):{fmt}}..{max(values):{fmt}})"


def cpu(rounds: list[Json], key: str) -> str:
    """CPU ms per request over all of a mode's bursts (each has as many requests: the mean
    of the bursts', finer than one burst's 10 ms ticks), and its spread over the bursts."""
    values = [r[key] for r in rounds]
    return f"{statistics.fmean(values):.3f} (bursts {min(values):.2f}..{max(values):.2f})"


def per_round(mode: str, bot: list[Json], floor: list[Json]) -> str:
    """The p99 ratio to the floor round by round (each round's bot burst over the floor
    burst beside it), and CPU per request: the line to read, median (min..max) of rounds."""
    if not bot:
        return f"{mode}: no bursts"
    text = (
        f"{mode}: p99 {spread([r['p99'] for r in bot], '.1f')} ms; CPU per request: event loop "
        f"{cpu(bot, 'loop_cpu')} ms, whole process {cpu(bot, 'cpu')} ms"
    )
    if not floor:
        return text
    ratios = [r["p99"] / f["p99"] for r, f in zip(bot, floor, strict=True)]
    met = statistics.median(ratios) <= GOAL_FLOOR_RATIO
    return (
        f"{text}\n  floor beside it: p99 {spread([f['p99'] for f in floor], '.1f')} ms, CPU "
        f"per request {cpu(floor, 'cpu')} ms; p99 over the floor's, round by "
        f"round: x{spread(ratios)}. Goal at most x{GOAL_FLOOR_RATIO:.1f} (median): "
        f"{'met' if met else 'NOT met'}."
    )


def run(args: argparse.Namespace) -> int:
    info = machine()
    print(
        f"machine: {info['cpus']} CPUs ({info['cpu']}), {info['ram']}, Python {info['python']}, "
        f"crewai {info['crewai']}, slack_bolt {info['slack_bolt']}, aiohttp {info['aiohttp']}, "
        f"{info['date']}",
        flush=True,
    )
    tmp = Path(tempfile.mkdtemp(prefix="countersign-ack-"))
    db_url = args.database_url or f"sqlite:///{tmp / 'ack.db'}"
    (tmp / "countersign.toml").write_text(CONFIG)
    store = Store.open(db_url)
    port, floor_port = free_port(), free_port()
    standin = SlackStandIn(
        signing_secret=SECRET, bot_endpoint=f"http://127.0.0.1:{port}/slack/events"
    )
    for user, name in ((REVIEWER, "alice"), (STRANGER, "mallory")):
        standin.add_user(user, name)
    standin.add_channel(CHANNEL, "bench", [REVIEWER, STRANGER])
    results: dict[str, list[Result]] = {}
    env = dict(os.environ)
    env.update(
        PYTHONPATH=os.pathsep.join([str(ROOT), str(BENCH)]),
        DATABASE_URL=db_url,
        COUNTERSIGN_CONFIG=str(tmp / "countersign.toml"),
        SLACK_SIGNING_SECRET=SECRET,
        CREWAI_STORAGE_DIR=str(tmp / "crewai"),
        CREWAI_DISABLE_TELEMETRY="true",
        OTEL_SDK_DISABLED="true",
        CREWAI_TRACING_ENABLED="false",
        CREWAI_DISABLE_VERSION_CHECK="true",
    )
    if args.switch_interval is not None:  # an experiment, not what the product does
        site = tmp / "site"
        site.mkdir()
        (site / "sitecustomize.py").write_text(
            f"import sys\nsys.setswitchinterval({args.switch_interval!r})\n"
        )
        env["PYTHONPATH"] = os.pathsep.join([str(site), env["PYTHONPATH"]])
    tree = Path(args.serve_tree).resolve() if args.serve_tree else ROOT
    if args.serve_tree:  # another checkout's bot, with its own virtualenv
        env["PYTHONPATH"] = env["PYTHONPATH"].replace(str(ROOT), str(tree), 1)
    python = str(tree / ".venv" / "bin" / "python") if args.serve_tree else sys.executable
    serve_argv = [python, "-m", "bot", "serve", "--port", str(port)]
    serve_argv += ["--workers", str(args.workers)]
    floor_argv = [sys.executable, "-c", FLOOR_APP, str(floor_port)]
    with contextlib.ExitStack() as stack:
        slack = stack.enter_context(StandInLoop(standin))
        client = stack.enter_context(Client())
        env.update(SLACK_BOT_TOKEN=standin.bot_token, SLACK_API_URL=standin.api_url)
        bench = Bench(args, slack, client, store, port)
        floor = None
        if args.floor:  # same bursts, same payloads, a bare aiohttp handler, alternated
            floor = stack.enter_context(process(floor_argv, env, floor_port, tmp / "floor.log"))
            floor["port"] = floor_port
        started = time.monotonic()
        with process(serve_argv, env, port, tmp / "serve.log", cwd=tree) as proc:
            print(f"serve pid {proc['pid']} up in {time.monotonic() - started:.1f} s", flush=True)
            cold, warm = bench.command("help"), bench.command("help")
            bench.reviews_to_click(4)
            settle(slack)
            print("idle: no run executing; bursts...", flush=True)
            results["idle"], results["floor idle"] = bench.bursts(
                "idle", port, proc["pid"], [], floor
            )
            busy = bench.start_busy(args.workers)
            time.sleep(args.warmup)  # past the crews' construction, into their agent loops
            settle(slack)
            print(f"busy: {len(busy)} runs running; bursts...", flush=True)
            results["busy"], results["floor busy"] = bench.bursts(
                "busy", port, proc["pid"], busy, floor
            )
        code = proc["returncode"]
    store.close()

    rows: list[tuple[str, str, Json]] = []
    for mode, got in results.items():
        if not got:
            continue
        if not mode.startswith("floor"):
            for kind in ("slash", "click"):
                if mine := [r for r in got if r.kind == kind]:
                    rows.append((mode, kind, summary(mine)))
        rows.append((mode, "all", summary(got)))
    print(
        f"\n{args.bursts} burst(s) of {args.requests} signed requests per mode, "
        f"{min(args.concurrency, args.requests)} connections, serve --workers {args.workers}, "
        f"busy load={args.load}, mix {args.mix}, database {db_url.split(':')[0]}, "
        f"bot from {tree}"
        + (f", switch interval {args.switch_interval} s" if args.switch_interval else "")
    )
    print(table(rows))
    idle_all, busy_all = summary(results["idle"]), summary(results["busy"])
    print(
        f"\nbusy/idle: p50 x{busy_all['p50'] / idle_all['p50']:.2f}, "
        f"p99 x{busy_all['p99'] / idle_all['p99']:.2f}. Goal p99 < {GOAL_P99_MS:.0f} ms: "
        f"busy {'met' if busy_all['p99'] < GOAL_P99_MS else 'NOT met'}, "
        f"idle {'met' if idle_all['p99'] < GOAL_P99_MS else 'NOT met'}."
    )
    for mode in ("idle", "busy"):
        print(per_round(mode, bench.rounds.get(mode, []), bench.rounds.get(f"floor {mode}", [])))
    for mode, opens in bench.opens.items():
        if opens:
            p99 = percentile(opens, 99)
            print(
                f"views.open after its click, {mode}: p50 {percentile(opens, 50):.0f} / "
                f"p99 {p99:.0f} / max {max(opens):.0f} ms ({len(opens)} modals; p99 per "
                f"burst {spread(bench.open_p99s[mode], '.0f')} ms). Goal p99 < "
                f"{GOAL_VIEWS_OPEN_MS:.0f} ms: {'met' if p99 < GOAL_VIEWS_OPEN_MS else 'NOT met'}."
            )
    print(
        f"one request at a time after start: first {cold.ms:.1f} ms "
        f"(Bolt's auth.test included), second {warm.ms:.1f} ms"
    )
    print()
    for line in bench.per_burst:
        print(line)
    for line in bench.problems:
        print("PROBLEM (measurement not valid):", line)
    for line in dict.fromkeys(bench.findings):
        print("FINDING:", line)
    print(f"serve exited with {code} after SIGTERM")
    if code != 0:
        print((tmp / "serve.log").read_text()[-3000:])
    if args.keep:
        print(f"kept {tmp}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0 if not bench.problems and code == 0 else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=200, help="requests per burst")
    parser.add_argument("--concurrency", type=int, default=200, help="connections (in flight)")
    parser.add_argument("--bursts", type=int, default=6, help="rounds per mode (default 6)")
    parser.add_argument("--database-url", help="default: a throwaway SQLite file")
    parser.add_argument("--workers", type=int, default=4, help="serve --workers = busy runs")
    parser.add_argument("--load", choices=["cpu", "io"], default="cpu", help="busy crews' load")
    parser.add_argument("--steps", type=int, default=400, help="tool turns per busy run")
    parser.add_argument(
        "--mix",
        choices=["default", "static"],
        default="default",
        help="static: only /crew list and /crew help (answered in the ack, nothing after)",
    )
    parser.add_argument(
        "--switch-interval",
        type=float,
        metavar="SECONDS",
        help="experiment: sys.setswitchinterval() in the serve process (Python's default 0.005)",
    )
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds before busy bursts")
    parser.add_argument(
        "--no-floor",
        dest="floor",
        action="store_false",
        help="skip the floor: the same bursts against a bare aiohttp handler",
    )
    parser.add_argument(
        "--serve-tree",
        metavar="DIR",
        help="run the bot of another checkout (its .venv), e.g. main's, with this harness",
    )
    parser.add_argument("--keep", action="store_true", help="keep the temp dir and logs")
    return run(parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
