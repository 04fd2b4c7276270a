"""Crews kicked off inside CrewAI Flow steps are journaled and reviewed like a run's own.

A pause in such a crew (``ask_human``, a gated tool, a ``human_input`` task) suspends the
whole flow run; the decision resumes it in another worker process, where the flow runs
again (from its start, or from its pending ``@human_feedback``) and each crew replays its
journal up to the pause. Every worker is a real ``countersign worker`` process; the
scripted model logs each live call with its process id and prompt hash.
"""

from __future__ import annotations

import pytest

from crew_runtime.offline.drafts import parse_draft
from storage import ReviewKind, RunStatus
from tests.support.harness import ON_SQLITE, Bench

FLOWS = """
[flows.self_evaluation]
factory = "tests.support.flow_crews:self_evaluation"

[flows.fan_out]
factory = "tests.support.flow_crews:fan_out"

[flows.reviewed]
factory = "tests.support.flow_crews:reviewed"

[flows.async_reviewed]
factory = "tests.support.flow_crews:async_reviewed"
"""

pytestmark = pytest.mark.slow


@pytest.fixture
def flows(bench: Bench) -> Bench:
    bench.add_crews(FLOWS)
    return bench


def _turns(bench: Bench, pid: int) -> list[tuple[str, str]]:
    """The live model calls one worker made: (model, ``tool`` call or ``final`` answer)."""
    calls = [c for c in bench.llm_calls() if c["pid"] == pid]
    return [
        (c["model"].removeprefix("scripted/"), "final" if c["reply_kind"] == "final" else "tool")
        for c in calls
    ]


def _no_turn_sent_twice(bench: Bench) -> None:
    hashes = [call["prompt_sha256"] for call in bench.llm_calls()]
    assert len(hashes) == len(set(hashes)), "a recorded turn was sent to the model again"


def _waits_for(bench: Bench, run_id: str, kind: ReviewKind, stream: str, seq: int = 0) -> None:
    run = bench.run(run_id)
    assert run.status == RunStatus.WAITING, (run.status, run.error)
    review = bench.pending(run_id)
    assert (review.kind, review.stream, review.seq) == (kind, stream, seq)


