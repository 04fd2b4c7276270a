"""Reviews that need several approvers, and runs whose starter may not approve them:
storage's quorum on SQLite and PostgreSQL, and the rules of the configuration through the CLI."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select

from crew_runtime.config import ConfigError, CrewSpec, load_config
from crew_runtime.offline.drafts import parse_draft
from storage import (
    APPROVED_BY,
    AlreadyApproved,
    AlreadyDecided,
    DecisionKind,
    NewDecision,
    OutboxKind,
    ReviewStatus,
    RunStatus,
    Store,
)
from storage.retention import Retention, RetentionPolicy
from storage.schema import approvals
from tests.support import docs
from tests.support.cli import GOVERNED, Cli, assert_refused
from tests.support.runs import approve as _approve
from tests.support.runs import deliver, waiting_review, waiting_run
from tests.support.timing import FakeClock, at_once


def _outbox(store: Store, kind: OutboxKind) -> int:
    return sum(1 for m in store.due_outbox() if m.kind == kind)


def test_an_approval_short_of_the_quorum_is_its_own_row_and_the_last_one_decides(
    store: Store,
) -> None:
    run_id, review_id = waiting_review(store)
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
    _, review_id = waiting_review(store)
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
    run_id, review_id = waiting_review(store)
    store.decide(review_id, _approve("U_ANA"), approvals_required=3)
    decided = store.decide(review_id, NewDecision(kind, "U_BEN", text), approvals_required=3)
    assert decided.status == ReviewStatus.DECIDED
    assert decided.decision is not None and decided.decision.kind == kind
    assert [a.decided_by for a in decided.approvals] == ["U_ANA"]
    # the audit trail says who had approved before it was decided otherwise
    (record,) = store.audit_records(since=datetime(2000, 1, 1), until=datetime(2100, 1, 1))
    assert (record.decision, record.decided_by, record.approved_by) == (kind, "U_BEN", ["U_ANA"])
    assert store.get_run(run_id).status == RunStatus.QUEUED
    with pytest.raises(AlreadyDecided):
        store.decide(review_id, _approve("U_CAL"), approvals_required=3)


def test_approvers_racing_for_the_last_approval_decide_once(db_url: str) -> None:
    """Two stores (two processes' engines) and many approvers at once, quorum 2: exactly one
    decided transition, one REVIEW_DECIDED row, the run queued once."""
    stores = [Store.open(db_url), Store.open(db_url)]
    try:
        run_id, review_id = waiting_review(stores[0])
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

        at_once(approve, racers)
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
        _, review_id = waiting_review(stores[0])
        barrier = threading.Barrier(2)
        outcomes: list[str] = []

        def approve(n: int) -> None:
            barrier.wait()
            try:
                stores[n].decide(review_id, _approve("U_ANA", f"trigger:{n}"), approvals_required=2)
                outcomes.append("counted")
            except AlreadyApproved:
                outcomes.append("refused")

        at_once(approve, 2)
        assert sorted(outcomes) == ["counted", "refused"]
        review = stores[0].get_review(review_id)
        assert review.status == ReviewStatus.PENDING and len(review.approvals) == 1
    finally:
        for opened in stores:
            opened.close()


# --- the CLI: the configuration's rules, through `reviews decide --by` ----------------------


@pytest.fixture
def cli(db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Cli:
    config = tmp_path / "countersign.toml"
    config.write_text(GOVERNED)
    return Cli(db_url, config, capsys)


def test_a_task_needs_two_approvers_and_its_starter_is_not_one(cli: Cli) -> None:
    run_id = cli.ok("runs", "start", "deal", "topic=otters", "--by", "carol").out.strip()
    cli.worker()
    (outline,) = cli.ok("reviews", "list", "--json").json()
    decide = ("reviews", "decide", outline["id"])

    assert_refused(
        cli(*decide, "approve", "--by", "carol"), "carol started run", "forbid_self_approval"
    )
    counted = cli.ok(*decide, "approve", "--by", "alice").out
    assert (
        counted == f"{outline['id']}: approval counted, 1 of 2 (alice); run {run_id} is waiting\n"
    )
    assert_refused(cli(*decide, "approve", "--by", "alice"), "alice approved it already (1 of 2")
    assert_refused(cli(*decide, "edit", "shorter", "--by", "bob"), "needs 2 approvals")
    assert cli.ok(*decide, "approve", "--by", "bob").out.startswith(
        f"{outline['id']}: approve by bob; run {run_id} is queued"
    )
    cli.worker()

    # The second task needs one approval ([crews.deal.tasks.2]); the crew resumed with the
    # approved outline as the article's context, as with a single reviewer.
    article = next(r for r in cli.ok("reviews", "list", "--json").json())
    assert parse_draft(article["prompt"]).context == outline["prompt"]
    cli.ok("reviews", "decide", article["id"], "approve", "--by", "dave")
    cli.worker()

    shown = cli.ok("runs", "show", run_id, "--json").json()
    assert shown["status"] == "succeeded"
    first, second = shown["reviews"]
    assert [a["by"] for a in first["approvals"]] == ["alice", "bob"]
    assert first["decision"]["by"] == "bob"
    assert second["approvals"] == []
    block = cli.ok("reviews", "show", first["id"]).out
    assert "approval alice at " in block and "approval bob at " in block


def test_a_gated_tool_has_its_own_quorum_and_a_rejection_by_anyone_rejects(cli: Cli) -> None:
    run_id = cli.ok("runs", "start", "payout", "amount=1500", "--by", "carol").out.strip()
    cli.worker()
    (call,) = cli.ok("reviews", "list", "--json").json()
    assert call["kind"] == "tool_approval"
    # The crew does not forbid self-approval: the starter's approval counts.
    cli.ok("reviews", "decide", call["id"], "approve", "--by", "carol")
    rejected = cli.ok("reviews", "decide", call["id"], "reject", "too much", "--by", "erin").out
    assert rejected.startswith(f"{call['id']}: reject by erin; run {run_id} is queued")
    cli.worker()
    shown = cli.ok("runs", "show", run_id, "--json").json()
    assert shown["reviews"][0]["approvals"][0]["by"] == "carol"
    assert shown["reviews"][0]["decision"]["kind"] == "reject"


# --- the configuration ---------------------------------------------------------------------


def _load(tmp_path: Path, text: str) -> CrewSpec:
    path = tmp_path / "countersign.toml"
    path.write_text(text)
    return load_config(path).get("deal")


def test_a_gate_or_a_task_has_its_own_quorum_else_the_crews(tmp_path: Path) -> None:
    spec = _load(tmp_path, GOVERNED + "\n[crews.deal.gates.send_email]\napprovals_required = 3\n")
    assert spec.approvals_required == 2 and spec.forbid_self_approval
    assert spec.approvals_for(tool="send_email") == 3
    assert spec.approvals_for(tool="other", task=2) == 1
    assert spec.approvals_for(task=1) == 2
    plain = _load(tmp_path, '[crews.deal]\nfactory = "a:b"\n')
    assert plain.approvals_for(tool="send_email", task=1) == 1 and not plain.forbid_self_approval


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "approvals_required = 0",
            "crews.deal.approvals_required: expected a whole number of approvals, 1 or more, got 0",
        ),
        (
            "approvals_required = true",
            "crews.deal.approvals_required: expected a whole number of approvals, 1 or more, "
            "got true",
        ),
        (
            'forbid_self_approval = "yes"',
            'crews.deal.forbid_self_approval: expected true or false, got "yes"',
        ),
        (
            'reviewers = ["U0ANA", "U0BEN"]\napprovals_required = 3',
            "crews.deal.approvals_required: 3 approvals can never be given: reviewers lists "
            "2 people",
        ),
        (
            "gates = 2",
            "crews.deal.gates: expected tables like [crews.deal.gates.NAME], got 2",
        ),
        (
            "[crews.deal.gates.pay]\napproval_required = 2",
            "crews.deal.gates.pay.approval_required: unknown key (did you mean "
            '"approvals_required"?); known keys: approvals_required, stages, remind_after, '
            "escalate_after, expire_after, on_expire, remind_by, allow_standing, "
            "standing_match, rules",
        ),
        (
            "[crews.deal.tasks.first]\napprovals_required = 2",
            "crews.deal.tasks.first: expected a task number from 1, as in [crews.deal.tasks.2], "
            'got "first"',
        ),
        (
            "[crews.deal.tasks.0]\napprovals_required = 2",
            "crews.deal.tasks.0: expected a task number from 1, as in [crews.deal.tasks.2], "
            'got "0"',
        ),
        (
            'reviewers = ["U0ANA"]\n[crews.deal.tasks.1]\napprovals_required = 2',
            "crews.deal.tasks.1.approvals_required: 2 approvals can never be given: reviewers "
            "lists 1 people",
        ),
        # The deadlines a gate's or a task's table sets (tests/runtime/test_deadlines.py)
        (
            'remind_by = "email"',
            'crews.deal.remind_by: expected "thread" or "dm", got "email"',
        ),
        (
            'expire_after = "1h"\non_expire = "accept"',
            'crews.deal.on_expire: expected "reject", "approve" or "keep_waiting", got "accept"',
        ),
        (
            'expire_after = "1h"\non_expire = "keep_waiting"',
            'crews.deal.expire_after: a review that keeps waiting (on_expire = "keep_waiting") '
            "never expires; remove one of the two",
        ),
        (
            'on_expire = "approve"',
            'crews.deal.on_expire: "approve" needs a deadline: set expire_after here or for '
            "the crew",
        ),
        (
            '[crews.deal.gates.pay]\non_expire = "reject"',
            'crews.deal.gates.pay.on_expire: "reject" needs a deadline: set expire_after here '
            "or for the crew",
        ),
        (
            '[crews.deal.tasks.1]\nexpire_after = "soon"',
            'crews.deal.tasks.1.expire_after: expected a duration like "30m", got "soon" '
            '(units s, m, h, d, y as in "90s", "1h30m" or "1y", or a positive whole number '
            "of seconds)",
        ),
        (
            '[crews.deal.tasks.1]\nexpire_after = "1h"\non_expire = "keep_waiting"',
            "crews.deal.tasks.1.expire_after: a review that keeps waiting (on_expire = "
            '"keep_waiting") never expires; remove one of the two',
        ),
        (
            "[crews.deal.gates.pay]\nescalate_to = []",
            'crews.deal.gates.pay.escalate_to: unknown key (did you mean "escalate_after"?); '
            "known keys: approvals_required, stages, remind_after, escalate_after, "
            "expire_after, on_expire, remind_by, allow_standing, standing_match, rules",
        ),
        (
            "[crews.deal.gates.pay]",
            "crews.deal.gates.pay: empty; set one of approvals_required, stages, "
            "remind_after, escalate_after, expire_after, on_expire, remind_by, "
            "allow_standing, standing_match, rules",
        ),
    ],
)
def test_the_rules_are_validated_with_the_key_named(
    tmp_path: Path, text: str, expected: str
) -> None:
    path = tmp_path / "countersign.toml"
    path.write_text(f'[crews.deal]\nfactory = "a:b"\n{text}\n')
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value) == f"{path}: {expected}"


def test_the_readme_examples_of_the_rules_are_valid_and_mean_what_they_say(
    tmp_path: Path,
) -> None:
    # The example of approval chains is tests/cli/test_stage_config.py's.
    (several,) = docs.blocks(docs.section("docs/guide/approvals.md", "Several approvers"), "toml")
    (alone,) = docs.blocks(docs.section("docs/guide/reviews.md", "No self-approval"), "toml")
    spec = _load(tmp_path, several)
    assert spec.approvals_required == 2 and spec.reviewers == ("U0ANA", "U0BEN", "U0CAL")
    assert spec.approvals_for(tool="send_email") == 3
    assert spec.approvals_for(task=1) == 1 and spec.approvals_for(task=2) == 2
    assert _load(tmp_path, alone).forbid_self_approval


def test_a_pruned_run_takes_its_approvals_with_it_and_its_audit_names_the_approvers(
    db_url: str,
) -> None:
    clock = FakeClock()
    store = Store.open(db_url, clock=clock)
    try:
        run_id, review_id = waiting_run(store)
        store.decide(review_id, _approve("U0ANA"), approvals_required=2)
        store.decide(review_id, _approve("U0BEN"), approvals_required=2)
        claimed = store.claim_run("w1", timedelta(minutes=5))
        assert claimed is not None and claimed.lease_token
        store.finish_run(run_id, claimed.lease_token, RunStatus.SUCCEEDED, output="sent")
        deliver(store)
        clock.advance(days=400)
        assert store.prune(RetentionPolicy(Retention(keep_runs=timedelta(days=365))))
        with store.engine.connect() as conn:
            assert conn.execute(select(func.count()).select_from(approvals)).scalar_one() == 0
        (record,) = store.audit_records(since=datetime(2000, 1, 1), until=clock.now)
        assert (record.review_id, record.decision, record.decided_by, record.approved_by) == (
            review_id,
            "approve",
            "U0BEN",
            ["U0ANA", "U0BEN"],
        )
    finally:
        store.close()
