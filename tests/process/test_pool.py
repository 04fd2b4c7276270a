"""serve's worker pool: a child process woken by the bot and announcing what it settled, or
threads whose worker renews its leases as often as any other.

The child's two directions go through pipes, so neither side waits for its next poll: here
the child polls once a minute, and a run queued after it went idle must still finish in seconds.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from bot.hosting.pool import ProcessPool, ThreadPool
from storage import RunStatus
from tests.support.harness import Bench


def test_the_in_process_pool_beats_three_times_per_lease(bench: Bench) -> None:
    # As `countersign worker` does: a shorter lease than the old fixed 10 s beat would let
    # the pool's own runs expire under it (tests/runtime/test_fencing.py runs one).
    pool = ThreadPool(
        bench.store,
        bench.config,
        concurrency=1,
        lease=timedelta(seconds=3),
        poll=timedelta(seconds=0.5),
        on_settled=lambda: None,
    )
    assert pool.worker.settings.heartbeat == timedelta(seconds=1)


@pytest.mark.slow
def test_the_child_is_woken_for_new_work_and_says_when_a_run_settled(bench: Bench) -> None:
    async def scenario() -> None:
        settled = asyncio.Event()
        pool = ProcessPool(
            bench.db_url,
            bench.config,
            concurrency=1,
            lease=timedelta(seconds=30),
            poll=timedelta(hours=1),
            on_settled=settled.set,
        )
        first = bench.start("plain", topic="otters")  # found by the child's first look
        pool.start()
        try:
            await asyncio.wait_for(settled.wait(), 300)  # CrewAI's import, then the run
            assert bench.run(first.id).status == RunStatus.SUCCEEDED
            await asyncio.sleep(0.5)  # the child is idle now, in its hour-long poll
            settled.clear()
            second = bench.start("plain", topic="seals")
            pool.wake()
            await asyncio.wait_for(settled.wait(), 240)  # not an hour: the wake was heard
            assert bench.run(second.id).status == RunStatus.SUCCEEDED
        finally:
            await pool.stop()
        assert not pool.alive()

    asyncio.run(scenario())