@ON_SQLITE
def test_a_self_evaluation_loop_pauses_in_its_crews_and_resumes_elsewhere(flows: Bench) -> None:
    """The writer crew asks a person on the first attempt; the router loops back once
    (each pass kicks off new crews, numbered per step); the publisher's tool is gated."""
    run = flows.start("self_evaluation", topic="otters")
    first = flows.work()
    _waits_for(flows, run.id, ReviewKind.QUESTION, "flow:write#0/task0:Writer")
    flows.decide(run.id, "answer", "the playful side")
    second = flows.work()
    _waits_for(flows, run.id, ReviewKind.TOOL_APPROVAL, "flow:publish#0/task0:Publisher")
    assert flows.effects("published") == []
    flows.decide(run.id, "approve")
    third = flows.work()

    done = flows.run(run.id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    draft, publication = (done.output or "").split("\n")
    rewrite = parse_draft(draft)  # the second attempt, written from the critique
    assert rewrite.subject.startswith("Write a post on otters (critique: Critic v0 on ")
    critique_of_first = rewrite.subject.split("Judge this post: ", 1)[1]
    assert "ask_human: the playful side" in critique_of_first
    assert parse_draft(publication).notes == ("publish: published 32 characters",)
    (published,) = flows.effects("published")
    assert published["pid"] == third
    assert published["key"] == f"{run.id}/flow:publish#0/task0:Publisher/0"
    assert _turns(flows, first) == [("writer", "tool")]
    assert _turns(flows, second) == [
        ("writer", "final"),
        ("critic", "final"),
        ("writer", "final"),
        ("critic", "final"),
        ("publisher", "tool"),
    ]
    assert _turns(flows, third) == [("publisher", "final")]
    _no_turn_sent_twice(flows)


def test_a_worker_killed_mid_flow_leaves_nothing_to_redo(flows: Bench) -> None:
    """Killed as the loop's second pass begins, after two crews' turns were journaled:
    the next worker replays them, and makes each remaining call once."""
    run = flows.start("self_evaluation", topic="otters", pauses="no")
    doomed = flows.spawn(COUNTERSIGN_TEST_HOLD="write2")
    flows.kill_when_holding(doomed, "write2")
    finished_in = flows.work()

    done = flows.run(run.id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    (published,) = flows.effects("published")
    assert published["pid"] == finished_in
    assert _turns(flows, doomed.pid) == [("writer", "final"), ("critic", "final")]
    assert _turns(flows, finished_in) == [
        ("writer", "final"),
        ("critic", "final"),
        ("publisher", "tool"),
        ("publisher", "final"),
    ]
    _no_turn_sent_twice(flows)


@ON_SQLITE
def test_crews_kicked_off_async_and_for_each_in_flow_steps(flows: Bench) -> None:
    """An async step gathers ``kickoff_async`` (a search) and ``akickoff`` (a question);
    the next step's ``kickoff_for_each`` publishes twice, each call gated. The crews are
    numbered in the order the step started them, whatever order their threads run in."""
    run = flows.start("fan_out", topic="otters")
    pids = [flows.work()]
    _waits_for(flows, run.id, ReviewKind.QUESTION, "flow:research#1/task0:Strategist")
    flows.decide(run.id, "answer", "the family angle")
    pids.append(flows.work())
    _waits_for(flows, run.id, ReviewKind.TOOL_APPROVAL, "flow:fan_out#0/task0:Publisher")
    flows.decide(run.id, "approve")
    pids.append(flows.work())
    _waits_for(flows, run.id, ReviewKind.TOOL_APPROVAL, "flow:fan_out#1/task0:Publisher")
    flows.decide(run.id, "approve")
    pids.append(flows.work())

    done = flows.run(run.id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    facts, angle, *publications = map(parse_draft, (done.output or "").split("\n"))
    assert facts.notes == ("search: 3 facts about Research otters",)
    assert angle.notes == ("ask_human: the family angle",)
    assert [p.subject for p in publications] == [
        "Publish the post on otters",
        "Publish the post on seals",
    ]
    # The search runs once: before the strategist's pause, or (when the pause came first and
    # stopped new live calls) in the process that resumed.
    (search,) = flows.effects("search")
    assert search["pid"] in pids[:2]
    assert [(e["key"].split("/", 1)[1], e["pid"]) for e in flows.effects("published")] == [
        ("flow:fan_out#0/task0:Publisher/0", pids[2]),
        ("flow:fan_out#1/task0:Publisher/0", pids[3]),
    ]
    # The researcher runs beside the strategist: its answer may come before the pause
    # or after the resume, never twice.
    assert sorted(_turns(flows, pids[0]) + _turns(flows, pids[1])) == [
        ("publisher", "tool"),
        ("researcher", "final"),
        ("researcher", "tool"),
        ("strategist", "final"),
        ("strategist", "tool"),
    ]
    assert ("strategist", "tool") in _turns(flows, pids[0])
    assert _turns(flows, pids[2]) == [("publisher", "final"), ("publisher", "tool")]
    assert _turns(flows, pids[3]) == [("publisher", "final")]
    _no_turn_sent_twice(flows)


def _editor_sent_back_once_then_approved(flows: Bench, run_id: str) -> list[int]:
    """The Editor's reviewed task asked to be shorter, then approved: the two workers' pids."""
    pids = []
    _waits_for(flows, run_id, ReviewKind.TASK_REVIEW, "flow:write#0/task0:Editor")
    flows.decide(run_id, "changes", "shorter")
    pids.append(flows.work())
    _waits_for(flows, run_id, ReviewKind.TASK_REVIEW, "flow:write#0/task0:Editor", seq=1)
    flows.decide(run_id, "approve")
    pids.append(flows.work())
    return pids


@ON_SQLITE
def test_a_flows_own_feedback_and_a_task_review_in_one_run(flows: Bench) -> None:
    """``@human_feedback`` on an outline written by a crew, sent back once ("revise" runs
    the step again: a new crew), then a crew whose task is reviewed twice. After each
    feedback decision CrewAI resumes from the paused step; the crews keep their numbers."""
    run = flows.start("reviewed", topic="otters")
    pids = [flows.work()]
    _waits_for(flows, run.id, ReviewKind.TASK_REVIEW, "flow:outline")
    flows.decide(run.id, "changes", "more detail")
    pids.append(flows.work())
    _waits_for(flows, run.id, ReviewKind.TASK_REVIEW, "flow:outline", seq=1)
    assert (
        parse_draft(flows.pending(run.id).prompt).subject
        == "Outline otters (feedback: more detail)"
    )
    flows.decide(run.id, "approve")
    pids.append(flows.work())
    pids += _editor_sent_back_once_then_approved(flows, run.id)

    done = flows.run(run.id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    article = parse_draft(done.output or "")
    assert article.feedback == ("shorter",)
    assert article.saw_previous_draft
    assert "Outline otters (feedback: more detail)" in article.subject
    (search,) = flows.effects("search")
    assert search["pid"] == pids[0]
    assert [_turns(flows, pid) for pid in pids] == [
        [("researcher", "tool"), ("researcher", "final"), ("outliner", "final")],
        [("outliner", "final")],
        [("editor", "final")],
        [("editor", "final")],
        [],
    ]
    _no_turn_sent_twice(flows)


@ON_SQLITE
def test_a_reviewed_task_kicked_off_with_akickoff_is_reviewed_and_revised(flows: Bench) -> None:
    """CrewAI's async path asks for the review through ``handle_feedback_async`` (it asked on
    the console): reviewed, sent back, revised on the agent's async loop in another process."""
    run = flows.start("async_reviewed", topic="otters")
    pids = [flows.work()]
    pids += _editor_sent_back_once_then_approved(flows, run.id)
    done = flows.run(run.id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    article = parse_draft(done.output or "")
    assert article.feedback == ("shorter",) and article.saw_previous_draft
    assert [_turns(flows, pid) for pid in pids] == [
        [("editor", "final")],
        [("editor", "final")],
        [],
    ]
    _no_turn_sent_twice(flows)
