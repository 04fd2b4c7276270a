"""Two ``serve`` replicas on one database: what one of them does is not done again by the other.

Each replica's part is the real one (the intake, the review sweep) with a store of its own on
one database, as two processes have; they race for real on PostgreSQL (and take turns on
SQLite's write lock).
"""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy import select

from bot.sandbox import StandInThread
from bot.slack.intake import Intake, Kind, Receipt, SlackRequest
from storage import InboxStore, NewReview, Store
from storage.schema import inbox, outbox
from storage.status import OutboxKind, ReviewKind
from tests.slack_harness import ALICE, CHANNEL, SECRET, new_standin, wait_until

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

        async def scenario() -> None:
            first, second = (
                replica(n, s) for n, s in zip(("first", "second"), stores, strict=True)
            )
            first.start()
            second.start()
            try:
                request = SlackRequest(Kind.SLASH_COMMAND, "sig:slow", body, FORM)
                assert await first.receive(request) is Receipt.RECORDED
                recorded = state().claimed_until
                # Long past the claim taken at the ack: renewed while in hand, never taken.
                await asyncio.to_thread(
                    wait_until,
                    lambda: state().attempts > 1 or state().claimed_until > recorded + 2 * claim,
                    30,
                    "the claim to be renewed (or taken)",
                )
                assert state().attempts == 1 and handled == ["first"]
                release.set()
                await asyncio.to_thread(
                    wait_until, lambda: state().done_at is not None, 30, "the request handled"
                )
            finally:
                release.set()
                await first.stop()
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
