"""What delivering the outbox costs: rows a second, Slack calls and database commits per row.

The claim: recording each step of a delivery (and claiming each row first) so that a retry
never posts twice costs a few small transactions per row, not a slower thread.

``--runs`` runs (default 200) are set up with the storage calls the runtime makes: each run's
root message, and a review whose 8,000-character draft goes out in two parts (so a row takes
several Slack calls). One real ``Dispatcher`` then drains the outbox into the Slack stand-in,
served on a thread of this process; nothing fails. Timed: the drain, until every row is sent.
Counted: the stand-in's Web API calls and the store's commits (write transactions).

Run: ``.venv/bin/python bench/outbox.py [--runs 200] [--database-url URL]``. Seconds on
SQLite, a little more on PostgreSQL.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections import Counter
from datetime import timedelta

import _common as c  # first: sets CrewAI's opt-outs, puts the repo on sys.path
from aiohttp import ClientSession
from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy import event

from bot.slack.dispatcher import Dispatcher
from crew_runtime.config import Config
from crew_runtime.service import Countersign
from sandbox import SlackStandIn, StandInThread
from storage import NewReview, ReviewKind

CHANNEL = "C0BENCH"
DRAFT = "".join(f"Paragraph {n}: otters hold hands while they sleep.\n\n" for n in range(160))


def setup(store: c.Store, runs: int) -> None:
    for n in range(runs):
        run = store.create_run("draft", {"n": str(n)}, channel=CHANNEL)
        claimed = store.claim_run("bench", timedelta(minutes=5))
        assert claimed is not None and claimed.id == run.id and claimed.lease_token
        ask = NewReview(kind=ReviewKind.TASK_REVIEW, stream="task0:Writer", seq=0, prompt=DRAFT)
        store.suspend_run(run.id, claimed.lease_token, [ask])


async def drain(store: c.Store, config: Config, api_url: str, token: str) -> tuple[int, float]:
    async with ClientSession() as session:
        client = AsyncWebClient(token=token, base_url=api_url, session=session)
        dispatcher = Dispatcher(client, Countersign(store, config))
        started = time.perf_counter()
        sent = 0
        while batch := await dispatcher.drain():
            sent += batch
        return sent, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    c.add_database_arg(parser)
    args = parser.parse_args()
    with c.database(args.database_url) as (url, workdir):
        store = c.open_store(url)
        setup(store, args.runs)
        commits = Counter[str]()
        event.listen(store.engine, "commit", lambda _conn: commits.update(["commit"]))
        standin = SlackStandIn(signing_secret="bench")
        standin.add_channel(CHANNEL, "bench", ["UALICE"])
        config = Config(path=workdir / "countersign.toml")
        with StandInThread(standin, timeout=600) as slack:
            sent, seconds = asyncio.run(drain(store, config, slack.api_url, standin.bot_token))
            calls = Counter(call.method for call in slack.calls())
            shown = len(slack.messages(CHANNEL))
        store.close()
    rows = 2 * args.runs
    assert sent == rows, f"{sent} of {rows} rows sent"
    assert shown == 3 * args.runs, f"{shown} messages for {args.runs} runs"
    print(f"{c.backend(url)}, {args.runs} runs ({rows} rows, {shown} messages); {c.machine()}")
    print(
        c.table(
            ["rows/s", "ms/row", "Slack calls/row", "commits/row", "calls by method"],
            [
                [
                    f"{rows / seconds:.0f}",
                    f"{1000 * seconds / rows:.1f}",
                    f"{sum(calls.values()) / rows:.2f}",
                    f"{commits['commit'] / rows:.2f}",
                    ", ".join(f"{m} {n}" for m, n in sorted(calls.items())),
                ]
            ],
        )
    )


if __name__ == "__main__":
    main()
