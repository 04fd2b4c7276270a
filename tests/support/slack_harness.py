"""End-to-end bench: the real bot (``Deployment``) on a real port, Slack played by the stand-in.

The bot runs on its own event loop in a thread (its worker pool in more threads),
exactly as ``countersign serve`` runs it; the stand-in sends signed HTTP requests to
its ``/slack/events`` and records every Web API call the bot makes.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

from bot.hosting.server import Deployment, SlackSettings
from crew_runtime.config import Config, load_config
from sandbox import SlackStandIn, StandInThread
from storage import Backoff, Store
from tests.support.templates import open_store

SECRET = "e2e-signing-secret"
CHANNEL = "C0WRITING"
ALICE = "UALICE"
BOB = "UBOB"
MALLORY = "UMALLORY"

# The bot's retries of Slack calls that failed: soon, so that tests do not wait out seconds.
RETRY_SOON = Backoff(first=timedelta(milliseconds=50), most=timedelta(milliseconds=400))

T = TypeVar("T")
Json = dict[str, Any]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class BotThread:
    """``Deployment.serve_http`` on its own loop, started and stopped from a test."""

    def __init__(
        self,
        slack: SlackSettings,
        config: Config,
        store: Store,
        port: int,
        *,
        socket_mode: bool = False,
        workers: int = 2,
    ) -> None:
        self.deployment_args = (slack, config, store)
        self.workers = workers
        self.port = port
        self.socket_mode = socket_mode
        self.url = f"http://127.0.0.1:{port}/slack/events"
        self._loop = asyncio.new_event_loop()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._main, name="bot", daemon=True)
        self._ready = threading.Event()
        self.deployment: Deployment | None = None

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._serve())
        finally:
            self._loop.close()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        slack, config, store = self.deployment_args
        self.deployment = Deployment(
            slack,
            config,
            store,
            workers=self.workers,
            lease=timedelta(seconds=5),
            poll=timedelta(seconds=0.1),
            sweep_every=0.2,
            workers_in_process=True,
            slack_backoff=RETRY_SOON,
            # Socket Mode has no port of its own: the test's port is its metrics port, where
            # the HTTP API is served too.
            metrics_at=("127.0.0.1", self.port) if self.socket_mode else None,
        )
        if self.socket_mode:
            serving = self.deployment.serve_socket_mode(self._stop)
        else:
            serving = self.deployment.serve_http("127.0.0.1", self.port, self._stop)
        task = asyncio.create_task(serving)
        while not _listening(self.port):
            await asyncio.sleep(0.02)
        self._ready.set()
        await task

    def __enter__(self) -> BotThread:
        self._thread.start()
        if not self._ready.wait(60):
            raise TimeoutError("the bot did not start listening")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(60)


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def new_standin(**options: Any) -> SlackStandIn:
    standin = SlackStandIn(signing_secret=SECRET, **options)
    for user, name in ((ALICE, "alice"), (BOB, "bob"), (MALLORY, "mallory")):
        standin.add_user(user, name)
    standin.add_channel(CHANNEL, "writing", [ALICE, BOB, MALLORY])
    return standin


@contextmanager
def slack_and_bot(
    config: Config, store: Store, *, socket_mode: bool = False, workers: int = 2
) -> Iterator[tuple[StandInThread, BotThread]]:
    port = free_port()
    standin = new_standin(
        bot_endpoint=f"http://127.0.0.1:{port}/slack/events",
        transport="socket" if socket_mode else "http",
    )
    with StandInThread(standin) as slack:
        settings = slack_settings(slack)
        with BotThread(
            settings, config, store, port, socket_mode=socket_mode, workers=workers
        ) as bot:
            if socket_mode:
                slack.wait_for_socket(timeout=30)
            yield slack, bot


def slack_settings(slack: StandInThread) -> SlackSettings:
    """The bot's Slack settings for the stand-in ``slack`` serves."""
    return SlackSettings(
        bot_token=slack.standin.bot_token,
        signing_secret=SECRET,
        app_token=slack.standin.app_token,
        api_url=slack.api_url,
    )


@contextmanager
def configured(tmp_path: Path, db_url: str, config: str) -> Iterator[tuple[Config, Store]]:
    """The configuration ``config`` loaded from a file in ``tmp_path``, and a store on
    ``db_url``, closed afterwards."""
    path = tmp_path / "countersign.toml"
    path.write_text(config)
    store = open_store(db_url)
    try:
        yield load_config(path), store
    finally:
        store.close()


def wait_until(predicate: Callable[[], T | None], timeout: float = 120.0, what: str = "") -> T:
    """Poll ``predicate`` until it returns something truthy (crews run on real threads).

    ``timeout`` only bounds a failure: on a busy machine a worker child (niced below the bot)
    may take a minute to import CrewAI and reach its first pause."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what or predicate}")


def wait_healthy(port: int, check_alive: Callable[[], None]) -> None:
    """Wait for a ``serve`` process to answer ``/healthz`` on ``port``; ``check_alive`` fails
    the wait (with what the process said) if it exited meanwhile."""

    def healthy() -> bool:
        check_alive()
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as r:
                return bool(json.loads(r.read())["ok"])
        except OSError:
            return False

    wait_until(healthy, timeout=60, what="the bot to answer /healthz")


def said(slack: StandInThread, root_ts: str, words: str) -> Json:
    """The first message of the run's thread (in ``CHANNEL``) that says ``words``, once there."""
    return wait_until(
        lambda: next((m for m in slack.thread(CHANNEL, root_ts) if words in text_of(m)), None),
        what=f"the thread to say {words!r}",
    )


