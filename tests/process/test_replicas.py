"""Two ``serve`` replicas on one database: what one of them does is not done again by the other.

Each replica's part is the real one (the intake, the review sweep) with a store of its own on
one database, as two processes have; they race for real on PostgreSQL (and take turns on
SQLite's write lock).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy import select

from bot.slack.intake import Intake, Kind, Receipt, SlackRequest
from sandbox import StandInThread
from storage import InboxStore, NewReview, RunStatus, Store
from storage.schema import inbox, outbox
from storage.status import FINAL_RUN_STATUSES, DecisionKind, OutboxKind, ReviewKind
from tests.support.harness import ON_POSTGRES
from tests.support.processes import bot_env
from tests.support.processes import serve as _serve
from tests.support.slack_harness import (
    ALICE,
    CHANNEL,
    SECRET,
    free_port,
    new_standin,
    wait_until,
)
from tests.support.zygote import Zygote

FORM = "application/x-www-form-urlencoded"


def test_a_request_slower_than_its_claim_is_handled_once_across_replicas(db_url: str) -> None:
    """The replica handling a request renews its claim; the other one's sweep leaves it be."""
    claim = timedelta(seconds=1.5)
    stores = [Store.open(db_url), Store.open(db_url, upgrade=False)]
    handled: list[str] = []
    release = threading.Event()
    body = urlencode(
        {"command": "/slow", "text": "", "user_id": ALICE, "channel_id": CHANNEL, "trigger_id": "t"}
    )

    def state() -> Any:
        with stores[0].engine.connect() as conn:
            return conn.execute(
                select(inbox.c.claimed_until, inbox.c.attempts, inbox.c.done_at)
            ).one()

    with StandInThread(new_standin()) as slack:

        def replica(name: str, store: Store) -> Intake:
            client = AsyncWebClient(token=slack.standin.bot_token, base_url=slack.api_url)
            app = AsyncApp(client=client, signing_secret=SECRET, process_before_response=True)

            @app.command("/slow")
            async def slow(ack: Any) -> None:
                await ack()
                handled.append(name)
                await asyncio.to_thread(release.wait, 60)

            return Intake(app, InboxStore(store, claim=claim))

        async def held_on(since: datetime) -> None:
            """Once the claim is two claims past ``since``: renewed by the first replica,
            not taken by the second."""
            await asyncio.to_thread(
                wait_until,
                lambda: state().attempts > 1 or state().claimed_until > since + 2 * claim,
                30,
                "the claim to be renewed (or taken)",
            )
            assert state().attempts == 1 and handled == ["first"]

        async def scenario() -> None:
            first, second = (
                replica(n, s) for n, s in zip(("first", "second"), stores, strict=True)
            )
            first.start()
            second.start()
            stopping: asyncio.Task[None] | None = None
            try:
                request = SlackRequest(Kind.SLASH_COMMAND, "sig:slow", body, FORM)
                assert await first.receive(request) is Receipt.RECORDED
                # Long past the claim taken at the ack: renewed while in hand, never taken.
                await held_on(state().claimed_until)
                # Stopping, it waits for its handler, and still holds the request meanwhile.
                stopping = asyncio.create_task(first.stop(timeout=60))
                await held_on(state().claimed_until)
                release.set()
                await stopping
                await asyncio.to_thread(
                    wait_until, lambda: state().done_at is not None, 30, "the request handled"
                )
            finally:
                release.set()
                await (stopping or first.stop())
                await second.stop()

        asyncio.run(scenario())
    assert handled == ["first"]
    for store in stores:
        store.close()


def test_two_replicas_sweeping_at_once_remind_and_escalate_each_review_once(db_url: str) -> None:
    """Each due time is a compare-and-set on the review, in the transaction writing the row."""
    stores = [Store.open(db_url), Store.open(db_url, upgrade=False)]
    now = datetime.now(UTC).replace(tzinfo=None)
    reviews = 10
    for n in range(reviews):
        run = stores[0].create_run("writer", {"n": str(n)})
        claimed = stores[0].claim_run("w", timedelta(seconds=30))
        assert claimed is not None and claimed.id == run.id and claimed.lease_token
        ask = NewReview(
            ReviewKind.TASK_REVIEW,
            "task0",
            0,
            "draft",
            remind_at=now - timedelta(seconds=1),
            escalate_at=now - timedelta(seconds=1),
        )
        stores[0].suspend_run(run.id, claimed.lease_token, [ask])
    start = threading.Barrier(len(stores) * 2)
    counts: list[dict[str, int]] = []

    def sweep(store: Store) -> None:
        start.wait(30)
        counts.append(store.sweep_reviews())

    threads = [threading.Thread(target=sweep, args=(s,)) for s in stores * 2]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sum(c["reminded"] for c in counts) == reviews
    assert sum(c["escalated"] for c in counts) == reviews
    with stores[0].engine.connect() as conn:
        kinds = list(conn.execute(select(outbox.c.kind, outbox.c.review_id)).all())
    for kind in (OutboxKind.REVIEW_REMINDED, OutboxKind.REVIEW_ESCALATED):
        announced = [review for k, review in kinds if k == kind]
        assert len(announced) == len(set(announced)) == reviews
    for store in stores:
        store.close()


