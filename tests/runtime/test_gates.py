"""Gated tools: nothing runs before a reviewer approves that exact call."""

from __future__ import annotations

import json

import pytest

from crew_runtime.errors import UsageError
from crew_runtime.offline.drafts import parse_draft
from storage import DecisionKind, ReviewKind, ReviewStatus, RunStatus
from tests.support.harness import Bench


def _paused_payment(bench: Bench, amount: str = "1500") -> str:
    run = bench.start("payments", amount=amount)
    bench.work_here()
    assert bench.run(run.id).status == RunStatus.WAITING
    review = bench.pending(run.id)
    assert review.kind == ReviewKind.TOOL_APPROVAL
    assert review.details.tool == "pay"
    assert review.details.args == {"amount": int(amount), "to": "ACME"}
    assert review.details.schema["properties"]["amount"]["type"] == "integer"
    assert bench.effects("paid") == []
    return run.id


def test_approve_runs_the_call_once(bench: Bench) -> None:
    run_id = _paused_payment(bench)
    bench.decide(run_id, "approve")
    bench.work_here()
    done = bench.run(run_id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    assert [(e["amount"], e["to"]) for e in bench.effects("paid")] == [(1500, "ACME")]
    assert "pay: paid 1500 to ACME" in parse_draft(done.output or "").notes


def test_edit_runs_the_edited_call_and_tells_the_model(bench: Bench) -> None:
    run_id = _paused_payment(bench)
    bench.decide(run_id, "edit", '{"amount": 900, "to": "ACME"}', by="U_CFO")
    bench.work_here()
    done = bench.run(run_id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    assert [e["amount"] for e in bench.effects("paid")] == [900]
    (note,) = parse_draft(done.output or "").notes
    assert note.startswith("pay: paid 900 to ACME")
    assert "a reviewer (U_CFO) changed the arguments of pay: amount from 1500 to 900;" in note
    assert "ACME" not in note.partition("changed")[2]  # only what changed
    (review,) = bench.store.list_reviews(run_id=run_id, status=None)
    assert review.details.args["amount"] == 1500  # proposed
    assert review.decision is not None
    assert json.loads(review.decision.text or "")["amount"] == 900  # approved
    executed = [e for e in bench.store.load_journal(run_id) if e.kind == "tool"]
    assert executed[0].payload["args"] == {"amount": 900, "to": "ACME"}  # executed


def test_an_edit_submitted_unchanged_tells_the_model_nothing(bench: Bench) -> None:
    run_id = _paused_payment(bench)
    bench.decide(run_id, "edit", '{"amount": 1500, "to": "ACME"}', by="U_CFO")
    bench.work_here()
    done = bench.run(run_id)
    (note,) = parse_draft(done.output or "").notes
    assert note == "pay: paid 1500 to ACME"


def test_deny_runs_nothing_and_the_model_gets_the_reason(bench: Bench) -> None:
    run_id = _paused_payment(bench)
    bench.decide(run_id, "reject", "over budget", by="U_CFO")
    bench.work_here()
    done = bench.run(run_id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    assert bench.effects("paid") == []
    (note,) = parse_draft(done.output or "").notes
    assert "pay was denied by a reviewer (U_CFO): over budget" in note


def test_the_model_is_told_the_reviewers_name_kept_with_the_decision(bench: Bench) -> None:
    run_id = _paused_payment(bench)
    bench.decide(run_id, "reject", "over budget", by="U0PRIYA", by_name=" Priya  Raman ")
    bench.work_here()
    done = bench.run(run_id)
    (note,) = parse_draft(done.output or "").notes
    assert "pay was denied by reviewer Priya Raman: over budget" in note
    (review,) = bench.store.list_reviews(run_id=run_id, status=None)
    assert review.decision is not None
    assert review.decision.details == {"by_name": "Priya Raman", "digest": review.digest}


def test_a_call_outside_the_condition_runs_without_review(bench: Bench) -> None:
    run = bench.start("payments", amount="200")
    bench.work_here()
    assert bench.run(run.id).status == RunStatus.SUCCEEDED
    assert bench.store.list_reviews(run_id=run.id, status=None) == []
    assert [e["amount"] for e in bench.effects("paid")] == [200]


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        ('{"amount": "lots", "to": "ACME"}', "amount: expected integer, got string"),
        ('{"to": "ACME"}', "amount: required"),
        ('{"amount": 5, "to": "ACME", "memo": "x"}', "memo: unknown argument"),
        ("[1, 2]", "must be a JSON object"),
        ("not json", "must be a JSON object"),
    ],
)
def test_an_invalid_edit_is_refused_and_the_review_stays_pending(
    bench: Bench, edit: str, problem: str
) -> None:
    run_id = _paused_payment(bench)
    review = bench.pending(run_id)
    with pytest.raises(UsageError, match=problem):
        bench.service.decide(review.id, DecisionKind.EDIT, edit, by="U1")
    assert bench.store.get_review(review.id).status == ReviewStatus.PENDING


def test_tools_named_in_the_config_are_gated(bench: Bench) -> None:
    run = bench.start("gated_research", topic="otters")
    bench.work_here()
    bench.decide(run.id, "answer", "casual")
    bench.work_here()
    review = bench.pending(run.id)
    assert review.kind == ReviewKind.TOOL_APPROVAL
    assert review.details.tool == "publish"
    assert bench.effects("published") == []
    bench.decide(run.id, "approve")
    bench.work_here()
    assert bench.run(run.id).status == RunStatus.SUCCEEDED
    assert len(bench.effects("published")) == 1


@pytest.mark.slow
def test_a_worker_killed_between_approval_and_execution_pays_once(bench: Bench) -> None:
    run_id = _paused_payment(bench)
    bench.decide(run_id, "approve")
    doomed = bench.spawn(COUNTERSIGN_TEST_HOLD="factory")
    bench.kill_when_holding(doomed, "factory")
    bench.work()
    assert bench.run(run_id).status == RunStatus.SUCCEEDED
    assert len(bench.effects("paid")) == 1
    (review,) = bench.store.list_reviews(run_id=run_id, status=None)
    assert review.decision is not None and review.decision.kind == DecisionKind.APPROVE
