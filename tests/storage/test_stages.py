"""Approval chains (``stages``): storage's count per stage and its compare-and-set on the stage,
on SQLite and PostgreSQL, with races between approvers; the service's turn of each stage; and
the CLI, whose every command is a new Store (a restart) carrying the chain on from the
database."""

from __future__ import annotations

import threading
from datetime import datetime
from pathlib import Path

import pytest

from crew_runtime.errors import NotYourStage
from crew_runtime.service import Countersign
from storage import (
    APPROVAL_STAGES,
    APPROVED_BY,
    AlreadyApproved,
    DecisionKind,
    NewDecision,
    OutboxKind,
    ReviewStatus,
    RunStatus,
    StageMoved,
    Store,
)
from tests.support.cli import Cli, assert_refused
from tests.support.configs import CHAIN, STAGES, stages_config
from tests.support.runs import approve as _approve
from tests.support.runs import waiting_review
from tests.support.timing import at_once


def _payloads(store: Store, kind: OutboxKind) -> list[object]:
    return [m.payload for m in store.due_outbox() if m.kind == kind]


# --- storage ---------------------------------------------------------------------------------


def test_each_stage_counts_its_own_approvals_and_the_last_one_decides(store: Store) -> None:
    run_id, review_id = waiting_review(store)
    moved = store.decide(review_id, _approve("U0LEA"), stages=CHAIN, stage=0)
    assert moved.status == ReviewStatus.PENDING and moved.stage == 1
    assert [(a.decided_by, a.stage) for a in moved.approvals] == [("U0LEA", "legal")]
    assert _payloads(store, OutboxKind.REVIEW_APPROVED) == [{"stage": "legal"}]

    counted = store.decide(review_id, _approve("U0MAX"), stages=CHAIN, stage=1)
    assert counted.status == ReviewStatus.PENDING and counted.stage == 1
    assert store.get_run(run_id).status == RunStatus.WAITING
    decided = store.decide(review_id, _approve("U0MIA"), stages=CHAIN, stage=1)
    assert decided.status == ReviewStatus.DECIDED and decided.decision is not None
    assert decided.decision.decided_by == "U0MIA"
    assert decided.decision.details[APPROVED_BY] == ["U0LEA", "U0MAX", "U0MIA"]
    assert decided.decision.details[APPROVAL_STAGES] == [
        {"by": "U0LEA", "stage": "legal"},
        {"by": "U0MAX", "stage": "manager"},
        {"by": "U0MIA", "stage": "manager"},
    ]
    assert store.get_run(run_id).status == RunStatus.QUEUED
    assert _payloads(store, OutboxKind.REVIEW_APPROVED) == [{"stage": "legal"}, {}]
    # The audit trail keeps each approval with its stage.
    (record,) = store.audit_records(since=datetime(2000, 1, 1), until=datetime(2100, 1, 1))
    assert record.approved_by == ["U0LEA", "U0MAX", "U0MIA"]
    assert record.approval_stages == decided.decision.details[APPROVAL_STAGES]


def test_a_decision_made_at_a_stage_the_review_left_is_refused_and_a_person_counts_once(
    store: Store,
) -> None:
    _, review_id = waiting_review(store)
    first = store.decide(review_id, _approve("U0LEA", "trigger:1"), stages=CHAIN, stage=0)
    # The same request replayed is answered as the first time.
    again = store.decide(review_id, _approve("U0LEA", "trigger:1"), stages=CHAIN, stage=0)
    assert again == first
    # A second click made at stage 1 (legal) reaches a review at stage 2: refused.
    with pytest.raises(StageMoved) as moved:
        store.decide(review_id, _approve("U0LEX", "trigger:2"), stages=CHAIN, stage=0)
    assert "the legal stage was passed already; it is at the manager stage" in str(moved.value)
    # A person approves once per review, whatever the stage.
    with pytest.raises(AlreadyApproved):
        store.decide(review_id, _approve("U0LEA", "trigger:3"), stages=CHAIN, stage=1)
    review = store.get_review(review_id)
    assert [a.decided_by for a in review.approvals] == ["U0LEA"] and review.stage == 1


def test_a_rejection_mid_chain_decides_at_once_and_keeps_the_approvals_with_their_stage(
    store: Store,
) -> None:
    run_id, review_id = waiting_review(store)
    store.decide(review_id, _approve("U0LEA"), stages=CHAIN, stage=0)
    rejected = NewDecision(DecisionKind.REJECT, "U0MAX", "not this quarter")
    decided = store.decide(review_id, rejected, stages=CHAIN, stage=1)
    assert decided.status == ReviewStatus.DECIDED and decided.decision is not None
    assert decided.decision.kind == DecisionKind.REJECT
    assert decided.decision.details[APPROVAL_STAGES] == [{"by": "U0LEA", "stage": "legal"}]
    assert store.get_run(run_id).status == RunStatus.QUEUED
    (record,) = store.audit_records(since=datetime(2000, 1, 1), until=datetime(2100, 1, 1))
    assert (record.decision, record.approved_by) == ("reject", ["U0LEA"])
    assert record.approval_stages == [{"by": "U0LEA", "stage": "legal"}]


