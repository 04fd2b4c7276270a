"""An ack means "recorded": faults between Slack and the database never lose what was acked.

Each test injects the fault for real: ``countersign serve`` killed with SIGKILL right after
its acks, the database cut off (PostgreSQL through a proxy the test closes; SQLite locked by
another connection's exclusive transaction), requests replayed byte for byte, and requests
no Slack would send.
"""

from __future__ import annotations

import logging
import os
import signal
import sqlite3
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.engine import make_url

from bot.slack import text
from bot.slack.intake import parse_body
from crew_runtime.config import Config, load_config
from sandbox import StandInThread, sign
from sandbox.delivery import encode
from storage import ReviewStatus, Store
from storage.schema import inbox
from tests.support.processes import bot_env, worker
from tests.support.processes import serve as _serve
from tests.support.slack_harness import (
    ALICE,
    CHANNEL,
    SECRET,
    buttons,
    free_port,
    new_standin,
    slack_and_bot,
    wait_until,
)
from tests.support.tcp_proxy import TcpProxy

pytestmark = pytest.mark.slow

Json = dict[str, Any]

CONFIG = f"""
[crews.writer]
factory = "tests.support.crews:writer"
description = "Outline then article, both reviewed"
channel = "{CHANNEL}"
reviewers = ["{ALICE}"]
"""


@pytest.fixture
def config(tmp_path: Path) -> Config:
    path = tmp_path / "countersign.toml"
    path.write_text(CONFIG)
    return load_config(path)


def _reviews_to_click(slack: StandInThread, count: int) -> list[Json]:
    """The review message of each of ``count`` runs, once all are posted."""

    def found() -> list[Json] | None:
        roots = [
            m
            for m in slack.messages(CHANNEL)
            if m.get("bot_id") and m.get("thread_ts") in (None, m["ts"])
        ]
        reviews = [
            next((m for m in slack.thread(CHANNEL, root["ts"]) if buttons(m)), None)
            for root in roots
        ]
        ready = [r for r in reviews if r is not None]
        return ready if len(ready) == count else None

    return wait_until(found, timeout=120, what=f"{count} reviews with buttons")


def test_clicks_acked_just_before_serve_is_killed_are_all_decided(
    tmp_path: Path, db_url: str, config: Config
) -> None:
    store = Store.open(db_url)
    port = free_port()
    standin = new_standin(bot_endpoint=f"http://127.0.0.1:{port}/slack/events")
    with StandInThread(standin) as slack:
        env = bot_env(tmp_path, db_url, standin.bot_token, slack.api_url)
        with worker(env):
            first = _serve(env, port)
            try:
                for n in range(8):
                    assert slack.slash_command(ALICE, CHANNEL, "/crew", f"run writer topic=t{n}").ok
                reviews = _reviews_to_click(slack, 8)
                for review in reviews:
                    click = slack.click_button(ALICE, CHANNEL, review["ts"], "countersign:approve")
                    assert click.status == 200
            finally:
                os.kill(first.pid, signal.SIGKILL)  # at once: the last clicks are in hand
                first.communicate(timeout=30)
            # An ack means recorded: each acked click is in the inbox, handled or not.
            assert len(_clicks_recorded(store)) == 8

            second = _serve(env, port)
            try:
                decided = wait_until(
                    lambda: (
                        [r for r in store.list_reviews(status=None) if r.decision] or None
                        if len([r for r in store.list_reviews(status=None) if r.decision]) == 8
                        else None
                    ),
                    timeout=120,
                    what="all 8 acked clicks to be decided after the restart",
                )
                assert (
                    sorted((r.decision.kind, r.decision.decided_by) for r in decided if r.decision)
                    == [("approve", ALICE)] * 8
                )
                # Each run went on to its second task: the decisions were acted on, once.
                wait_until(
                    lambda: len(store.list_reviews(status=ReviewStatus.PENDING)) == 8,
                    timeout=120,
                    what="the article review of each run",
                )
            finally:
                second.send_signal(signal.SIGTERM)
                out, _ = second.communicate(timeout=60)
            assert second.returncode == 0, out
    store.close()


def _clicks_recorded(store: Store) -> list[str]:
    """The inbox keys of the button clicks recorded so far."""
    with store.engine.connect() as conn:
        rows = conn.execute(select(inbox.c.key, inbox.c.body, inbox.c.content_type)).all()
    return [
        row.key
        for row in rows
        if parse_body(row.body, row.content_type).get("type") == "block_actions"
    ]


@contextmanager
def _database_down(db_url: str, bot_store: Store, proxy: TcpProxy | None) -> Iterator[None]:
    """The bot's database unreachable (PostgreSQL: the proxy cut) or locked (SQLite: another
    connection's exclusive transaction) for the duration."""
    if proxy is not None:
        proxy.cut()
        try:
            yield
        finally:
            proxy.restore()
        return
    path = make_url(db_url).database
    assert path is not None
    locker = sqlite3.connect(path, isolation_level=None, timeout=30)
    locker.execute("BEGIN EXCLUSIVE")
    try:
        yield
    finally:
        locker.execute("ROLLBACK")
        locker.close()


