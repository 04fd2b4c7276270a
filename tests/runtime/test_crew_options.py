"""A crew runs with the options its author set: planning, ``inject_date``, callbacks.

Planning's model is journaled, so a resume replays the plan; the date the agents see is
the run's, whatever day (here: time zone) the resuming worker lives in; step and task
callbacks run once per step that really ran, across a pause and a resume in another
process and across a worker killed with SIGKILL. Planning without a planning model, on a
worker that cannot reach CrewAI's default one, is refused at once (memory and knowledge are
journaled: ``tests/runtime/test_recall.py``). Every worker is a real
``countersign worker`` process on the scripted model, which logs each live call.
"""

from __future__ import annotations

import os
import signal
from collections import Counter
from datetime import UTC, datetime, timedelta, timezone

import pytest

from storage import ReviewKind, RunStatus
from tests.support.harness import ON_SQLITE, Bench

pytestmark = [pytest.mark.slow, ON_SQLITE]

CONFIG = """
[crews.options]
factory = "tests.support.crews:options"

[crews.unreplayable]
factory = "tests.support.crews:unreplayable"
"""

# Twenty-six hours apart: the calendar date always differs between the two.
BEHIND, AHEAD = "Etc/GMT+12", "Etc/GMT-14"


@pytest.fixture
def options(bench: Bench) -> Bench:
    bench.add_crews(CONFIG)
    return bench


def _today(offset_hours: int) -> datetime:
    return datetime.now(UTC).astimezone(timezone(timedelta(hours=offset_hours)))


def _models(bench: Bench, pid: int) -> list[str]:
    return [c["model"] for c in bench.llm_calls() if c["pid"] == pid]


def _callbacks(bench: Bench) -> Counter[tuple[str, str]]:
    return Counter((e["which"], e["what"]) for e in bench.effects("callback"))


def _dates(bench: Bench) -> set[str]:
    return {d for e in bench.effects("saw_date") for d in e["dates"]}


def test_planning_dates_and_callbacks_survive_a_pause_and_a_resume_elsewhere(
    options: Bench,
) -> None:
    bench = options
    run = bench.start("options", topic="otters")
    first = bench.work(TZ=BEHIND)
    question = bench.pending(run.id)
    assert question.kind == ReviewKind.QUESTION
    assert question.stream == "task1:Writer"
    # The planner asked first, in a stream of its own, then both agents.
    assert _models(bench, first) == [
        "scripted/planner",
        "scripted/facts",
        "scripted/facts",
        "scripted/story",
    ]
    by_first = _callbacks(bench)
    # The search step (CrewAI reports a ReAct tool step twice: its result, then the
    # step) and the first task's completion, to the task's callback and the crew's.
    assert by_first == Counter(
        {("step", "ToolResult"): 1, ("step", "AgentAction"): 1, ("task", "Researcher"): 1}
        | {("crew_task", "Researcher"): 1}
    )

    bench.decide(run.id, "answer", "the playful side")
    second = bench.work(TZ=AHEAD)
    done = bench.run(run.id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    assert done.divergence is None  # every replayed prompt matched its recording
    # The plan was replayed, not asked again, and is in the task the writer did.
    assert _models(bench, second) == ["scripted/story"]
    assert 'on "Write otters (plan 2: step by step)"' in (done.output or "")
    hashes = [c["prompt_sha256"] for c in bench.llm_calls()]
    assert len(hashes) == len(set(hashes)), "a recorded turn was sent to the LLM again"
    # One date throughout: the first worker's, in each agent's own format, though the
    # second worker's calendar is a day or two ahead.
    day = _today(-12)
    assert _dates(bench) == {day.strftime("%Y-%m-%d"), day.strftime("%A %d %B %Y")}
    assert _today(14).strftime("%Y-%m-%d") != day.strftime("%Y-%m-%d")
    # The second worker reported the writer's question step and its task, nothing again.
    new = [e for e in bench.effects("callback") if e["pid"] == second]
    assert Counter((e["which"], e["what"]) for e in new) == Counter(
        {("step", "ToolResult"): 1, ("step", "AgentAction"): 1, ("crew_task", "Writer"): 1}
    )


def test_callbacks_run_once_across_a_worker_killed_mid_task(options: Bench) -> None:
    bench = options
    run = bench.start("options", topic="otters", pause="note")
    worker = bench.spawn(TZ=BEHIND, COUNTERSIGN_TEST_HOLD="note")
    bench.kill_when_holding(worker, "note")
    killed = _callbacks(bench)
    assert killed[("crew_task", "Researcher")] == 1
    assert bench.effects("note") == []

    second = bench.work("--lease", "0.5", TZ=AHEAD)  # takes the run once the lease ran out
    done = bench.run(run.id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    assert done.divergence is None
    assert [e["pid"] for e in bench.effects("note")] == [second]
    assert _callbacks(bench) == Counter(
        {("step", "ToolResult"): 2, ("step", "AgentAction"): 2}
        | {("task", "Researcher"): 1, ("crew_task", "Researcher"): 1, ("crew_task", "Writer"): 1}
    )
    assert len(_dates(bench)) == 2  # one day, in the two agents' formats
    assert worker.returncode == -signal.SIGKILL


@pytest.mark.parametrize(
    ("option", "on", "named"),
    [
        ("planning", "crew", "uses planning=True without a planning_llm"),
    ],
)
def test_an_option_no_replay_can_reproduce_fails_the_run_at_once(
    options: Bench, option: str, on: str, named: str
) -> None:
    bench = options
    run = bench.start("unreplayable", topic="otters", option=option, on=on)
    env = {k: v for k, v in os.environ.items() if k == "OPENAI_API_KEY"}
    assert not env, "the refusal of default planning needs a worker without an OpenAI key"
    bench.work()
    failed = bench.run(run.id)
    assert failed.status == RunStatus.FAILED
    assert failed.error is not None and f"crew 'unreplayable' {named}" in failed.error
    assert bench.llm_calls() == []  # refused before any model was asked anything
