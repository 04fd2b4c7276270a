"""Retention and the audit trail on real SQLite and PostgreSQL: what a prune deletes, what it
never touches, and the decisions an audit export still lists once their run is gone."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest

from storage import (
    DecisionKind,
    NewDecision,
    NewReview,
    ReviewKind,
    RunNotFound,
    RunStatus,
    Store,
)
from storage.audit import AuditRecord
from storage.details import TaskReviewDetails
from storage.retention import Retention, RetentionPolicy
from tests.support.runs import (
    APPROVED,
    LEASE,
    PROPOSED,
    deliver,
    finished_run,
    tell_slack,
    waiting_run,
)
from tests.support.timing import FakeClock

DAY = timedelta(days=1)
YEAR = Retention(keep_runs=timedelta(days=365))


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(db_url: str, clock: FakeClock) -> Iterator[Store]:
    opened = Store.open(db_url, clock=clock)
    yield opened
    opened.close()


def export(store: Store, clock: FakeClock) -> list[AuditRecord]:
    return list(store.audit_records(since=datetime(2000, 1, 1), until=clock.now + DAY))


def test_a_dry_run_reports_and_changes_nothing(store: Store, clock: FakeClock) -> None:
    old = finished_run(store)
    clock.advance(days=400)
    before = export(store, clock)

    pruned = store.prune(RetentionPolicy(YEAR), dry_run=True)

    counts = pruned.pop("outreach")
    assert pruned == {}
    assert {t: counts[t] for t in ("runs", "reviews", "decisions", "journal")} == dict.fromkeys(
        ("runs", "reviews", "decisions", "journal"), 1
    )
    assert counts["outbox"] >= 3  # the run started, its review opened, decided, the run ended
    assert store.get_run(old).status == RunStatus.SUCCEEDED
    assert len(store.load_journal(old)) == 1
    assert export(store, clock) == before
    assert store.prune(RetentionPolicy(YEAR), dry_run=True) == {"outreach": counts}


def test_only_old_finished_runs_are_pruned_and_their_audit_survives(
    store: Store, clock: FakeClock
) -> None:
    old = finished_run(store)
    old_waiting, old_review = waiting_run(store)
    clock.advance(days=400)
    recent = finished_run(store)

    pruned = store.prune(RetentionPolicy(YEAR), batch=1)

    assert pruned["outreach"]["runs"] == 1
    with pytest.raises(RunNotFound):
        store.get_run(old)
    assert store.get_run(old_waiting).status == RunStatus.WAITING
    assert [r.id for r in store.list_reviews(run_id=old_waiting)] == [old_review]
    assert store.get_run(recent).status == RunStatus.SUCCEEDED
    records = export(store, clock)
    assert [r.run_id for r in records] == [old, recent]
    first = records[0]
    assert (first.crew, first.review_kind, first.decision, first.decided_by) == (
        "outreach",
        "tool_approval",
        "edit",
        "U0ANA",
    )
    assert (first.proposed_args, first.approved_args, first.executed_args) == (
        PROPOSED,
        APPROVED,
        APPROVED,
    )
    assert (first.channel, first.feedback) == ("C0REVIEWS", None)
    assert records[0] == export(store, clock)[0], "a pruned run's record reads the same again"
    assert store.prune(RetentionPolicy(YEAR)) == {}


def test_a_run_is_pruned_only_once_slack_was_told_it_ended(store: Store, clock: FakeClock) -> None:
    run_id = finished_run(store, delivered=False)
    clock.advance(days=400)

    assert store.prune(RetentionPolicy(YEAR)) == {}
    assert store.get_run(run_id).status == RunStatus.SUCCEEDED
    deliver(store)
    assert store.prune(RetentionPolicy(YEAR))["outreach"]["runs"] == 1


def test_a_run_is_pruned_only_once_its_webhooks_were_told(store: Store, clock: FakeClock) -> None:
    run_id = finished_run(store, delivered=False)
    tell_slack(store)  # a webhook was not told
    clock.advance(days=400)

    assert store.prune(RetentionPolicy(YEAR)) == {}
    store.close_unwatched_events(())
    pruned = store.prune(RetentionPolicy(YEAR))["outreach"]
    assert (pruned["runs"], pruned["webhook_events"]) == (1, 3)  # waiting, decided, finished
    assert store.list_webhook_events(run_id=run_id) == []


def test_a_pruned_journal_keeps_the_run_and_what_the_tool_was_called_with(
    store: Store, clock: FakeClock
) -> None:
    run_id = finished_run(store)
    live = export(store, clock)
    clock.advance(days=40)

    pruned = store.prune(RetentionPolicy(Retention(keep_journal=timedelta(days=30))))

    assert pruned == {"outreach": {"journal": 1}}
    assert store.load_journal(run_id) == []
    assert store.get_run(run_id).status == RunStatus.SUCCEEDED
    assert export(store, clock) == live


def test_audit_records_are_pruned_after_their_own_time(store: Store, clock: FakeClock) -> None:
    finished_run(store)
    clock.advance(days=400)
    kept = finished_run(store)
    clock.advance(days=2)
    policy = RetentionPolicy(Retention(keep_runs=DAY, keep_audit=timedelta(days=365)))

    pruned = store.prune(policy)

    assert pruned["outreach"]["runs"] == 2
    assert [r.run_id for r in export(store, clock)] == [kept]
    clock.advance(days=400)
    assert store.prune(policy) == {"outreach": {"audit": 1}}
    assert export(store, clock) == []


def test_a_crews_own_retention_and_the_export_filters(store: Store, clock: FakeClock) -> None:
    blog = finished_run(store, "blog")
    news = finished_run(store, "news")
    clock.advance(hours=13)
    policy = RetentionPolicy(Retention(), {"blog": Retention(keep_runs=timedelta(hours=12))})

    assert set(store.prune(policy)) == {"blog"}

    assert store.get_run(news).crew == "news"
    since, until = datetime(2000, 1, 1), clock.now
    assert [r.run_id for r in store.audit_records(since=since, until=until, crew="blog")] == [blog]
    assert [r.run_id for r in store.audit_records(since=since, until=until, crew="news")] == [news]
    assert list(store.audit_records(since=clock.now, until=clock.now + DAY)) == []


def test_one_persons_pending_reviews_by_crew_and_channel(store: Store, clock: FakeClock) -> None:
    """pending_reviews: oldest first, only the places asked, the total beyond the limit."""
    made = {}
    for crew, channel in (("blog", "C1"), ("blog", "C2"), ("news", "C1"), ("blog", "C1")):
        run = store.create_run(crew, {}, channel=channel)
        claimed = store.claim_run("w1", LEASE)
        assert claimed is not None and claimed.id == run.id and claimed.lease_token
        ask = NewReview(kind=ReviewKind.TASK_REVIEW, stream="task0:Writer", seq=0, prompt="draft")
        [review] = store.suspend_run(run.id, claimed.lease_token, [ask])
        made[review.id] = (crew, channel)
        clock.advance(minutes=1)
    first_id, second_id, _news, decided = list(made)
    store.decide(decided, NewDecision(DecisionKind.APPROVE, "U0ANA"))

    blog = store.pending_reviews({"blog": None})
    assert [r.id for r in blog.reviews] == [first_id, second_id]
    assert blog.total == 2 and {r.crew for r in blog.runs.values()} == {"blog"}
    first = store.pending_reviews({"blog": None, "news": {"C1"}}, limit=1)
    assert ([r.id for r in first.reviews], first.total) == ([first_id], 3)
    in_c1 = store.pending_reviews({"blog": {"C1"}, "news": {"C2"}})
    assert [r.id for r in in_c1.reviews] == [first_id]
    assert store.pending_reviews({}).total == 0
    assert store.pending_channels(["blog", "news"]) == {
        ("blog", "C1"),
        ("blog", "C2"),
        ("news", "C1"),
    }


def test_an_edited_draft_keeps_what_the_edit_changed_and_its_progress_goes_with_the_run(
    store: Store, clock: FakeClock
) -> None:
    run = store.create_run("blog", {"topic": "otters"}, channel="C0REVIEWS")
    claimed = store.claim_run("w1", LEASE)
    assert claimed is not None and claimed.lease_token
    store.save_progress(run.id, claimed.lease_token, {"tasks": [], "tools": 3})
    draft = "Otters hold hands while they sleep."
    ask = NewReview(
        kind=ReviewKind.TASK_REVIEW,
        stream="task0:Writer",
        seq=0,
        prompt=draft,
        details=TaskReviewDetails(task="outline"),
    )
    [review] = store.suspend_run(run.id, claimed.lease_token, [ask])
    edited = "Sea otters hold hands while they sleep, so as not to drift apart."
    store.decide(review.id, NewDecision(DecisionKind.EDIT, "U0ANA", text=edited))
    again = store.claim_run("w1", LEASE)
    assert again is not None and again.lease_token
    store.finish_run(run.id, again.lease_token, RunStatus.SUCCEEDED, output=edited)
    deliver(store)
    diff = (
        "[-Otters-]{+Sea otters+} hold hands while they "
        "[-sleep.-]{+sleep, so as not to drift apart.+}"
    )
    (live,) = export(store, clock)
    assert (live.decision, live.feedback, live.edit_diff) == ("edit", edited, diff)

    clock.advance(days=400)
    assert store.prune(RetentionPolicy(YEAR))["blog"]["runs"] == 1
    assert export(store, clock) == [live]  # kept whole, the diff with it
    assert store.load_progress(run.id) is None
