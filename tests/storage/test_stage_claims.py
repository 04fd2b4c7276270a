"""Approval chains beyond deciding, on SQLite and PostgreSQL: who may claim a review with a
chain and be given it (the current stage's reviewers and their delegates), through the
service and the CLI; and a deadline deciding a review mid-chain, naming who had approved at
which stage."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest

from crew_runtime.errors import NotYourStage
from crew_runtime.service import Countersign
from storage import (
    APPROVAL_STAGES,
    APPROVED_BY,
    DEADLINE,
    DecisionKind,
    NewDecision,
    NewReview,
    OnExpire,
    ReviewEventKind,
    ReviewKind,
    ReviewStatus,
    RunStatus,
    StageMoved,
    Store,
)
from tests.support.cli import Cli, assert_refused
from tests.support.configs import CHAIN, STAGES, stages_config
from tests.support.runs import waiting_review
from tests.support.timing import FakeClock, at_once


def test_the_current_stage_claims_and_is_given_the_review_and_nobody_else(
    db_url: str, tmp_path: Path
) -> None:
    service = Countersign(Store.open(db_url), stages_config(tmp_path))
    try:
        _, review_id = waiting_review(service.store)
        with pytest.raises(NotYourStage) as early:  # a manager, before legal approved
            service.claim(review_id, by="U0MAX")
        assert "is at its legal stage (1 of 2): only U0LEA or U0LEX" in str(early.value)
        assert "U0MAX is asked at the manager stage, after it" in str(early.value)
        with pytest.raises(NotYourStage):  # legal may not give it to a manager yet
            service.claim(review_id, by="U0LEA", to="U0MAX")
        assert service.store.get_review(review_id).claimed_by is None
        assert service.claim(review_id, by="U0LEA", to="U0LEX").claimed_by == "U0LEX"

        service.decide(review_id, DecisionKind.APPROVE, None, by="U0LEA")
        with pytest.raises(NotYourStage) as late:  # legal's turn is over
            service.claim(review_id, by="U0LEX")
        assert "is at its manager stage (2 of 2)" in str(late.value)
        assert service.claim(review_id, by="U0MAX").claimed_by == "U0MAX"

        # Mia is away: her delegate claims and is given reviews at her stage, not at legal's.
        service.store.away("U0MIA", "U0ZED", datetime(2099, 1, 1), by="U0MIA")
        assert service.claim(review_id, by="U0ZED").claimed_by == "U0ZED"
        assert service.claim(review_id, by="U0MAX", to="U0ZED").claimed_by == "U0ZED"
        with pytest.raises(NotYourStage):
            service.claim(review_id, by="U0ZED", to="U0LEA")
    finally:
        service.store.close()


def test_the_cli_claims_and_reassigns_at_the_current_stage_only(
    db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "stages.toml").write_text(STAGES)
    cli = Cli(db_url, tmp_path / "stages.toml", capsys)
    cli.ok("runs", "start", "deal", "topic=otters", "--by", "U0LEX")
    cli.worker()
    (outline,) = cli.ok("reviews", "list", "--json").json()
    review_id = outline["id"]
    assert_refused(
        cli("reviews", "claim", review_id, "--by", "U0MIA"),
        "is at its legal stage (1 of 2): only U0LEA or U0LEX may decide it now",
    )
    assert_refused(
        cli("reviews", "reassign", review_id, "--to", "U0MIA", "--by", "U0LEA"),
        "U0MIA is asked at the manager stage, after it",
    )
    assert cli.ok("reviews", "claim", review_id, "--by", "U0LEA").out == (
        f"{review_id}: claimed by U0LEA\n"
    )
    cli.ok("reviews", "decide", review_id, "approve", "--by", "U0LEA")
    assert_refused(
        cli("reviews", "reassign", review_id, "--to", "U0LEX", "--by", "U0LEA"),
        "is at its manager stage (2 of 2)",
    )
    assert cli.ok("reviews", "reassign", review_id, "--to", "U0MIA", "--by", "U0MAX").out == (
        f"{review_id}: reassigned to U0MIA by U0MAX\n"
    )
    assert cli.ok("reviews", "show", review_id, "--json").json()["claimed_by"] == "U0MIA"


@pytest.mark.parametrize("on_expire", [OnExpire.APPROVE, OnExpire.REJECT])
def test_a_deadline_decides_mid_chain_naming_who_had_approved_at_which_stage(
    db_url: str, on_expire: OnExpire
) -> None:
    clock = FakeClock()
    store = Store.open(db_url, clock=clock)
    try:
        run = store.create_run("deal", {}, started_by="U_STARTER")
        claim = store.claim_run("w1", timedelta(seconds=30))
        assert claim is not None and claim.lease_token is not None
        ask = NewReview(
            kind=ReviewKind.TASK_REVIEW,
            stream="task0:Writer",
            seq=0,
            prompt="draft",
            expires_at=clock.now + timedelta(minutes=10),
            on_expire=on_expire,
        )
        (review,) = store.suspend_run(run.id, claim.lease_token, [ask])
        approve = DecisionKind.APPROVE
        store.decide(review.id, NewDecision(approve, "U0LEA"), stages=CHAIN, stage=0)
        store.decide(review.id, NewDecision(approve, "U0MAX"), stages=CHAIN, stage=1)
        assert store.get_review(review.id).status == ReviewStatus.PENDING  # 1 of 2 managers

        clock.advance(minutes=11)
        assert store.sweep_reviews()["expired"] == 1
        decided = store.get_review(review.id)
        assert decided.status == ReviewStatus.DECIDED and decided.decision is not None
        assert decided.stage == 1  # the stage it was at: manager, short of its count
        if on_expire == OnExpire.APPROVE:
            assert (decided.decision.kind, decided.decision.decided_by) == (approve, DEADLINE)
        else:
            assert decided.decision.kind == DecisionKind.EXPIRE
        assert decided.decision.details[APPROVED_BY] == ["U0LEA", "U0MAX"]
        stages = [{"by": "U0LEA", "stage": "legal"}, {"by": "U0MAX", "stage": "manager"}]
        assert decided.decision.details[APPROVAL_STAGES] == stages
        assert store.get_run(run.id).status == RunStatus.QUEUED
        (record,) = store.audit_records(since=datetime(2000, 1, 1), until=datetime(3000, 1, 1))
        assert (record.approved_by, record.approval_stages) == (["U0LEA", "U0MAX"], stages)
        assert store.sweep_reviews()["expired"] == 0  # a second sweep decides nothing more
    finally:
        store.close()


def test_a_claim_allowed_at_a_stage_the_review_has_left_is_refused(store: Store) -> None:
    _, review_id = waiting_review(store)
    store.decide(review_id, NewDecision(DecisionKind.APPROVE, "U0LEA"), stages=CHAIN, stage=0)
    with pytest.raises(StageMoved):  # checked at legal, recorded after legal passed
        store.claim_review(
            review_id, ReviewEventKind.CLAIM, by="U0LEX", to="U0LEX", stages=CHAIN, stage=0
        )
    review = store.get_review(review_id)
    assert review.claimed_by is None
    assert list(store.audit_records(since=datetime(2000, 1, 1), until=datetime(3000, 1, 1))) == []
    claimed = store.claim_review(
        review_id, ReviewEventKind.CLAIM, by="U0MAX", to="U0MAX", stages=CHAIN, stage=1
    )
    assert claimed.claimed_by == "U0MAX"


def test_a_claim_racing_the_approval_that_passes_its_stage_lands_before_it_or_not_at_all(
    db_url: str, tmp_path: Path
) -> None:
    service = Countersign(Store.open(db_url), stages_config(tmp_path))
    try:
        for _ in range(3):
            _, review_id = waiting_review(service.store)
            refused: list[Exception] = []

            def act(n: int, review_id: str = review_id, refused: list[Exception] = refused) -> None:
                if n == 0:
                    service.decide(review_id, DecisionKind.APPROVE, None, by="U0LEA")
                    return
                try:
                    service.claim(review_id, by="U0LEX")
                except (NotYourStage, StageMoved) as exc:
                    refused.append(exc)

            at_once(act, 2)
            review = service.store.get_review(review_id)
            assert review.stage == 1
            events = [
                r
                for r in service.store.audit_records(
                    since=datetime(2000, 1, 1), until=datetime(3000, 1, 1)
                )
                if r.review_id == review_id and r.decision == "claim"
            ]
            if refused:  # it found the review at the manager stage: nothing recorded
                assert (review.claimed_by, events) == (None, [])
            else:  # recorded while the review was still at legal
                assert review.claimed_by == "U0LEX" and len(events) == 1
    finally:
        service.store.close()


def test_a_claim_replayed_after_the_stage_moved_is_answered_as_the_first(
    db_url: str, tmp_path: Path
) -> None:
    service = Countersign(Store.open(db_url), stages_config(tmp_path))
    try:
        _, review_id = waiting_review(service.store)
        first = service.claim(review_id, by="U0LEA", request_key="k1")
        service.decide(review_id, DecisionKind.APPROVE, None, by="U0LEA")
        again = service.claim(review_id, by="U0LEA", request_key="k1")
        assert (again.claimed_by, again.claimed_at) == (first.claimed_by, first.claimed_at)
        with pytest.raises(NotYourStage):  # a new click of hers is another matter
            service.claim(review_id, by="U0LEA", request_key="k2")
    finally:
        service.store.close()
