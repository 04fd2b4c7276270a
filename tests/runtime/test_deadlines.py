"""Deadlines per gate and per task (``expire_after``, ``on_expire``, reminders, escalation,
``remind_by``):
the configuration's rules (their errors are tested in tests/storage/test_quorum.py), storage's sweep
on SQLite and PostgreSQL (two sweeps racing), runs through the CLI with the real CrewAI loop
on the scripted model, and one through Slack (the stand-in)."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from bot.slack import text
from crew_runtime.config import CrewSpec, load_config
from storage import (
    APPROVED_BY,
    DEADLINE,
    AlreadyDecided,
    DecisionKind,
    NewDecision,
    NewReview,
    OnExpire,
    OutboxKind,
    QuestionDetails,
    ReviewKind,
    ReviewStatus,
    RunStatus,
    Store,
    ToolApprovalDetails,
    utc_now,
)
from storage.schema import decisions
from tests.support import docs
from tests.support.cli import Cli
from tests.support.crews import effects
from tests.support.slack_harness import (
    ALICE,
    BOB,
    CHANNEL,
    MALLORY,
    NUDGED,
    buttons,
    run_in_slack,
    text_of,
    wait_until,
)
from tests.support.timing import FakeClock

Json = dict[str, Any]

LEASE = timedelta(seconds=30)


def _suspend(store: Store, ask: NewReview, crew: str = "payout") -> tuple[str, str]:
    run = store.create_run(crew, {})
    claim = store.claim_run("w1", LEASE)
    assert claim is not None and claim.id == run.id and claim.lease_token
    (review,) = store.suspend_run(run.id, claim.lease_token, [ask])
    return run.id, review.id


def _gated_call(expires_at: datetime, on_expire: OnExpire) -> NewReview:
    return NewReview(
        kind=ReviewKind.TOOL_APPROVAL,
        stream="task0:Clerk",
        seq=0,
        prompt="pay(...)",
        details=ToolApprovalDetails(tool="pay", args={"amount": 1500, "to": "ACME"}),
        expires_at=expires_at,
        on_expire=on_expire,
    )


# --- storage ---------------------------------------------------------------------------------


def test_a_deadline_that_approves_decides_as_the_deadline_and_queues_the_run(
    db_url: str,
) -> None:
    clock = FakeClock()
    store = Store.open(db_url, clock=clock)
    due = clock.now + timedelta(minutes=10)
    run_id, review_id = _suspend(store, _gated_call(due, OnExpire.APPROVE))
    other_run, rejected_id = _suspend(store, _gated_call(due, OnExpire.REJECT))
    assert store.sweep_reviews() == {"reminded": 0, "escalated": 0, "expired": 0}
    clock.advance(minutes=11)
    assert store.sweep_reviews() == {"reminded": 0, "escalated": 0, "expired": 2}

    approved = store.get_review(review_id)
    assert approved.status == ReviewStatus.DECIDED and approved.decision is not None
    assert approved.decision.kind == DecisionKind.APPROVE
    assert approved.decision.decided_by == DEADLINE
    assert store.get_run(run_id).status == RunStatus.QUEUED
    expired = store.get_review(rejected_id).decision
    assert expired is not None and expired.kind == DecisionKind.EXPIRE
    assert expired.decided_by == "countersign"
    decided = [m.review_id for m in store.due_outbox() if m.kind == OutboxKind.REVIEW_DECIDED]
    assert sorted(decided) == sorted([review_id, rejected_id])

    # The audit trail says the deadline approved it, not a person.
    (record,) = (
        r
        for r in store.audit_records(since=datetime(2000, 1, 1), until=datetime(3000, 1, 1))
        if r.review_id == review_id
    )
    assert (record.decision, record.decided_by) == ("approve", DEADLINE)
    assert record.approved_args == {"amount": 1500, "to": "ACME"}
    assert store.get_run(other_run).status == RunStatus.QUEUED
    store.close()


def test_a_deadline_approves_a_review_short_of_its_quorum_naming_who_had_approved(
    db_url: str,
) -> None:
    clock = FakeClock()
    store = Store.open(db_url, clock=clock)
    _, review_id = _suspend(store, _gated_call(clock.now + timedelta(minutes=1), OnExpire.APPROVE))
    store.decide(review_id, NewDecision(DecisionKind.APPROVE, "U0ANA"), approvals_required=2)
    clock.advance(minutes=2)
    assert store.sweep_reviews()["expired"] == 1
    decision = store.get_review(review_id).decision
    assert decision is not None and decision.decided_by == DEADLINE
    assert decision.details[APPROVED_BY] == ["U0ANA"]
    store.close()


def test_a_question_cannot_be_approved_so_its_deadline_expires_it(db_url: str) -> None:
    clock = FakeClock()
    store = Store.open(db_url, clock=clock)
    ask = NewReview(
        kind=ReviewKind.QUESTION,
        stream="task0:Researcher",
        seq=0,
        prompt="Which tone?",
        details=QuestionDetails(),
        expires_at=clock.now + timedelta(minutes=1),
        on_expire=OnExpire.APPROVE,
    )
    _, review_id = _suspend(store, ask, crew="research")
    clock.advance(minutes=2)
    store.sweep_reviews()
    decision = store.get_review(review_id).decision
    assert decision is not None and decision.kind == DecisionKind.EXPIRE
    store.close()


def test_two_replicas_sweeping_at_once_approve_each_review_once(db_url: str) -> None:
    clock = FakeClock()
    stores = [Store.open(db_url, clock=clock), Store.open(db_url, clock=clock, upgrade=False)]
    count = 8
    ids = [
        _suspend(stores[0], _gated_call(clock.now + timedelta(minutes=1), OnExpire.APPROVE))[1]
        for _ in range(count)
    ]
    clock.advance(minutes=2)
    start = threading.Barrier(4)
    counts: list[int] = []

    def sweep(store: Store) -> None:
        start.wait(30)
        counts.append(store.sweep_reviews()["expired"])

    threads = [threading.Thread(target=sweep, args=(s,)) for s in stores * 2]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sum(counts) == count
    with stores[0].engine.connect() as conn:
        made = conn.execute(select(decisions.c.review_id, decisions.c.decided_by)).all()
    assert sorted(made) == sorted((review_id, DEADLINE) for review_id in ids)
    announced = [m.review_id for m in stores[0].due_outbox() if m.kind == OutboxKind.REVIEW_DECIDED]
    assert sorted(announced) == sorted(ids)
    for store in stores:
        store.close()


# --- the configuration -----------------------------------------------------------------------

RULES = """
[crews.deal]
factory = "tests.support.crews:writer"
remind_after = "30m"
escalate_after = "2h"
expire_after = "1d"

