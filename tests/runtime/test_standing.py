"""Standing approvals: one approval of a gated call that approves the tool's later calls in
the run with the same values of named arguments, until revoked."""

from __future__ import annotations

import json
import threading
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from crew_runtime.config import ConfigError, load_config
from crew_runtime.digests import call_digest
from crew_runtime.errors import UsageError
from storage import (
    AlreadyRevoked,
    DecisionKind,
    ReviewKind,
    RunNotFound,
    RunStatus,
    StandingNotFound,
    Store,
    utc_now,
)
from storage.retention import Retention, RetentionPolicy
from tests.support import docs
from tests.support.cli import Cli, assert_refused
from tests.support.harness import Bench
from tests.support.runs import deliver

PAYROLL = """
[crews.payroll]
factory = "tests.support.crews:payroll"
description = "Three gated payments"

[crews.payroll.gates.pay]
allow_standing = true
standing_match = ["to"]

[crews.payroll_any]
factory = "tests.support.crews:payroll"
description = "Three gated payments; a standing approval covers every payee"

[crews.payroll_any.gates.pay]
allow_standing = true

[crews.payroll_strict]
factory = "tests.support.crews:payroll"
description = "Three gated payments, each reviewed"
"""


@pytest.fixture
def payroll(bench: Bench) -> Bench:
    bench.add_crews(PAYROLL)
    return bench


def _paid(bench: Bench) -> list[tuple[int, str]]:
    return [(e["amount"], e["to"]) for e in bench.effects("paid")]


def _first_review(bench: Bench, crew: str) -> str:
    run = bench.start(crew)
    bench.work_here()
    review = bench.pending(run.id)
    assert review.kind == ReviewKind.TOOL_APPROVAL
    assert review.details.args == {"amount": 1500, "to": "ACME"}
    return review.id


def _approve_standing(bench: Bench, review_id: str, by: str = "U_ANA") -> None:
    bench.service.decide(review_id, DecisionKind.APPROVE, None, by=by, standing=True)