def shows(slack: StandInThread, root_ts: str, ts: str, words: str) -> Json:
    """Message ``ts`` of the run's thread once it shows ``words`` (after an edit, say)."""
    return wait_until(
        lambda: next(
            (m for m in slack.thread(CHANNEL, root_ts) if m["ts"] == ts and words in text_of(m)),
            None,
        ),
        what=f"message {ts} to show {words!r}",
    )


def buttons(message: Json) -> dict[str, Json]:
    """The buttons of a message, by action_id."""
    found = {}
    for block in message.get("blocks") or []:
        for element in block.get("elements") or []:
            if element.get("type") == "button":
                found[element["action_id"]] = element
        accessory = block.get("accessory")
        if accessory and accessory.get("type") == "button":
            found[accessory["action_id"]] = accessory
    return found


def text_of(message: Json) -> str:
    """Everything a person reads in a message: fallback text and all block texts."""
    parts = [str(message.get("text") or "")]

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") in ("mrkdwn", "plain_text") and "text" in node:
                parts.append(str(node["text"]))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(message.get("blocks") or [])
    return "\n".join(parts)


def review_with_buttons(slack: StandInThread, root_ts: str, after: str = "0") -> Json:
    """The first message in the thread, posted after ``after``, that shows buttons."""

    def find() -> Json | None:
        later = [m for m in slack.thread(CHANNEL, root_ts) if float(m["ts"]) > float(after)]
        return next((m for m in later if buttons(m)), None)

    return wait_until(find, what=f"a review message with buttons after {after}")


def root_of(slack: StandInThread) -> Json:
    return wait_until(
        lambda: next((m for m in slack.messages(CHANNEL) if m.get("bot_id")), None),
        what="the run's root message",
    )


def modal_for(slack: StandInThread, user: str, block_id: str = "text") -> Json:
    """The modal a click opened, once it shows its form (it opens as "Loading…" first).

    The form is recognised by one of its inputs, ``block_id``.
    """
    return wait_until(
        lambda: next(
            (
                v
                for v in slack.open_views(user)
                if any(b.get("block_id") == block_id for b in v.get("blocks", []))
            ),
            None,
        ),
        what=f"the form modal of {user}",
    )


def draft_in(message: Json) -> str:
    """The scripted draft shown in a review message (one line starting with its label)."""
    for line in text_of(message).splitlines():
        if line.startswith(("Outline v", "Article v", "Report v")):
            return line.replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")
    raise AssertionError(f"no draft in {text_of(message)!r}")


def home_says(slack: StandInThread, user: str, says: str) -> str:
    """The text of ``user``'s Home tab, once it says ``says``."""

    def shown() -> str | None:
        view = slack.home_view(user)
        said = None if view is None else text_of(view)
        return said if said is not None and says in said else None

    return wait_until(shown, what=f"{user}'s Home to say {says!r}")


def answer_to(slack: StandInThread, user: str, typed: str) -> str:
    """What ``user`` is told privately after typing ``/crew typed``."""
    before = len(slack.ephemerals(user))
    slack.slash_command(user, CHANNEL, "/crew", typed)
    told = wait_until(lambda: slack.ephemerals(user)[before:], what=f"the answer to {typed!r}")
    return str(told[0].text)


def told(slack: StandInThread, user: str, before: int, words: str) -> str:
    said = wait_until(
        lambda: [e.text for e in slack.ephemerals(user)[before:] if words in e.text],
        what=f"{user} told {words!r}",
    )
    return str(said[-1])


@contextmanager
def run_in_slack(
    tmp_path: Path, db_url: str, config: str, command: str, groups: dict[str, list[str]]
) -> Iterator[tuple[StandInThread, Store, Json]]:
    """The bot and the stand-in with ``config``; Alice has typed ``/crew command``: the
    stand-in, the store and the run's root message."""
    path = tmp_path / "countersign.toml"
    path.write_text(config)
    store = Store.open(db_url)
    with slack_and_bot(load_config(path), store) as (slack, _bot):
        for group, members in groups.items():
            slack.add_usergroup(group, members)
        slack.slash_command(ALICE, CHANNEL, "/crew", command)
        root = wait_until(
            lambda: next((m for m in slack.messages(CHANNEL) if m.get("bot_id")), None),
            what="the run's root message",
        )
        yield slack, store, root
    store.close()


NUDGED = f"""
[crews.nudged]
factory = "tests.support.crews:payments"
reviewers = ["{ALICE}", "S0PAYERS"]
remind_after = "1h"
remind_by = "dm"
escalate_to = ["{MALLORY}"]

[crews.nudged.gates.pay]
remind_after = "1s"
escalate_after = "2s"
"""
