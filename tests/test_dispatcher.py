"""Two dispatchers on one database (two bot replicas): each row goes out once.

The dispatchers are the real ones, on one event loop, each with its own Web API client
to the stand-in; the rows are real runs' announcements in a real database.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from slack_sdk.web.async_client import AsyncWebClient

from bot.sandbox import StandInThread
from bot.slack.dispatcher import Dispatcher
from crew_runtime.config import Config
from storage import Store
from tests.support.slack_harness import CHANNEL, new_standin

RUNS = 20


def test_two_dispatchers_deliver_each_row_once(db_url: str, tmp_path: Path) -> None:
    store = Store.open(db_url)
    config = Config(path=tmp_path / "countersign.toml")
    for n in range(RUNS):
        store.create_run("writer", {"n": str(n)}, channel=CHANNEL)
    with StandInThread(new_standin()) as slack:

        async def both() -> list[int]:
            dispatchers = [
                Dispatcher(
                    AsyncWebClient(token=slack.standin.bot_token, base_url=slack.api_url),
                    store,
                    config,
                )
                for _ in range(2)
            ]
            return list(await asyncio.gather(*(d.drain() for d in dispatchers)))

        sent = asyncio.run(both())
        assert sum(sent) == RUNS
        roots = [m for m in slack.messages(CHANNEL) if m.get("bot_id")]
        assert len(roots) == RUNS
        assert {r.thread_ts for r in store.list_runs()} == {m["ts"] for m in roots}
    assert store.due_outbox() == []
    store.close()
