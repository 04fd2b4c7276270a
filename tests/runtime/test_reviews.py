"""Task reviews and questions through the real CrewAI loop, decided round by round."""

from __future__ import annotations

from typing import Any

import pytest
from crewai.events import event_context

import crew_runtime.worker as worker_module
from crew_runtime import executor
from crew_runtime.executor import Outcome
from crew_runtime.offline.drafts import parse_draft
from storage import DecisionKind, ReviewKind, ReviewStatus, RunStatus
from tests.support.harness import Bench


def test_three_rounds_of_changes_then_approve(bench: Bench) -> None:
    run = bench.start("writer", topic="otters")
    feedback = ["make it shorter", "add a title", "mention sea otters"]
    bench.work_here()
    for n, text in enumerate(feedback):
        review = bench.pending(run.id)
        draft = parse_draft(review.prompt)
        assert draft.feedback == tuple(feedback[:n])
        assert draft.saw_previous_draft == (n > 0)
        bench.decide(run.id, "changes", text)
        bench.work_here()
    last = bench.pending(run.id)
    final_outline = parse_draft(last.prompt)
    assert final_outline.feedback == tuple(feedback) and final_outline.saw_previous_draft
    assert final_outline.revision == 3
    bench.decide(run.id, "approve")
    bench.work_here()
    article = parse_draft(bench.pending(run.id).prompt)
    assert article.context == last.prompt
    bench.decide(run.id, "approve")
    bench.work_here()
    done = bench.run(run.id)
    assert done.status == RunStatus.SUCCEEDED
    assert parse_draft(done.output or "").context == last.prompt
    # Each LLM turn was made once: 4 outline drafts and 1 article, whatever the replays.
    assert len(bench.llm_calls()) == 5


def test_edit_passes_the_edited_text_to_the_next_task(bench: Bench) -> None:
    run = bench.start("writer", topic="otters")
    bench.work_here()
    edited = "1. Otters hold hands\n2. Otters use tools"
    bench.decide(run.id, "edit", edited, by="U_EDITOR")
    bench.work_here()
    article = bench.pending(run.id)
    assert parse_draft(article.prompt).context == edited
    bench.decide(run.id, "approve")
    bench.work_here()
    assert bench.run(run.id).status == RunStatus.SUCCEEDED
    (outline_review, _) = bench.store.list_reviews(run_id=run.id, status=None)
    assert outline_review.decision is not None
    assert outline_review.decision.kind == DecisionKind.EDIT
    assert outline_review.decision.text == edited
    assert outline_review.decision.original == outline_review.prompt
    assert outline_review.decision.decided_by == "U_EDITOR"


def test_reject_ends_the_run_with_the_reason(bench: Bench) -> None:
    run = bench.start("writer", topic="otters")
    bench.work_here()
    bench.decide(run.id, "reject", "off-brand")
    bench.work_here()
    rejected = bench.run(run.id)
    assert rejected.status == RunStatus.REJECTED
    assert rejected.error == "off-brand"
    (review,) = bench.store.list_reviews(run_id=run.id, status=None)
    assert review.status == ReviewStatus.DECIDED


def test_question_answer_reaches_the_agent_in_the_same_turn(bench: Bench) -> None:
    run = bench.start("research", topic="otters")
    bench.work_here()
    question = bench.pending(run.id)
    assert question.kind == ReviewKind.QUESTION
    assert question.prompt == "Formal or casual tone for Research otters?"
    bench.decide(run.id, "answer", "casual")
    bench.work_here()
    done = bench.run(run.id)
    assert done.status == RunStatus.SUCCEEDED
    notes = parse_draft(done.output or "").notes
    assert "ask_human: casual" in notes
    assert [e["query"] for e in bench.effects("search")] == ["Research otters"]
    assert len(bench.effects("published")) == 1


def test_a_crew_that_cannot_be_built_fails_with_its_error(bench: Bench) -> None:
    run = bench.start("broken")
    bench.work_here()
    failed = bench.run(run.id)
    assert failed.status == RunStatus.FAILED
    assert failed.error is not None and "the crew could not be built" in failed.error


def test_cancel_a_waiting_run(bench: Bench) -> None:
    run = bench.start("writer", topic="otters")
    bench.work_here()
    review = bench.pending(run.id)
    bench.service.cancel(run.id, by="U2")
    bench.work_here()
    assert bench.run(run.id).status == RunStatus.CANCELLED
    assert bench.store.get_review(review.id).status == ReviewStatus.CANCELLED


def test_a_long_lived_worker_thread_pauses_any_number_of_runs(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CrewAI leaves an event scope open at every pause (its stack of scopes lives in a
    ContextVar and refuses to grow past 100); one worker thread executes run after run, and
    each execution must start on an empty stack, not on the scopes its predecessors left."""
    depths: list[int] = []

    def execute(*args: Any) -> Outcome:
        depths.append(len(event_context._event_id_stack.get()))
        return executor.execute(*args)

    monkeypatch.setattr(worker_module, "execute", execute)
    runs = [bench.start("writer", topic=f"topic {n}") for n in range(4)]
    worker = bench.work_here(concurrency=1)
    assert worker.executions == 4
    assert depths == [0, 0, 0, 0]
    assert {bench.run(run.id).status for run in runs} == {RunStatus.WAITING}
