"""A crew written for the console works unchanged: ``input()`` in a flow step, in a flow's
router and in a tool becomes a question in the run's thread with its prompt, the run waits
like it does for ``ask_human``, and the same call returns the answer on resume. Where no
question can be asked (the crew's factory) the run fails naming the fix, never with
the ``EOFError`` of a worker's closed stdin. Every worker is a real ``countersign worker``.
"""

from __future__ import annotations

import pytest

from storage import ReviewKind, RunStatus
from tests.support.harness import ON_SQLITE, Bench

pytestmark = [pytest.mark.slow, ON_SQLITE]

CONFIG = """
[flows.console]
factory = "tests.support.shape_crews:console_flow"

[crews.console_crew]
factory = "tests.support.shape_crews:console_crew"

[crews.console_factory]
factory = "tests.support.shape_crews:console_factory_crew"
"""


@pytest.fixture
def consoles(bench: Bench) -> Bench:
    bench.add_crews(CONFIG)
    return bench


def test_input_in_flow_steps_and_a_tool_asks_in_the_thread_and_returns_the_answer(
    consoles: Bench,
) -> None:
    bench = consoles
    run = bench.start("console")
    bench.work()
    topic = bench.pending(run.id)
    assert topic.kind == ReviewKind.QUESTION
    assert topic.prompt == "What topic should the crew write about?"
    assert topic.stream == "flow:ask_topic/console:input"

    bench.decide(run.id, "answer", "otters")
    bench.work()
    choose = bench.pending(run.id)  # the router asks next, with the answer in its prompt
    assert choose.prompt == "Write about otters now? (yes/no)"
    assert [e["topic"] for e in bench.effects("console_topic")] == ["otters"]

    bench.decide(run.id, "answer", "yes")
    bench.work()
    angle = bench.pending(run.id)  # the tool of the crew the flow kicks off asks
    assert angle.prompt == "Which angle on Write about otters?"
    assert angle.stream == "flow:write_story#0/task0:Writer>0/console:input"
    assert bench.effects("console_angle") == []

    bench.decide(run.id, "answer", "the playful side")
    second_last = bench.work()
    done = bench.run(run.id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    assert [e["angle"] for e in bench.effects("console_angle")] == ["the playful side"]
    assert bench.effects("console_angle")[0]["pid"] == second_last
    assert "angle: the playful side" in (done.output or "")


def test_input_in_a_crews_tool_is_a_question_and_a_rejection_rejects_the_run(
    consoles: Bench,
) -> None:
    bench = consoles
    run = bench.start("console_crew", topic="otters")
    bench.work()
    question = bench.pending(run.id)
    assert question.prompt == "Which angle on Write about otters?"
    assert question.stream == "task0:Writer>0/console:input"
    bench.decide(run.id, "reject", "not this week")
    bench.work()
    done = bench.run(run.id)
    assert done.status == RunStatus.REJECTED
    assert done.error == "not this week"
    assert bench.effects("console_angle") == []


def test_input_where_no_question_can_be_asked_fails_the_run_naming_the_fix(
    consoles: Bench,
) -> None:
    bench = consoles
    run = bench.start("console_factory", topic="otters")
    bench.work()
    failed = bench.run(run.id)
    assert failed.status == RunStatus.FAILED
    assert failed.error is not None
    assert "input('Topic? ')" in failed.error and "outside a flow step or a tool" in failed.error
    assert "ask_human" in failed.error
    assert "EOFError" not in failed.error
