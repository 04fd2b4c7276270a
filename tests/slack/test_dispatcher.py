"""Two dispatchers on one database (two bot replicas): each row goes out once.

The dispatchers are the real ones, on one event loop, each with its own Web API client
to the stand-in; the rows are real runs' announcements in a real database.
"""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

from slack_sdk.web.async_client import AsyncWebClient

import storage
from bot.slack.dispatcher import Dispatcher
from crew_runtime.config import Config
from crew_runtime.service import Countersign
from sandbox import StandInThread
from storage import OutboxKind, Store
from tests.support.slack_harness import CHANNEL, new_standin

RUNS = 20


def test_two_dispatchers_deliver_each_row_once(db_url: str, tmp_path: Path) -> None:
    store = Store.open(db_url)
    config = Config(path=tmp_path / "countersign.toml")
    for n in range(RUNS):
        store.create_run("writer", {"n": str(n)}, channel=CHANNEL)
    service = Countersign(store, config)
    with StandInThread(new_standin()) as slack:

        async def both() -> list[int]:
            dispatchers = [
                Dispatcher(
                    AsyncWebClient(token=slack.standin.bot_token, base_url=slack.api_url),
                    service,
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


def test_every_outbox_kind_storage_writes_has_one_handler(tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'countersign.db'}")
    service = Countersign(store, Config(path=tmp_path / "countersign.toml"))
    dispatcher = Dispatcher(AsyncWebClient(token="xoxb-test"), service)
    assert dispatcher.store is store and dispatcher.home.service is service
    for_runs, for_reviews = set(dispatcher.for_runs), set(dispatcher.for_reviews)
    assert not for_runs & for_reviews, "a kind with two handlers"
    # What storage can enqueue: every kind its code names (the rows are written nowhere else).
    named = {
        node.attr
        for path in Path(storage.__file__).parent.glob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "OutboxKind"
    }
    assert named == {kind.name for kind in OutboxKind}
    assert for_runs | for_reviews == set(OutboxKind)
    store.close()