[crews.deal.gates.send_email]
expire_after = "4h"
on_expire = "approve"

[crews.deal.gates.pay]
on_expire = "keep_waiting"
remind_after = "5m"
remind_by = "dm"

[crews.deal.tasks.2]
approvals_required = 1
escalate_after = "1h"
"""


def _load(tmp_path: Path, text: str, name: str = "deal") -> CrewSpec:
    path = tmp_path / "countersign.toml"
    path.write_text(text)
    return load_config(path).get(name)


def _hours(due: timedelta | None) -> float | None:
    return None if due is None else due.total_seconds() / 3600


def test_the_most_specific_deadline_wins_key_by_key(tmp_path: Path) -> None:
    spec = _load(tmp_path, RULES)
    email = spec.deadlines_for(tool="send_email")
    assert (_hours(email.remind_after), _hours(email.escalate_after)) == (0.5, 2)
    assert (_hours(email.expire_after), email.on_expire) == (4, OnExpire.APPROVE)
    pay = spec.deadlines_for(tool="pay")
    assert _hours(pay.remind_after) == 5 / 60
    assert (pay.expire_after, pay.on_expire) == (None, OnExpire.KEEP_WAITING)
    assert (pay.remind_by, email.remind_by) == ("dm", "thread")
    second = spec.deadlines_for(task=2)
    assert (_hours(second.escalate_after), _hours(second.expire_after)) == (1, 24)
    assert second.on_expire == OnExpire.REJECT
    first = spec.deadlines_for(tool="search", task=1)
    assert (_hours(first.remind_after), _hours(first.expire_after)) == (0.5, 24)
    # A table that sets only deadlines leaves the quorum to the crew.
    assert spec.approvals_for(tool="send_email") == 1 and "send_email" not in spec.gates


def test_a_gates_own_deadline_counts_where_the_crew_keeps_waiting(tmp_path: Path) -> None:
    spec = _load(
        tmp_path,
        '[crews.deal]\nfactory = "a:b"\non_expire = "keep_waiting"\n'
        '[crews.deal.gates.pay]\nexpire_after = "1h"\n',
    )
    assert spec.deadlines_for(task=1).expire_after is None
    pay = spec.deadlines_for(tool="pay")
    assert (_hours(pay.expire_after), pay.on_expire) == (1, OnExpire.REJECT)


def test_the_readme_example_of_the_deadlines_is_valid_and_means_what_it_says(
    tmp_path: Path,
) -> None:
    section = docs.section("docs/guide/deadlines.md", "Deadlines per gate and per task")
    (example,) = docs.blocks(section, "toml")
    spec = _load(tmp_path, example, "outreach")
    assert _hours(spec.deadlines_for(task=1).expire_after) == 24
    email = spec.deadlines_for(tool="send_email")
    assert (_hours(email.expire_after), email.on_expire) == (4, OnExpire.APPROVE)
    assert spec.deadlines_for(tool="search").on_expire == OnExpire.REJECT
    review = spec.deadlines_for(task=2)
    assert (review.expire_after, review.on_expire) == (None, OnExpire.KEEP_WAITING)
    assert (review.remind_by, email.remind_by) == ("dm", "thread")


# --- runs through the CLI, on the real CrewAI loop -------------------------------------------

GATED = """
[crews.payout]
factory = "tests.support.crews:payments"
expire_after = "1d"

