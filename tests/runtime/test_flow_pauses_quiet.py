"""A crew pausing inside a Flow is a pause, not a failure: the worker prints no "Flow
Failure" panel for it, in both shapes users write (a crew kicked off in a plain step, as
lead-score-flow does, and crews gathered with ``asyncio.gather`` of ``kickoff_async`` in an
async step), and the run resumes to the end. What the worker process prints and logs is
read from its output.
"""

from __future__ import annotations

import pytest

from storage import ReviewKind, RunStatus
from tests.support.harness import ON_SQLITE, Bench

pytestmark = [pytest.mark.slow, ON_SQLITE]

CONFIG = """
[flows.plain_step]
factory = "tests.support.shape_crews:plain_step_flow"

[flows.gathered]
factory = "tests.support.shape_crews:gathered_flow"
"""

FAILURE_WORDS = (
    "Flow Failure",
    "Flow Execution Failed",
    "Crew Execution Failed",
    "Task Failure",
    "An unknown error occurred",
    "ERROR",
    "Traceback",
)


def _printed(bench: Bench, name: str, *env: str) -> str:
    log = bench.tmp / name
    proc = bench.spawn(log=log)
    proc.communicate(timeout=120)
    assert proc.returncode == 0
    return log.read_text()


@pytest.mark.parametrize("flow", ["plain_step", "gathered"])
def test_a_crew_pausing_inside_a_flow_prints_no_failure(bench: Bench, flow: str) -> None:
    bench.add_crews(CONFIG)
    run = bench.start(flow, topic="otters")
    printed = _printed(bench, "first.log")
    question = bench.pending(run.id)
    assert question.kind == ReviewKind.QUESTION
    assert "waiting for a person" in printed
    assert "Crew Execution Started" in printed  # the crews are verbose indeed
    assert [word for word in FAILURE_WORDS if word in printed] == [], printed

    bench.decide(run.id, "answer", "the playful side")
    printed = _printed(bench, "second.log")
    done = bench.run(run.id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    assert "Flow Failure" not in printed and "Traceback" not in printed, printed
