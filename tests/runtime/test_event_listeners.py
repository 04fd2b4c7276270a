"""Listeners on CrewAI's event bus hear each crew, task and agent start and finish once,
though a resume replays the work done before a pause in another process."""

from __future__ import annotations

from collections import Counter

import pytest

from storage import RunStatus
from tests.support.harness import Bench

pytestmark = pytest.mark.slow


def test_lifecycle_events_reach_listeners_once_across_pauses_and_resumes(bench: Bench) -> None:
    bench.add_crews('[crews.listened]\nfactory = "tests.support.event_crews:listened"\n')
    run = bench.start("listened", topic="otters")
    pids = [bench.work()]
    bench.decide(run.id, "changes", "shorter")  # the outline, revised in the next process
    pids.append(bench.work())
    bench.decide(run.id, "approve")
    pids.append(bench.work())  # the article: replays the outline, then writes
    bench.decide(run.id, "approve")
    pids.append(bench.work())
    done = bench.run(run.id)
    assert done.status == RunStatus.SUCCEEDED, done.error

    heard = Counter((e["type"], e["task"]) for e in bench.effects("event"))
    tasks = {task for _, task in heard if task}
    assert len(tasks) == 2, heard
    per_task = ["TaskStartedEvent", "TaskCompletedEvent"]
    per_task += ["AgentExecutionStartedEvent", "AgentExecutionCompletedEvent"]
    expected = {(kind, task): 1 for kind in per_task for task in tasks}
    expected |= {("CrewKickoffStartedEvent", ""): 1, ("CrewKickoffCompletedEvent", ""): 1}
    assert heard == Counter(expected)
    # Each was heard where it happened: the outline's start in the first process, the
    # crew's completion in the last.
    by_type = {(e["type"], e["task"]): e["pid"] for e in bench.effects("event")}
    assert by_type[("CrewKickoffStartedEvent", "")] == pids[0]
    assert by_type[("CrewKickoffCompletedEvent", "")] == pids[-1]
