"""Runs and reviews put in a real store as a worker puts them."""

from __future__ import annotations

import json
from datetime import timedelta

from storage import (
    DecisionKind,
    NewDecision,
    NewReview,
    ReviewKind,
    RunStatus,
    Store,
    ToolApprovalDetails,
)


def waiting_review(store: Store) -> tuple[str, str]:
    run = store.create_run("deal", {"client": "acme"}, started_by="U_STARTER")
    claim = store.claim_run("w1", timedelta(seconds=30))
    assert claim is not None and claim.lease_token is not None
    ask = NewReview(kind=ReviewKind.TASK_REVIEW, stream="task0:Writer", seq=0, prompt="draft")
    (review,) = store.suspend_run(run.id, claim.lease_token, [ask])
    return run.id, review.id


def approve(by: str, key: str | None = None) -> NewDecision:
    return NewDecision(DecisionKind.APPROVE, by, details={"by_name": by.lower()}, request_key=key)


def deliver(store: Store) -> None:
    """Tell Slack (:func:`tell_slack`), and mark every webhook event done, as the webhook
    sender does when no webhook wants it."""
    tell_slack(store)
    store.close_unwatched_events(())


def finished_run(store: Store, crew: str = "outreach", *, delivered: bool = True) -> str:
    """A run whose gated call a reviewer edited, that ran with the edit and succeeded (and,
    if ``delivered``, whose messages all reached Slack)."""
    run_id, review_id = waiting_run(store, crew)
    store.decide(review_id, NewDecision(DecisionKind.EDIT, "U0ANA", text=json.dumps(APPROVED)))
    claimed = store.claim_run("w1", LEASE)
    assert claimed is not None and claimed.id == run_id and claimed.lease_token
    payload = {"tool": "send_email", "args": APPROVED, "result": "sent"}
    store.append_journal(
        run_id, claimed.lease_token, stream="task0:Writer", kind="tool", seq=0, payload=payload
    )
    store.finish_run(run_id, claimed.lease_token, RunStatus.SUCCEEDED, output="sent")
    if delivered:
        deliver(store)
    return run_id


def waiting_run(store: Store, crew: str = "outreach") -> tuple[str, str]:
    """A run waiting for the approval of a gated ``send_email`` call: (run, review)."""
    run = store.create_run(crew, {"topic": "otters"}, channel="C0REVIEWS")
    claimed = store.claim_run("w1", LEASE)
    assert claimed is not None and claimed.lease_token
    ask = NewReview(
        kind=ReviewKind.TOOL_APPROVAL,
        stream="task0:Writer",
        seq=0,
        prompt="send_email(...)",
        details=ToolApprovalDetails(tool="send_email", args=PROPOSED),
    )
    [review] = store.suspend_run(run.id, claimed.lease_token, [ask])
    return run.id, review.id


LEASE = timedelta(minutes=5)


APPROVED = {"to": "ana@example.com", "subject": "Otter tours"}


PROPOSED = {"to": "ana@example.com", "subject": "Otters"}


def tell_slack(store: Store) -> None:
    """Mark every due outbox message sent, as the dispatcher would once Slack took it."""
    while due := store.due_outbox():
        for message in due:
            assert store.claim_outbox(message.id, "test", LEASE) is not None
            assert store.mark_sent(message.id, "test")
