"""Pauses inside delegated work and parallel tasks reach the runtime, and resume elsewhere.

CrewAI runs a coworker's whole agent loop inside the "Delegate work to coworker" and "Ask
question to coworker" tools, and turns any exception of it into the tool's result text. A
gated call or an ``ask_human`` in that loop must still suspend the run (not end it
``succeeded`` with "Error executing task with agent ..." as the delegation's result), and
the decision must apply in the nested call when another worker process resumes it. Every
worker here is a real ``countersign worker`` process; the scripted model logs each live
call with its process id and prompt hash.
"""

from __future__ import annotations

import pytest

from crew_runtime.offline.drafts import parse_draft
from storage import ReviewKind, RunStatus
from tests.support.harness import ON_SQLITE, Bench

pytestmark = [pytest.mark.slow, ON_SQLITE]

SWALLOWED = "Error executing task with agent"


def _no_turn_sent_twice(bench: Bench) -> None:
    hashes = [call["prompt_sha256"] for call in bench.llm_calls()]
    assert len(hashes) == len(set(hashes)), "a recorded turn was sent to the LLM again"


def _turns(bench: Bench, pid: int) -> list[tuple[str, str]]:
    """The live model calls one worker made: (model, tool call or final answer)."""
    calls = [c for c in bench.llm_calls() if c["pid"] == pid]
    return [(c["model"].removeprefix("scripted/"), _kind(c["reply_kind"])) for c in calls]


def _kind(reply_kind: str) -> str:
    return "final" if reply_kind == "final" else "tool"


def _coworker_said(output: str | None) -> str:
    """The coworker's answer, as the lead's draft quotes its delegation tool's result."""
    (note,) = parse_draft(output or "").notes
    assert SWALLOWED not in note
    return note.split(": ", 1)[1]


# (process, handoff, native): hierarchical crews with either kind of manager, and a
# sequential crew whose agent has allow_delegation; both delegation tools; both tool modes.
SHAPES = [
    ("manager_llm", "delegate", "no"),
    ("manager_agent", "delegate", "yes"),
    ("sequential", "ask", "no"),
    ("sequential", "delegate", "yes"),
]