def test_a_standing_approval_approves_later_calls_with_the_same_named_values(
    payroll: Bench,
) -> None:
    review_id = _first_review(payroll, "payroll")
    run_id = payroll.store.get_review(review_id).run_id
    _approve_standing(payroll, review_id)
    (standing,) = payroll.store.standing_approvals(run_id)
    assert (standing.tool, standing.match, standing.granted_by) == ("pay", {"to": "ACME"}, "U_ANA")
    assert standing.review_id == review_id and standing.revoked_at is None

    payroll.work_here()  # ACME 1500 (its review), ACME 2000 (standing); GLOBEX asks
    assert _paid(payroll) == [(1500, "ACME"), (2000, "ACME")]
    globex = payroll.pending(run_id)
    assert globex.details.args == {"amount": 1200, "to": "GLOBEX"}
    (entry,) = [e for e in payroll.store.load_journal(run_id) if e.kind == "standing"]
    digest = call_digest(run_id, entry.stream, entry.seq, "pay", {"amount": 2000, "to": "ACME"})
    assert entry.payload == {
        "tool": "pay",
        "args": {"amount": 2000, "to": "ACME"},
        "standing": standing.id,
        "granted_by": "U_ANA",
        "match": {"to": "ACME"},
        "digest": digest,
    }
    # The audit says why the call ran without a person: whose standing approval, which one.
    now = datetime.now()
    (used,) = [
        r
        for r in payroll.store.audit_records(since=now - timedelta(1), until=now + timedelta(1))
        if r.decision == "standing_used"
    ]
    assert (used.decided_by, used.digest, used.details["standing"]) == (
        "U_ANA",
        digest,
        standing.id,
    )
    assert used.approved_args == {"amount": 2000, "to": "ACME"}

    payroll.decide(run_id, "approve")
    payroll.work_here()
    done = payroll.run(run_id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    assert _paid(payroll) == [(1500, "ACME"), (2000, "ACME"), (1200, "GLOBEX")]
    reviewed = payroll.store.list_reviews(run_id=run_id, status=None)
    assert [r.details.args["to"] for r in reviewed] == ["ACME", "GLOBEX"]


def test_with_no_named_arguments_every_later_call_is_approved(payroll: Bench) -> None:
    review_id = _first_review(payroll, "payroll_any")
    _approve_standing(payroll, review_id)
    payroll.work_here()
    run_id = payroll.store.get_review(review_id).run_id
    assert payroll.run(run_id).status == RunStatus.SUCCEEDED
    assert _paid(payroll) == [(1500, "ACME"), (2000, "ACME"), (1200, "GLOBEX")]
    assert len(payroll.store.list_reviews(run_id=run_id, status=None)) == 1

    # Retention deletes the finished run with its standing approvals.
    later = Store.open(payroll.db_url, clock=lambda: utc_now() + timedelta(days=400))
    try:
        deliver(later)  # a run is deleted once Slack was told everything about it
        assert later.prune(RetentionPolicy(Retention(keep_runs=timedelta(days=365))))
        assert later.standing_approvals(run_id) == []
        with pytest.raises(RunNotFound):
            later.get_run(run_id)
    finally:
        later.close()


def test_after_revocation_later_calls_ask_again(payroll: Bench) -> None:
    review_id = _first_review(payroll, "payroll_any")
    run_id = payroll.store.get_review(review_id).run_id
    _approve_standing(payroll, review_id)
    (standing,) = payroll.store.standing_approvals(run_id)
    revoked = payroll.store.revoke_standing(standing.id, by="U_BEN")
    assert revoked.revoked_by == "U_BEN" and revoked.revoked_at is not None
    payroll.work_here()
    assert _paid(payroll) == [(1500, "ACME")]
    assert payroll.pending(run_id).details.args == {"amount": 2000, "to": "ACME"}
    assert payroll.store.standing_for(run_id, "pay", {"to": "ACME"}) is None


def test_a_gate_that_does_not_allow_it_refuses_and_records_nothing(payroll: Bench) -> None:
    review_id = _first_review(payroll, "payroll_strict")
    with pytest.raises(UsageError, match="does not allow approving its later calls"):
        _approve_standing(payroll, review_id)
    run_id = payroll.store.get_review(review_id).run_id
    assert payroll.store.get_review(review_id).decision is None
    assert payroll.store.standing_approvals(run_id) == []


def test_only_an_approval_grants_one(payroll: Bench) -> None:
    review_id = _first_review(payroll, "payroll")
    with pytest.raises(UsageError, match="only the approval"):
        payroll.service.decide(review_id, DecisionKind.REJECT, "no", by="U_ANA", standing=True)
    assert payroll.store.get_review(review_id).decision is None


def test_revocation_racing_is_decided_once(payroll: Bench) -> None:
    review_id = _first_review(payroll, "payroll")
    run_id = payroll.store.get_review(review_id).run_id
    _approve_standing(payroll, review_id)
    (standing,) = payroll.store.standing_approvals(run_id)
    outcomes: list[str] = []
    start = threading.Barrier(4)

    def revoke(by: str) -> None:
        start.wait()
        try:
            payroll.store.revoke_standing(standing.id, by=by)
            outcomes.append(by)
        except AlreadyRevoked as exc:
            outcomes.append(f"refused:{exc.by}")

    threads = [threading.Thread(target=revoke, args=(f"U{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    (winner,) = [o for o in outcomes if not o.startswith("refused")]
    assert sorted(outcomes) == sorted([winner] + [f"refused:{winner}"] * 3)
    (after,) = payroll.store.standing_approvals(run_id)
    assert after.revoked_by == winner


def test_revoking_an_unknown_standing_approval(payroll: Bench) -> None:
    with pytest.raises(StandingNotFound):
        payroll.store.revoke_standing("std_nothing", by="U1")


@pytest.mark.slow
def test_a_replay_keeps_the_journaled_choice_after_a_revocation(payroll: Bench) -> None:
    """The worker dies inside the call the standing approval approved; it is revoked before
    the run resumes, and the replay still makes that call without a review (the journal
    says it was approved), while the next call asks."""
    review_id = _first_review(payroll, "payroll_any")
    run_id = payroll.store.get_review(review_id).run_id
    _approve_standing(payroll, review_id)
    doomed = payroll.spawn(COUNTERSIGN_TEST_HOLD="pay 2000 ACME")
    payroll.kill_when_holding(doomed, "pay 2000 ACME")
    (standing,) = payroll.store.standing_approvals(run_id)
    payroll.store.revoke_standing(standing.id, by="U_BEN")
    payroll.work()  # waits for the dead worker's lease, then replays
    assert _paid(payroll) == [(1500, "ACME"), (2000, "ACME")]
    reviews = payroll.store.list_reviews(run_id=run_id, status=None)
    assert [r.details.args for r in reviews] == [
        {"amount": 1500, "to": "ACME"},
        {"amount": 1200, "to": "GLOBEX"},
    ]


def test_standing_approvals_are_audit_records_that_outlive_their_run(
    payroll: Bench, capsys: pytest.CaptureFixture[str]
) -> None:
    review_id = _first_review(payroll, "payroll_any")
    run_id = payroll.store.get_review(review_id).run_id
    _approve_standing(payroll, review_id)
    payroll.work_here()
    assert payroll.run(run_id).status == RunStatus.SUCCEEDED
    (standing,) = payroll.store.standing_approvals(run_id)
    payroll.service.revoke_standing(standing.id, by="U_BEN")  # a finished run's, too

    cli = Cli(payroll.db_url, payroll.config_path, capsys)
    exported = cli.ok("audit", "export", "--since", "2000-01-01", "--until", "2100-01-01")
    records = [json.loads(line) for line in exported.out.splitlines()]
    said = {"standing": standing.id, "tool": "pay", "match": {}}
    used = [r for r in records if r["decision"] == "standing_used"]
    assert [(r["decided_by"], r["approved_args"], r["details"]["standing"]) for r in used] == [
        ("U_ANA", {"amount": 2000, "to": "ACME"}, standing.id),
        ("U_ANA", {"amount": 1200, "to": "GLOBEX"}, standing.id),
    ]
    assert [
        (r["decision"], r["decided_by"], r["review_id"], r["assigned_to"], r["details"])
        for r in records
        if r not in used
    ] == [
        ("approve", "U_ANA", review_id, None, None),
        ("standing", "U_ANA", review_id, None, said),
        ("standing_revoked", "U_BEN", review_id, None, said),
    ]
    assert {r["crew"] for r in records} == {"payroll_any"}

    # Retention deletes the run; its records stay until keep_audit ends.
    later = Store.open(payroll.db_url, clock=lambda: utc_now() + timedelta(days=400))
    try:
        deliver(later)
        assert later.prune(RetentionPolicy(Retention(keep_runs=timedelta(days=365))))
        kept = later.audit_records(since=datetime(2000, 1, 1), until=datetime(2100, 1, 1))
        assert [(r.decision, r.details) for r in kept if r.decision != "standing_used"] == [
            ("approve", None),
            ("standing", said),
            ("standing_revoked", said),
        ]
        gone = Retention(keep_runs=timedelta(days=365), keep_audit=timedelta(days=365))
        assert later.prune(RetentionPolicy(gone))["payroll_any"] == {
            "audit": 1,
            "review_events": 4,  # granted, revoked, and the two calls it approved
        }
        assert list(later.audit_records(since=datetime(2000, 1, 1), until=utc_now())) == []
    finally:
        later.close()


# --- the command line ----------------------------------------------------------------------


def test_the_cli_grants_shows_and_revokes_a_standing_approval(
    payroll: Bench, capsys: pytest.CaptureFixture[str]
) -> None:
    cli = Cli(payroll.db_url, payroll.config_path, capsys)
    strict = _first_review(payroll, "payroll_strict")
    refused = cli("reviews", "decide", strict, "approve", "--standing", "--by", "U0ANA01")
    assert_refused(refused, "does not allow approving its later calls")
    assert payroll.store.get_review(strict).decision is None

    review_id = _first_review(payroll, "payroll")
    run_id = payroll.store.get_review(review_id).run_id
    out = cli.ok("reviews", "decide", review_id, "approve", "--standing", "--by", "U0ANA01").out
    (standing,) = payroll.store.standing_approvals(run_id)
    assert out.splitlines() == [
        f"{review_id}: approve by U0ANA01; run {run_id} is queued",
        f'{standing.id}: approves later calls of pay with to="ACME"',
    ]
    shown = cli.ok("runs", "show", run_id).out
    assert f'{standing.id}  later calls of pay with to="ACME", by U0ANA01 at ' in shown

    revoked = cli.ok("reviews", "revoke", standing.id, "--by", "U0BEN02").out
    assert revoked == f"{standing.id}: revoked by U0BEN02; pay is reviewed again\n"
    again = cli("reviews", "revoke", standing.id, "--by", "U0ANA01")
    assert_refused(again, f"standing approval {standing.id} was revoked by U0BEN02")
    assert "; revoked by U0BEN02 at " in cli.ok("runs", "show", run_id).out
    assert_refused(cli("reviews", "revoke", "std_nothing", "--by", "U0ANA01"), "std_nothing")
    payroll.work_here()
    assert _paid(payroll) == [(1500, "ACME")]  # revoked: ACME 2000 asks
    assert payroll.pending(run_id).details.args == {"amount": 2000, "to": "ACME"}


# --- the configuration ---------------------------------------------------------------------


def test_a_gate_allows_standing_approvals_with_its_named_arguments(tmp_path: Path) -> None:
    path = tmp_path / "countersign.toml"
    path.write_text(PAYROLL)
    config = load_config(path)
    assert config.get("payroll").standing_match("pay") == ("to",)
    assert config.get("payroll_any").standing_match("pay") == ()
    assert config.get("payroll_strict").standing_match("pay") is None


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        (
            "approvals_required = 2\nallow_standing = true",
            "crews.deal.gates.pay.allow_standing: a call of pay needs 2 approvals, so one "
            "reviewer cannot approve its later calls: allow_standing needs "
            "approvals_required = 1",
        ),
        (
            'allow_standing = "yes"',
            'crews.deal.gates.pay.allow_standing: expected true or false, got "yes"',
        ),
        (
            'standing_match = ["to"]',
            "crews.deal.gates.pay.standing_match: needs allow_standing = true beside it",
        ),
        (
            'allow_standing = true\nstanding_match = ["the to"]',
            "crews.deal.gates.pay.standing_match[0]: expected an argument name of the tool, "
            'like "to", got "the to"',
        ),
        (
            'allow_standing = true\nstanding_match = "to"',
            'crews.deal.gates.pay.standing_match: expected a list like [...], got "to"',
        ),
    ],
)
def test_bad_standing_settings_are_refused(tmp_path: Path, table: str, expected: str) -> None:
    path = tmp_path / "countersign.toml"
    path.write_text(f'[crews.deal]\nfactory = "a:b"\n[crews.deal.gates.pay]\n{table}\n')
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value) == f"{path}: {expected}"


def test_the_crews_quorum_applies_to_a_gate_that_sets_none(tmp_path: Path) -> None:
    path = tmp_path / "countersign.toml"
    path.write_text(
        '[crews.deal]\nfactory = "a:b"\napprovals_required = 2\n'
        "[crews.deal.gates.pay]\nallow_standing = true\n"
    )
    with pytest.raises(ConfigError, match="a call of pay needs 2 approvals"):
        load_config(path)


def test_the_readme_example_is_valid_and_means_what_it_says(tmp_path: Path) -> None:
    (example,) = docs.blocks(docs.section("docs/guide/gates.md", "Approve all such calls"), "toml")
    path = tmp_path / "countersign.toml"
    path.write_text('[crews.payroll]\nfactory = "a:b"\n' + example)
    assert load_config(path).get("payroll").standing_match("pay") == ("to",)
