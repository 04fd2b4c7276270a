"""Long inputs stored on both databases: a role of any length (CrewAI's own
``crewai create crew`` template interpolates an input into one) is a stream the journal and
the reviews can key, the same on every replay.
"""

from __future__ import annotations

from crew_runtime import streams
from storage import RunStatus
from tests.support.harness import Bench


def test_a_run_whose_agent_has_a_5000_character_role_pauses_resumes_and_succeeds(
    bench: Bench,
) -> None:
    role = "Senior Data Researcher on " + "otters and their rivers " * 208
    assert len(role) >= 5000
    run = bench.start("unstorable", poison="none", reviewed="yes", role=role)
    bench.work_here()
    paused = bench.run(run.id)
    assert paused.status == RunStatus.WAITING, paused.error
    review = bench.pending(run.id)
    assert len(review.stream) <= streams.MOST
    assert review.stream.startswith("task0:Senior Data Researcher on otters")
    assert streams.task_index(review.stream) == 0

    bench.decide(run.id, "approve")
    bench.work_here()
    ended = bench.run(run.id)
    assert ended.status == RunStatus.SUCCEEDED, ended.error
    assert ended.attempts == 0


def test_long_keys_are_cut_to_fit_and_differ_by_their_digest() -> None:
    short = streams.stream("task0", "R" * 194)
    assert short == "task0:" + "R" * 194, "a key that fits is what it always was"
    one = streams.stream("task0", "R" * 300 + "A")
    other = streams.stream("task0", "R" * 300 + "B")
    assert len(one) == len(other) == streams.MOST
    assert one != other
    assert one == streams.stream("task0", "R" * 300 + "A"), "the same on every replay"
    nested = streams.stream(streams.nested_place(one, 2), "Q" * 5000)
    assert len(nested) == streams.MOST and streams.task_index(nested) == 0