def test_two_first_stage_approvers_racing_move_the_chain_once(db_url: str) -> None:
    """Two stores (two processes' engines), both legal reviewers clicking at once: one
    approval passes the stage, the other is told the stage moved; one REVIEW_APPROVED."""
    stores = [Store.open(db_url), Store.open(db_url)]
    try:
        _, review_id = waiting_review(stores[0])
        barrier = threading.Barrier(2)
        outcomes: list[str] = []

        def approve(n: int) -> None:
            barrier.wait()
            by = ("U0LEA", "U0LEX")[n]
            try:
                stores[n].decide(review_id, _approve(by, f"trigger:{n}"), stages=CHAIN, stage=0)
                outcomes.append("moved")
            except StageMoved:
                outcomes.append("late")

        at_once(approve, 2)
        assert sorted(outcomes) == ["late", "moved"]
        review = stores[1].get_review(review_id)
        assert review.status == ReviewStatus.PENDING and review.stage == 1
        assert [a.stage for a in review.approvals] == ["legal"]
        assert _payloads(stores[1], OutboxKind.REVIEW_APPROVED) == [{"stage": "legal"}]
    finally:
        for opened in stores:
            opened.close()


def test_a_second_stage_reviewer_clicking_early_never_counts_at_the_first(
    db_url: str, tmp_path: Path
) -> None:
    """A legal approval and a manager's early click at the same moment, through the service
    (two stores): the manager is either refused (the review was still at legal when asked)
    or counted at the manager stage (it had moved): never at legal."""
    config = stages_config(tmp_path)
    services = [Countersign(Store.open(db_url), config) for _ in range(2)]
    try:
        _, review_id = waiting_review(services[0].store)
        with pytest.raises(NotYourStage) as early:
            services[1].decide(review_id, DecisionKind.APPROVE, None, by="U0MAX")
        assert "is at its legal stage (1 of 2): only U0LEA or U0LEX" in str(early.value)
        assert "U0MAX is asked at the manager stage, after it" in str(early.value)
        assert services[0].store.get_review(review_id).approvals == ()

        barrier = threading.Barrier(2)
        outcomes: dict[str, str] = {}

        def click(n: int) -> None:
            by = ("U0LEA", "U0MAX")[n]
            barrier.wait()
            try:
                services[n].decide(review_id, DecisionKind.APPROVE, None, by=by)
                outcomes[by] = "counted"
            except (NotYourStage, StageMoved):
                outcomes[by] = "refused"

        at_once(click, 2)
        assert outcomes["U0LEA"] == "counted"
        review = services[0].store.get_review(review_id)
        assert review.stage == 1 and review.status == ReviewStatus.PENDING
        stages = {a.decided_by: a.stage for a in review.approvals}
        assert stages["U0LEA"] == "legal"
        assert stages.get("U0MAX", "manager") == "manager"
        assert ("U0MAX" in stages) == (outcomes["U0MAX"] == "counted")
    finally:
        for service in services:
            service.store.close()


# --- the CLI: `reviews decide --by` and `reviews show`, a new Store each time --------------