[crews.payout.gates.pay]
remind_after = "10m"
expire_after = "1h"
on_expire = "approve"

[crews.deal]
factory = "tests.support.crews:writer"
expire_after = "1h"

[crews.deal.tasks.1]
on_expire = "keep_waiting"
escalate_after = "2h"
"""


@pytest.fixture
def cli(db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Cli:
    config = tmp_path / "countersign.toml"
    config.write_text(GATED)
    return Cli(db_url, config, capsys)


def _later(db_url: str, hours: float) -> Store:
    """The store as a sweep sees it ``hours`` from now."""
    ahead = timedelta(hours=hours)
    return Store.open(db_url, clock=lambda: utc_now() + ahead, upgrade=False)


def test_a_gated_call_approved_by_its_deadline_runs_and_the_run_succeeds(
    cli: Cli, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    effects_file = tmp_path / "effects.jsonl"
    monkeypatch.setenv("COUNTERSIGN_TEST_EFFECTS", str(effects_file))
    run_id = cli.ok("runs", "start", "payout", "amount=1500").out.strip()
    cli.worker()
    (call,) = cli.ok("reviews", "list", "--json").json()
    store = Store.open(db_url, upgrade=False)
    review = store.get_review(call["id"])
    store.close()
    assert review.expires_at is not None and review.remind_at is not None
    # The gate's own deadlines, not the crew's day.
    assert review.expires_at - review.remind_at == timedelta(minutes=50)
    assert review.escalate_at is None

    later = _later(db_url, 2)
    assert later.sweep_reviews() == {"reminded": 1, "escalated": 0, "expired": 1}
    later.close()
    cli.worker()
    shown = cli.ok("runs", "show", run_id, "--json").json()
    assert shown["status"] == "succeeded"
    assert shown["reviews"][0]["decision"]["kind"] == "approve"
    assert shown["reviews"][0]["decision"]["by"] == DEADLINE
    assert [e["amount"] for e in effects(effects_file) if e["kind"] == "paid"] == [1500]


def test_a_task_that_keeps_waiting_is_never_expired_but_the_next_one_is(
    cli: Cli, db_url: str
) -> None:
    run_id = cli.ok("runs", "start", "deal", "topic=otters").out.strip()
    cli.worker()
    (outline,) = cli.ok("reviews", "list", "--json").json()
    later = _later(db_url, 30)
    assert later.sweep_reviews() == {"reminded": 0, "escalated": 1, "expired": 0}
    assert later.get_review(outline["id"]).status == ReviewStatus.PENDING
    later.close()

    cli.ok("reviews", "decide", outline["id"], "approve", "--by", "alice")
    cli.worker()
    (article,) = cli.ok("reviews", "list", "--json").json()
    later = _later(db_url, 2)
    assert later.sweep_reviews()["expired"] == 1
    later.close()
    cli.worker()
    shown = cli.ok("runs", "show", run_id, "--json").json()
    assert shown["status"] == "rejected"
    assert shown["reviews"][1]["decision"]["kind"] == "expire"
    assert article["id"] == shown["reviews"][1]["id"]


def test_who_clicks_after_the_deadline_approved_is_told_so() -> None:
    at = datetime(2026, 1, 2, 3, 4, 5)
    late = AlreadyDecided("rev_1", "decided", by=DEADLINE, kind="approve", at=at)
    assert text.too_late(late) == (
        "This review was already approved by its deadline at "
        "<!date^1767323045^{date_short_pretty} {time}|2026-01-02 03:04 UTC>: "
        "nobody answered in time."
    )


# --- through Slack (the stand-in) -------------------------------------------------------------


SLACK_CONFIG = f"""
[crews.payments]
factory = "tests.support.crews:payments"
reviewers = ["{ALICE}"]
expire_after = "1d"