@pytest.mark.parametrize(("process", "handoff", "native"), SHAPES)
def test_a_gated_call_in_delegated_work_waits_and_runs_once_approved(
    bench: Bench, process: str, handoff: str, native: str
) -> None:
    run = bench.start("delegation", topic="otters", process=process, handoff=handoff, native=native)
    first = bench.work()
    assert bench.run(run.id).status == RunStatus.WAITING, bench.run(run.id).error
    review = bench.pending(run.id)
    lead = "Crew Manager" if process == "manager_llm" else "Lead"
    assert review.kind == ReviewKind.TOOL_APPROVAL
    assert review.details.tool == "read_website_content"
    # The analyst's calls hang off the lead's tool call 0, the delegation.
    assert review.stream == f"task0:{lead}>0:Analyst"
    assert bench.effects("read") == []

    bench.decide(run.id, "approve")
    second = bench.work()
    done = bench.run(run.id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    said = _coworker_said(done.output)
    assert "read_website_content: the page https://example.com/" in said
    (read,) = bench.effects("read")
    assert read["pid"] == second
    assert read["key"].endswith(f"/task0:{lead}>0:Analyst/0")
    # The lead's delegation turn and the analyst's tool-call turn are replayed, not re-sent.
    assert _turns(bench, first) == [("lead", "tool"), ("analyst", "tool")]
    assert _turns(bench, second) == [("analyst", "final"), ("lead", "final")]
    _no_turn_sent_twice(bench)


@pytest.mark.parametrize(
    ("process", "handoff", "native"),
    [("manager_llm", "delegate", "yes"), ("sequential", "ask", "no")],
)
def test_a_question_in_delegated_work_is_answered_in_the_nested_call(
    bench: Bench, process: str, handoff: str, native: str
) -> None:
    run = bench.start(
        "delegation",
        topic="otters",
        process=process,
        handoff=handoff,
        native=native,
        pause="question",
    )
    first = bench.work()
    question = bench.pending(run.id)
    assert question.kind == ReviewKind.QUESTION
    assert question.details.agent == "Analyst"
    bench.decide(run.id, "answer", "the playful side")
    second = bench.work()
    done = bench.run(run.id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    assert "ask_human: the playful side" in _coworker_said(done.output)
    assert _turns(bench, first) == [("lead", "tool"), ("analyst", "tool")]
    assert _turns(bench, second) == [("analyst", "final"), ("lead", "final")]
    _no_turn_sent_twice(bench)


def test_a_question_rejected_in_delegated_work_rejects_the_run(bench: Bench) -> None:
    run = bench.start("delegation", topic="otters", pause="question")
    first = bench.work()
    bench.decide(run.id, "reject", "not this brief")
    second = bench.work()
    done = bench.run(run.id)
    assert done.status == RunStatus.REJECTED, (done.status, done.output)
    assert done.error == "not this brief"
    # The manager never went on after the rejection (its answer would be a live turn).
    assert _turns(bench, first) == [("lead", "tool"), ("analyst", "tool")]
    assert _turns(bench, second) == []


def test_a_reviewed_hierarchical_task_delegates_again_after_feedback(bench: Bench) -> None:
    """``human_input`` on a hierarchical task reviews the manager's answer; the revision
    delegates again, in a stream of its own that every later replay finds."""
    run = bench.start("delegation", topic="otters", review="yes")
    pids = [bench.work()]
    assert bench.pending(run.id).stream == "task0:Crew Manager>0:Analyst"  # the gate
    bench.decide(run.id, "approve")
    pids.append(bench.work())
    review = bench.pending(run.id)
    assert (review.kind, review.stream, review.seq) == (
        ReviewKind.TASK_REVIEW,
        "task0:Crew Manager",
        0,
    )
    assert "read_website_content: the page" in review.prompt
    bench.decide(run.id, "changes", "shorter")
    pids.append(bench.work())
    gate = bench.pending(run.id)  # the revision delegated again: its own gated read
    assert (gate.kind, gate.stream) == (ReviewKind.TOOL_APPROVAL, "task0:Crew Manager>1:Analyst")
    bench.decide(run.id, "approve")
    pids.append(bench.work())
    assert bench.pending(run.id).seq == 1  # the second round of the manager's review
    bench.decide(run.id, "approve")
    pids.append(bench.work())

    done = bench.run(run.id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    brief = parse_draft(done.output or "")
    assert brief.feedback == ("shorter",)
    assert len(brief.notes) == 2 and not any(SWALLOWED in note for note in brief.notes)
    assert [e["key"].split("/", 1)[1] for e in bench.effects("read")] == [
        "task0:Crew Manager>0:Analyst/0",
        "task0:Crew Manager>1:Analyst/0",
    ]
    assert [_turns(bench, pid) for pid in pids] == [
        [("lead", "tool"), ("analyst", "tool")],
        [("analyst", "final"), ("lead", "final")],
        [("lead", "tool"), ("analyst", "tool")],
        [("analyst", "final"), ("lead", "final")],
        [],
    ]
    _no_turn_sent_twice(bench)


@pytest.mark.parametrize("native", ["no", "yes"])
def test_a_pause_in_one_parallel_task_keeps_the_other_tasks_work(bench: Bench, native: str) -> None:
    """The scout pauses while the counter's tally (a side effect) is still running in its
    own thread: the run suspends only once the tally is journaled, and resuming neither
    tallies again nor re-sends the counter's turns."""
    run = bench.start("parallel", topic="otters", native=native)
    first = bench.work(COUNTERSIGN_TEST_HOLD="until_paused")
    assert bench.run(run.id).status == RunStatus.WAITING, bench.run(run.id).error
    review = bench.pending(run.id)
    assert (review.kind, review.stream) == (ReviewKind.TOOL_APPROVAL, "task0:Scout")
    bench.decide(run.id, "approve")
    second = bench.work()
    done = bench.run(run.id)
    assert done.status == RunStatus.SUCCEEDED, done.error

    (tally,) = bench.effects("tally")
    assert tally["pid"] == first
    assert tally["key"].endswith("/task1:Counter/0")
    assert [e["pid"] for e in bench.effects("read")] == [second]
    context = parse_draft(done.output or "").context or ""
    scouting, _, counted = context.partition("\n\n----------\n\n")
    assert parse_draft(scouting).notes[0].startswith("read_website_content: the page")
    assert parse_draft(counted).notes == ("tally: 12 sources on Tally otters",)
    assert sorted(_turns(bench, first)) == [("scouting", "tool"), ("tally", "tool")]
    assert sorted(_turns(bench, second)) == [
        ("digest", "final"),
        ("scouting", "final"),
        ("tally", "final"),
    ]
    _no_turn_sent_twice(bench)


def test_a_pause_swallowed_outside_any_tool_never_ends_the_run_succeeded(bench: Bench) -> None:
    """A task callback asks an agent and swallows its ``ask_human`` pause: the run
    suspends all the same, and the question's answer reaches the agent on resume."""
    run = bench.start("swallowing", topic="otters")
    first = bench.work()
    waiting = bench.run(run.id)
    assert waiting.status == RunStatus.WAITING, (waiting.status, waiting.output)
    assert bench.pending(run.id).kind == ReviewKind.QUESTION
    assert bench.effects("checked") == []
    bench.decide(run.id, "answer", "yes, it is")
    second = bench.work()
    done = bench.run(run.id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    (checked,) = bench.effects("checked")
    assert checked["pid"] == second
    assert "ask_human: yes, it is" in parse_draft(checked["result"]).notes
    assert _turns(bench, first) == [("note-1", "final"), ("check-1", "tool")]
    assert _turns(bench, second) == [("check-1", "final")]
    _no_turn_sent_twice(bench)