@pytest.fixture
def cli(db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Cli:
    config = tmp_path / "countersign.toml"
    config.write_text(STAGES)
    return Cli(db_url, config, capsys)


def test_a_task_goes_through_legal_then_two_managers(cli: Cli) -> None:
    run_id = cli.ok("runs", "start", "deal", "topic=otters", "--by", "U0LEX").out.strip()
    cli.worker()
    (outline,) = cli.ok("reviews", "list", "--json").json()
    decide = ("reviews", "decide", outline["id"])
    shown = cli.ok("reviews", "show", outline["id"]).out
    assert "stage    1 of 2, legal: U0LEA or U0LEX (1 approval needed)" in shown

    assert_refused(
        cli(*decide, "approve", "--by", "U0MAX"),
        "is at its legal stage (1 of 2): only U0LEA or U0LEX may decide it now",
        "U0MAX is asked at the manager stage, after it",
    )
    assert_refused(cli(*decide, "approve", "--by", "U0LEX"), "forbid_self_approval")
    assert_refused(cli(*decide, "edit", "shorter", "--by", "U0LEA"), "needs 2 stages")
    passed = cli.ok(*decide, "approve", "--by", "U0LEA").out
    assert passed == (
        f"{outline['id']}: approval counted, legal stage passed (U0LEA); stage 2 of 2, "
        f"manager: U0MAX or U0MIA or U0MOE (2 approvals needed); run {run_id} is waiting\n"
    )
    # The chain is in the database: each command below is a new Store, and so is the worker.
    assert_refused(cli(*decide, "approve", "--by", "U0LEA"), "only U0MAX or U0MIA or U0MOE")
    counted = cli.ok(*decide, "approve", "--by", "U0MAX").out
    assert "approval counted at stage 2 of 2, manager: 1 of 2 (U0MAX)" in counted
    assert "approval U0LEA at " in cli.ok("reviews", "show", outline["id"]).out
    assert cli.ok(*decide, "approve", "--by", "U0MOE").out.startswith(
        f"{outline['id']}: approve by U0MOE; run {run_id} is queued"
    )
    cli.worker()
    article = next(r for r in cli.ok("reviews", "list", "--json").json())
    cli.ok("reviews", "decide", article["id"], "approve", "--by", "U0ANYONE")
    cli.worker()
    shown_run = cli.ok("runs", "show", run_id, "--json").json()
    assert shown_run["status"] == "succeeded"
    first = shown_run["reviews"][0]
    assert [(a["by"], a["stage"]) for a in first["approvals"]] == [
        ("U0LEA", "legal"),
        ("U0MAX", "manager"),
        ("U0MOE", "manager"),
    ]
    block = cli.ok("reviews", "show", first["id"]).out
    assert "approval U0LEA at " in block and "(legal)" in block and "stage    " not in block
    export = ("audit", "export", "--since", "2000-01-01", "--until", "2100-01-01")
    exported = cli.ok(*export).out.splitlines()
    assert '"approval_stages": [{"by": "U0LEA", "stage": "legal"}' in exported[0]


def test_a_gated_call_rejected_at_the_second_stage(cli: Cli) -> None:
    run_id = cli.ok("runs", "start", "payout", "amount=1500", "--by", "U0CLERK").out.strip()
    cli.worker()
    (call,) = cli.ok("reviews", "list", "--json").json()
    decide = ("reviews", "decide", call["id"])
    assert "finance stage passed (U0FIN)" in cli.ok(*decide, "approve", "--by", "U0FIN").out
    assert_refused(cli(*decide, "reject", "no", "--by", "U0FIN"), "only U0CFO may decide")
    rejected = cli.ok(*decide, "reject", "too much", "--by", "U0CFO").out
    assert rejected.startswith(f"{call['id']}: reject by U0CFO; run {run_id} is queued")
    cli.worker()
    shown = cli.ok("runs", "show", run_id, "--json").json()
    assert shown["reviews"][0]["decision"]["kind"] == "reject"  # the crew is told "denied"
    assert shown["reviews"][0]["approvals"] == [
        {"by": "U0FIN", "at": shown["reviews"][0]["approvals"][0]["at"], "stage": "finance"}
    ]


def test_a_delegate_approves_at_the_stage_of_the_person_away(db_url: str, tmp_path: Path) -> None:
    service = Countersign(Store.open(db_url), stages_config(tmp_path))
    try:
        _, review_id = waiting_review(service.store)
        service.away("U0LEA", "U0DEL", "2999-12-31", by="U0LEA")
        moved = service.decide(review_id, DecisionKind.APPROVE, None, by="U0DEL")
        assert moved.stage == 1
        assert [(a.decided_by, a.stage) for a in moved.approvals] == [("U0DEL", "legal")]
        with pytest.raises(NotYourStage):  # the delegate holds legal's reviews, not manager's
            service.decide(review_id, DecisionKind.REJECT, "no", by="U0DEL")
    finally:
        service.store.close()


def test_changes_requested_mid_chain_start_the_next_round_at_the_first_stage(cli: Cli) -> None:
    cli.ok("runs", "start", "deal", "topic=otters", "--by", "U0STARTER")
    cli.worker()
    (outline,) = cli.ok("reviews", "list", "--json").json()
    cli.ok("reviews", "decide", outline["id"], "approve", "--by", "U0LEA")
    cli.ok("reviews", "decide", outline["id"], "changes", "shorter", "--by", "U0MIA")
    cli.worker()
    (revised,) = cli.ok("reviews", "list", "--json").json()
    assert revised["id"] != outline["id"] and revised["stage"] == 0
    shown = cli.ok("reviews", "show", revised["id"]).out
    assert "stage    1 of 2, legal: U0LEA or U0LEX" in shown


def test_a_question_is_answered_by_one_person_outside_the_chain(cli: Cli) -> None:
    cli.ok("runs", "start", "research", "topic=otters", "subject=otters", "--by", "U0STARTER")
    cli.worker()
    (question,) = cli.ok("reviews", "list", "--json").json()
    assert question["kind"] == "question"
    answered = cli.ok("reviews", "decide", question["id"], "answer", "formal", "--by", "U0ANY")
    assert answered.out.startswith(f"{question['id']}: answer by U0ANY")


def test_a_replayed_request_is_answered_as_the_first_after_the_stage_moved(
    db_url: str, tmp_path: Path
) -> None:
    service = Countersign(Store.open(db_url), stages_config(tmp_path))
    try:
        _, review_id = waiting_review(service.store)
        first = service.decide(review_id, DecisionKind.APPROVE, None, by="U0LEA", request_key="k1")
        assert first.stage == 1
        again = service.decide(review_id, DecisionKind.APPROVE, None, by="U0LEA", request_key="k1")
        assert again == first
        with pytest.raises(NotYourStage):  # a new click of hers is another matter
            service.decide(review_id, DecisionKind.APPROVE, None, by="U0LEA", request_key="k2")
    finally:
        service.store.close()