[crews.payments.gates.pay]
expire_after = "1s"
on_expire = "approve"
"""


@pytest.mark.slow
def test_a_deadline_approves_a_gated_call_in_slack_and_the_thread_says_so(
    tmp_path: Path, db_url: str
) -> None:
    command = "run payments amount=1500"
    with run_in_slack(tmp_path, db_url, SLACK_CONFIG, command, {}) as (slack, store, root):
        run = wait_until(
            lambda: next((r for r in store.list_runs() if r.status == RunStatus.SUCCEEDED), None),
            what="the run to succeed once the deadline approved its payment",
        )
        (review,) = store.list_reviews(status=None, run_id=run.id)
        assert review.decision is not None and review.decision.decided_by == DEADLINE

        def approved_by_deadline() -> Json | None:
            thread = slack.thread(CHANNEL, root["ts"])
            return next(
                (m for m in thread if "Approved by its deadline" in text_of(m) and not buttons(m)),
                None,
            )

        shown = wait_until(approved_by_deadline, what="the review marked approved by its deadline")
        assert "nobody answered in time" in text_of(shown)


@pytest.mark.slow
def test_reminders_and_escalations_go_as_dms_to_each_person_once(
    tmp_path: Path, db_url: str
) -> None:
    groups = {"S0PAYERS": [ALICE, BOB]}
    command = "run nudged amount=1500"
    with run_in_slack(tmp_path, db_url, NUDGED, command, groups) as (slack, store, root):
        escalated = wait_until(
            lambda: slack.direct_messages(MALLORY), what="the escalation in Mallory's DM"
        )
        reminded = {person: slack.direct_messages(person) for person in (ALICE, BOB)}
        (review,) = store.list_reviews()
        assert review.remind_at is None and review.escalate_at is None  # both were sent
        # Nothing was said in the thread: the people were told where they read.
        assert not [m for m in slack.thread(CHANNEL, root["ts"]) if "⏰" in text_of(m)]
    (escalation,) = escalated
    assert text_of(escalation).startswith("🚨 A tool approval of a `nudged` run has waited")
    assert f"thread_ts={root['ts']}" in text_of(escalation)  # a link to the review
    for person, said in reminded.items():
        assert [text_of(m).split(" <")[0] for m in said] == [
            "⏰ A tool approval of a `nudged` run is still waiting for your decision."
        ], person
