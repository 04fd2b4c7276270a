"""serve's worker pool in a child process: woken by the bot, announcing what it settled.

Both directions go through pipes, so neither side waits for its next poll: here the child
polls once a minute, and a run queued after it went idle must still finish in seconds.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from bot.pool import ProcessPool
from storage import RunStatus
from tests.harness import Bench


@pytest.mark.slow
def test_the_child_is_woken_for_new_work_and_says_when_a_run_settled(bench: Bench) -> None:
    async def scenario() -> None:
        settled = asyncio.Event()
        pool = ProcessPool(
            bench.db_url,
            bench.config,
            concurrency=1,
            lease=timedelta(seconds=30),
            poll=timedelta(seconds=60),
            on_settled=settled.set,
        )
        first = bench.start("plain", topic="otters")  # found by the child's first look
        pool.start()
        try:
            await asyncio.wait_for(settled.wait(), 90)  # CrewAI's import, then the run
            assert bench.run(first.id).status == RunStatus.SUCCEEDED
            await asyncio.sleep(0.5)  # the child is idle now, in its minute-long poll
            settled.clear()
            second = bench.start("plain", topic="seals")
            pool.wake()
            await asyncio.wait_for(settled.wait(), 15)  # not 60 s: the wake was heard
            assert bench.run(second.id).status == RunStatus.SUCCEEDED
        finally:
            await pool.stop()
        assert not pool.alive()

    asyncio.run(scenario())
