"""Reviews that need several approvers: storage's quorum on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta

import pytest

from storage import (
    APPROVED_BY,
    AlreadyApproved,
    AlreadyDecided,
    DecisionKind,
    NewDecision,
    NewReview,
    OutboxKind,
    ReviewKind,
    ReviewStatus,
    RunStatus,
    Store,
)


def _waiting_review(store: Store) -> tuple[str, str]:
    run = store.create_run("deal", {"client": "acme"}, started_by="U_STARTER")
    claim = store.claim_run("w1", timedelta(seconds=30))
    assert claim is not None and claim.lease_token is not None
    ask = NewReview(kind=ReviewKind.TASK_REVIEW, stream="task0:Writer", seq=0, prompt="draft")
    (review,) = store.suspend_run(run.id, claim.lease_token, [ask])
    return run.id, review.id


def _approve(by: str, key: str | None = None) -> NewDecision:
    return NewDecision(DecisionKind.APPROVE, by, details={"by_name": by.lower()}, request_key=key)


def _at_once(act: Callable[[int], None], count: int) -> None:
    """``act(0)`` … ``act(count - 1)`` in threads of their own, to the end of each."""
    threads = [threading.Thread(target=act, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _outbox(store: Store, kind: OutboxKind) -> int:
    return sum(1 for m in store.due_outbox() if m.kind == kind)


def test_an_approval_short_of_the_quorum_is_its_own_row_and_the_last_one_decides(
    store: Store,
) -> None:
    run_id, review_id = _waiting_review(store)
    first = store.decide(review_id, _approve("U_ANA"), approvals_required=2)
    assert first.status == ReviewStatus.PENDING and first.decision is None
    assert [a.decided_by for a in first.approvals] == ["U_ANA"]
    assert first.approvals[0].details == {"by_name": "u_ana"}
    assert store.get_run(run_id).status == RunStatus.WAITING
    assert _outbox(store, OutboxKind.REVIEW_APPROVED) == 1
    assert _outbox(store, OutboxKind.REVIEW_DECIDED) == 0
    decided = store.decide(review_id, _approve("U_BEN"), approvals_required=2)
    assert decided.status == ReviewStatus.DECIDED
    assert decided.decision is not None and decided.decision.kind == DecisionKind.APPROVE
    assert decided.decision.decided_by == "U_BEN"
    assert decided.decision.details[APPROVED_BY] == ["U_ANA", "U_BEN"]
    assert [a.decided_by for a in decided.approvals] == ["U_ANA", "U_BEN"]
    assert store.get_run(run_id).status == RunStatus.QUEUED
    assert _outbox(store, OutboxKind.REVIEW_APPROVED) == 1
    assert _outbox(store, OutboxKind.REVIEW_DECIDED) == 1
    (listed,) = store.list_reviews(status=None, run_id=run_id)
    assert listed.approvals == decided.approvals


def test_a_reviewer_counts_once_and_a_replayed_request_is_answered_as_the_first(
    store: Store,
) -> None:
    _, review_id = _waiting_review(store)
    first = store.decide(review_id, _approve("U_ANA", "trigger:T1"), approvals_required=2)
    assert store.decide(review_id, _approve("U_ANA", "trigger:T1"), approvals_required=2) == first
    with pytest.raises(AlreadyApproved) as again:
        store.decide(review_id, _approve("U_ANA", "trigger:T2"), approvals_required=2)
    assert again.value.given == 1 and again.value.required == 2
    assert "U_ANA approved it already (1 of 2 approvals)" in str(again.value)
    assert len(store.get_review(review_id).approvals) == 1
    assert store.get_review(review_id).status == ReviewStatus.PENDING


@pytest.mark.parametrize(
    ("kind", "text"), [(DecisionKind.REJECT, "too risky"), (DecisionKind.CHANGES, "lower it")]
)
def test_a_rejection_or_changes_by_anyone_decides_at_once(
    store: Store, kind: DecisionKind, text: str
) -> None:
    run_id, review_id = _waiting_review(store)
    store.decide(review_id, _approve("U_ANA"), approvals_required=3)
    decided = store.decide(review_id, NewDecision(kind, "U_BEN", text), approvals_required=3)
    assert decided.status == ReviewStatus.DECIDED
    assert decided.decision is not None and decided.decision.kind == kind
    assert [a.decided_by for a in decided.approvals] == ["U_ANA"]  # kept for the audit
    assert store.get_run(run_id).status == RunStatus.QUEUED
    with pytest.raises(AlreadyDecided):
        store.decide(review_id, _approve("U_CAL"), approvals_required=3)


def test_approvers_racing_for_the_last_approval_decide_once(db_url: str) -> None:
    """Two stores (two processes' engines) and many approvers at once, quorum 2: exactly one
    decided transition, one REVIEW_DECIDED row, the run queued once."""
    stores = [Store.open(db_url), Store.open(db_url)]
    try:
        run_id, review_id = _waiting_review(stores[0])
        stores[0].decide(review_id, _approve("U_FIRST"), approvals_required=3)
        racers = 6
        barrier = threading.Barrier(racers)
        outcomes: list[str] = []

        def approve(n: int) -> None:
            barrier.wait()
            try:
                review = stores[n % 2].decide(review_id, _approve(f"U_{n}"), approvals_required=3)
            except AlreadyDecided:
                outcomes.append("late")
                return
            outcomes.append("decided" if review.status == ReviewStatus.DECIDED else "counted")

        _at_once(approve, racers)
        assert sorted(outcomes) == ["counted", "decided"] + ["late"] * (racers - 2)
        review = stores[1].get_review(review_id)
        assert review.status == ReviewStatus.DECIDED and len(review.approvals) == 3
        assert review.decision is not None
        assert review.decision.details[APPROVED_BY] == [a.decided_by for a in review.approvals]
        assert stores[1].get_run(run_id).status == RunStatus.QUEUED
        assert _outbox(stores[1], OutboxKind.REVIEW_DECIDED) == 1
        assert _outbox(stores[1], OutboxKind.REVIEW_APPROVED) == 2
    finally:
        for opened in stores:
            opened.close()


def test_the_same_reviewer_clicking_twice_at_once_counts_once(db_url: str) -> None:
    stores = [Store.open(db_url), Store.open(db_url)]
    try:
        _, review_id = _waiting_review(stores[0])
        barrier = threading.Barrier(2)
        outcomes: list[str] = []

        def approve(n: int) -> None:
            barrier.wait()
            try:
                stores[n].decide(review_id, _approve("U_ANA", f"trigger:{n}"), approvals_required=2)
                outcomes.append("counted")
            except AlreadyApproved:
                outcomes.append("refused")

        _at_once(approve, 2)
        assert sorted(outcomes) == ["counted", "refused"]
        review = stores[0].get_review(review_id)
        assert review.status == ReviewStatus.PENDING and len(review.approvals) == 1
    finally:
        for opened in stores:
            opened.close()