@contextmanager
def _bot_store(db_url: str) -> Iterator[tuple[Store, TcpProxy | None]]:
    """The store the bot uses: on PostgreSQL through a proxy the test can cut."""
    url = make_url(db_url)
    if url.get_backend_name() != "postgresql":
        store = Store.open(db_url)
        yield store, None
        store.close()
        return
    with TcpProxy(url.host or "127.0.0.1", url.port or 5432) as proxy:
        store = Store.open(proxy.url_through(db_url))
        yield store, proxy
        store.close()


@pytest.mark.parametrize("socket_mode", [False, True], ids=["http", "socket-mode"])
def test_while_the_database_is_down_nothing_is_acked_and_people_are_told(
    db_url: str, config: Config, socket_mode: bool
) -> None:
    store = Store.open(db_url)
    with (
        _bot_store(db_url) as (bot_store, proxy),
        slack_and_bot(config, bot_store, socket_mode=socket_mode) as (slack, _),
    ):
        # What is checked is the answer, not its speed (an envelope left unacked is reported
        # once this runs out).
        slack.standin.ack_timeout = 5 if socket_mode else 30
        assert slack.slash_command(ALICE, CHANNEL, "/crew", "run writer topic=otters").ok
        (review,) = _reviews_to_click(slack, 1)
        told_before = len(slack.ephemerals(ALICE))
        with _database_down(db_url, bot_store, proxy):
            click = slack.click_button(ALICE, CHANNEL, review["ts"], "countersign:approve")
            command = slack.slash_command(ALICE, CHANNEL, "/crew", "run writer topic=seals")
        assert not click.ok, "a click that was not recorded must not be acked"
        assert command.ok
        told = [e.text for e in slack.ephemerals(ALICE)[told_before:]]
        assert told == [text.NOT_RECORDED]
        # Nothing happened, then or once the database was back.
        (pending,) = store.list_reviews()
        assert pending.status == ReviewStatus.PENDING
        assert len(store.list_runs()) == 1
        # The person tries again: it works.
        again = slack.click_button(ALICE, CHANNEL, review["ts"], "countersign:approve")
        assert again.ok
        decided = wait_until(
            lambda: store.get_review(pending.id).decision, what="the second click's decision"
        )
        assert (decided.kind, decided.decided_by) == ("approve", ALICE)
        assert len(store.list_runs()) == 1
    store.close()


def test_a_slash_command_mentioning_payload_starts_its_run(db_url: str, config: Config) -> None:
    store = Store.open(db_url)
    with slack_and_bot(config, store) as (slack, _bot):
        assert slack.slash_command(ALICE, CHANNEL, "/crew", "run writer topic=payloads").ok
        run = wait_until(lambda: next(iter(store.list_runs()), None), what="the run")
        assert run.inputs == {"topic": "payloads"}
    store.close()


def _post(url: str, body: bytes, headers: dict[str, str]) -> int:
    request = urllib.request.Request(url, data=body, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def test_a_signed_request_replayed_byte_for_byte_starts_nothing_more(
    db_url: str, config: Config
) -> None:
    store = Store.open(db_url)
    with slack_and_bot(config, store) as (slack, bot):
        sent = slack.slash_command(ALICE, CHANNEL, "/crew", "run writer topic=otters")
        assert sent.ok
        body, content_type = encode("slash_commands", sent.payload)
        now = int(time.time())
        headers = {
            "Content-Type": content_type,
            "X-Slack-Request-Timestamp": str(now),
            "X-Slack-Signature": sign(SECRET, now, body),
        }
        for _ in range(3):  # within Slack's five minutes, the signature is valid every time
            assert _post(bot.url, body.encode(), headers) == 200
        _reviews_to_click(slack, 1)
        assert len(store.list_runs()) == 1
    store.close()


def test_requests_no_slack_would_send_get_one_line_each(
    db_url: str, config: Config, caplog: pytest.LogCaptureFixture
) -> None:
    store = Store.open(db_url)
    with slack_and_bot(config, store) as (slack, bot):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="bot.hosting.http"):
            bad_time = {"X-Slack-Request-Timestamp": "soon", "X-Slack-Signature": "v0=00"}
            assert _post(bot.url, b"command=%2Fcrew", bad_time) == 401
            now = int(time.time())
            latin = "command=/crew&text=caf\xe9".encode("latin-1")
            signed = {
                "X-Slack-Request-Timestamp": str(now),
                "X-Slack-Signature": sign(SECRET, now, latin.decode("latin-1")),
            }
            assert _post(bot.url, latin, signed) == 400
        lines = [r for r in caplog.records if r.name == "bot.hosting.http"]
        assert len(lines) == 2 and not any(r.exc_info for r in lines)
        # And the bot is none the worse for it.
        assert slack.slash_command(ALICE, CHANNEL, "/crew", "run writer topic=otters").ok
        _reviews_to_click(slack, 1)
    store.close()