REPLICAS_CONFIG = f"""
[crews.writer]
factory = "tests.support.crews:writer"
description = "Outline then article, both reviewed"
channel = "{CHANNEL}"
reviewers = ["{ALICE}"]

[crews.reminded]
factory = "tests.support.crews:writer"
description = "The writer, its reviewers reminded after a second"
channel = "{CHANNEL}"
reviewers = ["{ALICE}"]
remind_after = "1s"
"""
RUNS = 30
REMINDER = "⏰"


def _cpu_seconds(pid: int) -> float:
    """User and system CPU time of a live process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.slow
@ON_POSTGRES
def test_two_replicas_and_three_workers_post_each_message_once_and_settle_every_run(
    tmp_path: Path, db_url: str
) -> None:
    """Runs started and decided through either replica at random (some clicks sent to both),
    every message posted once, every reminder once, every run settled."""
    (tmp_path / "countersign.toml").write_text(REPLICAS_CONFIG)
    store = Store.open(db_url)
    rng = random.Random(30)
    ports = [free_port(), free_port()]
    endpoints = [f"http://127.0.0.1:{port}/slack/events" for port in ports]
    with StandInThread(new_standin(bot_endpoint=endpoints[0])) as slack:
        env = bot_env(tmp_path, db_url, slack.standin.bot_token, slack.api_url)
        processes = [_serve(env, port, "--lease", "10") for port in ports]
        for serve in processes:  # --no-workers: the Slack side alone
            assert Path(f"/proc/{serve.pid}/task/{serve.pid}/children").read_text().split() == []
        processes += [
            Zygote.fork(["worker", "--lease", "10"], env, tmp_path, tmp_path / f"worker-{n}.log")
            for n in range(3)
        ]
        try:
            for n in range(RUNS):
                slack.bot_endpoint = rng.choice(endpoints)
                crew = "reminded" if n % 3 == 0 else "writer"
                assert slack.slash_command(ALICE, CHANNEL, "/crew", f"run {crew} topic=t{n}").ok
            clicked: set[str] = set()

            def click_what_is_due() -> bool:
                """Approve each review posted (a reminded crew's outline once reminded),
                through a replica at random, a third of them through both; True once every
                run is settled."""
                for review in store.list_reviews():
                    if review.id in clicked or review.message_ts is None:
                        continue
                    run = store.get_run(review.run_id)
                    assert run.thread_ts is not None
                    if run.crew == "reminded" and review.stream.startswith("task0"):
                        thread = slack.thread(CHANNEL, run.thread_ts)
                        if not any(m["text"].startswith(REMINDER) for m in thread):
                            continue
                    targets = rng.sample(endpoints, 2 if rng.random() < 1 / 3 else 1)
                    for endpoint in targets:
                        slack.bot_endpoint = endpoint
                        click = slack.click_button(
                            ALICE, CHANNEL, review.message_ts, "countersign:approve"
                        )
                        assert click.status == 200
                    clicked.add(review.id)
                runs = store.list_runs(limit=RUNS + 1)
                return len(runs) == RUNS and all(r.status in FINAL_RUN_STATUSES for r in runs)

            wait_until(click_what_is_due, timeout=300, what="every run to settle")
            # Every row sent, a progress edit waiting out its two seconds too (not yet due).
            wait_until(lambda: not _unsent(store), timeout=60, what="the outbox to drain")
            cpu = sum(_cpu_seconds(p.pid) for p in processes)
        finally:
            for proc in processes:
                proc.send_signal(signal.SIGTERM)
            for proc in processes:
                proc.wait(120)
        print(f"two serve replicas and three workers, {RUNS} runs: {cpu:.1f} s of CPU")
        assert [p.returncode for p in processes] == [0] * 5, [p.stdout for p in processes]

        runs = store.list_runs(limit=RUNS + 1)
        assert sorted(r.status for r in runs) == [RunStatus.SUCCEEDED] * RUNS
        reviews = store.list_reviews(status=None)
        assert len(reviews) == 2 * RUNS
        assert all(r.decision and r.decision.kind == DecisionKind.APPROVE for r in reviews)
        with store.engine.connect() as conn:
            rows = conn.execute(
                select(outbox.c.id, outbox.c.kind, outbox.c.review_id, outbox.c.sent_at)
            ).all()
        assert all(row.sent_at is not None for row in rows)
        reminder_rows = {
            row.id: row.review_id for row in rows if row.kind == OutboxKind.REVIEW_REMINDED
        }
        assert len(set(reminder_rows.values())) == len(reminder_rows)  # one per review at most

        # Every message was posted once: each carries the outbox row and step it delivers.
        posted = [m for m in slack.messages(CHANNEL) if m.get("bot_id")]
        tags = [m["metadata"]["event_payload"] for m in posted]
        assert len({json.dumps(tag, sort_keys=True) for tag in tags}) == len(tags)
        roots = [m for m in posted if m.get("thread_ts") in (None, m["ts"])]
        assert len(roots) == RUNS
        # A reminder is posted by its row (none if its review was decided first), and every
        # outline of a reminded crew waited for its reminder.
        reminders = [
            tag["outbox_id"]
            for m, tag in zip(posted, tags, strict=True)
            if m["text"].startswith(REMINDER)
        ]
        assert set(reminders) <= set(reminder_rows) and len(reminders) >= RUNS // 3
    store.close()


def _unsent(store: Store) -> int:
    with store.engine.connect() as conn:
        return len(conn.execute(select(outbox.c.id).where(outbox.c.sent_at.is_(None))).all())
