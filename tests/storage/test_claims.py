"""Claiming and reassigning a review: storage's compare-and-set and its audit records on SQLite
and PostgreSQL (races included), retention, and the rules through the CLI."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select

from storage import (
    AlreadyDecided,
    DecisionKind,
    NewDecision,
    OutboxKind,
    ReviewEventKind,
    RunStatus,
    Store,
)
from storage.retention import Retention, RetentionPolicy
from storage.schema import review_events
from tests.support.cli import Cli, assert_refused
from tests.support.runs import deliver, waiting_run
from tests.support.timing import FakeClock, at_once

CLAIM, REASSIGN = ReviewEventKind.CLAIM, ReviewEventKind.REASSIGN
EVER = {"since": datetime(2000, 1, 1), "until": datetime(2100, 1, 1)}


def _events(store: Store) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(review_events)).scalar_one())


def test_a_claim_marks_the_review_a_later_one_moves_it_and_each_is_in_the_audit(
    store: Store,
) -> None:
    run_id, review_id = waiting_run(store)
    claimed = store.claim_review(review_id, CLAIM, by="U0ANA", to="U0ANA", request_key="k1")
    assert claimed.claimed_by == "U0ANA" and claimed.claimed_at is not None
    # the same request again, or a claim by whoever has it: nothing changes, nothing recorded
    assert store.claim_review(review_id, CLAIM, by="U0ANA", to="U0ANA", request_key="k1") == claimed
    assert store.claim_review(review_id, CLAIM, by="U0ANA", to="U0ANA", request_key="k2") == claimed
    assert _events(store) == 1
    (told,) = [m for m in store.due_outbox() if m.kind == OutboxKind.REVIEW_CLAIMED]
    assert (told.review_id, told.payload) == (
        review_id,
        {"by": "U0ANA", "to": "U0ANA", "before": None},
    )
    moved = store.claim_review(review_id, REASSIGN, by="U0ANA", to="U0BEN", request_key="k3")
    assert moved.claimed_by == "U0BEN"
    last = [m for m in store.due_outbox() if m.kind == OutboxKind.REVIEW_CLAIMED][-1]
    assert last.payload == {"by": "U0ANA", "to": "U0BEN", "before": "U0ANA"}
    assert store.claim_review(review_id, CLAIM, by="U0CAL", to="U0CAL").claimed_by == "U0CAL"
    # anyone allowed still decides, whoever has it
    decided = store.decide(review_id, NewDecision(DecisionKind.APPROVE, "U0ANA"))
    assert decided.decision is not None and decided.claimed_by == "U0CAL"
    records = list(store.audit_records(**EVER))
    assert [(r.decision, r.decided_by, r.assigned_to) for r in records] == [
        ("claim", "U0ANA", "U0ANA"),
        ("reassign", "U0ANA", "U0BEN"),
        ("claim", "U0CAL", "U0CAL"),
        ("approve", "U0ANA", None),
    ]
    assert {(r.run_id, r.review_id, r.crew, r.channel) for r in records} == {
        (run_id, review_id, "outreach", "C0REVIEWS")
    }


def test_a_decided_review_cannot_be_claimed(store: Store) -> None:
    _, review_id = waiting_run(store)
    store.decide(review_id, NewDecision(DecisionKind.REJECT, "U0BEN"))
    with pytest.raises(AlreadyDecided, match="already decided"):
        store.claim_review(review_id, CLAIM, by="U0ANA", to="U0ANA")
    assert store.get_review(review_id).claimed_by is None
    assert _events(store) == 0


def test_claims_racing_each_move_it_once_and_the_last_recorded_has_it(db_url: str) -> None:
    """Two stores (two processes' engines), six reviewers claiming at once: each claim is one
    compare-and-set that moves the review, recorded once, and the review ends with the
    claimant recorded last (the events' ids follow the order the row lock let them in)."""
    stores = [Store.open(db_url), Store.open(db_url)]
    try:
        _, review_id = waiting_run(stores[0])

        def claim(n: int) -> None:
            stores[n % 2].claim_review(review_id, CLAIM, by=f"U{n}", to=f"U{n}", request_key=f"{n}")

        at_once(claim, 6)
        records = list(stores[1].audit_records(**EVER))
        assert sorted(r.assigned_to or "" for r in records) == [f"U{n}" for n in range(6)]
        with stores[1].engine.connect() as conn:
            last = conn.execute(
                select(review_events.c.to).order_by(review_events.c.id.desc()).limit(1)
            ).scalar_one()
        assert stores[1].get_review(review_id).claimed_by == last
    finally:
        for opened in stores:
            opened.close()


def test_one_request_replayed_at_once_is_recorded_once(db_url: str) -> None:
    stores = [Store.open(db_url), Store.open(db_url)]
    try:
        _, review_id = waiting_run(stores[0])
        claimed: list[str | None] = []

        def claim(n: int) -> None:
            review = stores[n].claim_review(
                review_id, REASSIGN, by="U0ANA", to="U0BEN", request_key="view:V1"
            )
            claimed.append(review.claimed_by)

        at_once(claim, 2)
        assert claimed == ["U0BEN", "U0BEN"]
        assert _events(stores[0]) == 1
    finally:
        for opened in stores:
            opened.close()


def test_claims_outlive_their_pruned_run_until_keep_audit_ends(db_url: str) -> None:
    clock = FakeClock()
    store = Store.open(db_url, clock=clock)
    try:
        run_id, review_id = waiting_run(store)
        store.claim_review(review_id, REASSIGN, by="U0ANA", to="U0BEN")
        clock.advance(minutes=5)
        store.decide(review_id, NewDecision(DecisionKind.APPROVE, "U0BEN"))
        leased = store.claim_run("w1", timedelta(minutes=5))
        assert leased is not None and leased.lease_token
        store.finish_run(run_id, leased.lease_token, RunStatus.SUCCEEDED, output="sent")
        deliver(store)
        clock.advance(days=400)
        runs_only = Retention(keep_runs=timedelta(days=365))
        assert store.prune(RetentionPolicy(runs_only))["outreach"]["runs"] == 1
        records = list(store.audit_records(since=datetime(2000, 1, 1), until=clock.now))
        assert [(r.decision, r.decided_by, r.assigned_to) for r in records] == [
            ("reassign", "U0ANA", "U0BEN"),
            ("approve", "U0BEN", None),
        ]
        keep_audit = Retention(keep_runs=timedelta(days=365), keep_audit=timedelta(days=365))
        assert store.prune(RetentionPolicy(crews={"outreach": keep_audit}), dry_run=True)[
            "outreach"
        ] == {"audit": 1, "review_events": 1}
        assert _events(store) == 1  # a dry run deletes nothing
        # another crew's retention leaves them be
        store.prune(RetentionPolicy(crews={"blog": keep_audit}))
        assert _events(store) == 1
        store.prune(RetentionPolicy(keep_audit))
        assert _events(store) == 0
        assert list(store.audit_records(since=datetime(2000, 1, 1), until=clock.now)) == []
    finally:
        store.close()


# --- the CLI: `reviews claim` and `reviews reassign`, with the crew's reviewers ---------------

CREWS = """
[crews.payout]
factory = "tests.support.crews:payments"
reviewers = ["U0ANA", "U0BEN"]

[crews.open]
factory = "tests.support.crews:payments"
"""


@pytest.fixture
def cli(db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Cli:
    config = tmp_path / "countersign.toml"
    config.write_text(CREWS)
    return Cli(db_url, config, capsys)


def _pending(cli: Cli, crew: str) -> str:
    cli.ok("runs", "start", crew, "amount=1500", "--by", "carol")
    cli.worker()
    reviews = cli.ok("reviews", "list", "--json").json()
    (review,) = [r for r in reviews if r["claimed_by"] is None]
    return str(review["id"])


def test_only_a_named_reviewer_claims_or_is_given_a_review(cli: Cli) -> None:
    review_id = _pending(cli, "payout")
    assert_refused(
        cli("reviews", "claim", review_id, "--by", "U0EVE"),
        "U0EVE is not one of the reviewers of run",
    )
    assert cli.ok("reviews", "claim", review_id, "--by", "U0ANA").out == (
        f"{review_id}: claimed by U0ANA\n"
    )
    assert_refused(
        cli("reviews", "reassign", review_id, "--to", "U0EVE", "--by", "U0ANA"),
        "U0EVE is not one of the reviewers",
    )
    assert_refused(
        cli("reviews", "reassign", review_id, "--to", "U0BEN", "--by", "U0EVE"),
        "U0EVE is not one of the reviewers",
    )
    before = cli.snapshot()
    assert_refused(cli("reviews", "claim", "rev_nope", "--by", "U0ANA"), "rev_nope")
    assert cli.snapshot() == before
    assert cli.ok("reviews", "reassign", review_id, "--to", "U0BEN", "--by", "U0ANA").out == (
        f"{review_id}: reassigned to U0BEN by U0ANA\n"
    )
    shown = cli.ok("reviews", "show", review_id, "--json").json()
    assert shown["claimed_by"] == "U0BEN"
    assert "claimed  by U0BEN at " in cli.ok("reviews", "show", review_id).out
    cli.ok("reviews", "decide", review_id, "approve", "--by", "U0BEN")
    assert_refused(cli("reviews", "claim", review_id, "--by", "U0ANA"), "already decided")
    exported = cli.ok("audit", "export", "--since", "2000-01-01", "--until", "2100-01-01")
    records = [json.loads(line) for line in exported.out.splitlines()]
    rows = [(r["decision"], r["decided_by"], r["assigned_to"]) for r in records]
    assert rows == [
        ("claim", "U0ANA", "U0ANA"),
        ("reassign", "U0ANA", "U0BEN"),
        ("approve", "U0BEN", None),
    ]


def test_a_crew_open_to_its_channel_lets_the_cli_claim_for_anyone(cli: Cli) -> None:
    review_id = _pending(cli, "open")
    cli.ok("reviews", "reassign", review_id, "--to", "U0EVE", "--by", "U0DAN")
    assert cli.ok("reviews", "show", review_id, "--json").json()["claimed_by"] == "U0EVE"
