"""Delegation while away: storage's delegations on SQLite and PostgreSQL (refusals, expiry by
the clock, early return, racing writers), and the CLI's ``reviewers away`` / ``back``."""

from __future__ import annotations

import shlex
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from crew_runtime.config import load_config
from crew_runtime.reviewers import covered, still_expected
from storage import DelegationRefused, Store
from storage.delegations import resolve
from storage.retention import NO_CREW, Retention, RetentionPolicy
from tests.support import docs
from tests.support.cli import Cli, assert_refused, cli
from tests.support.runs import approve as _approve
from tests.support.runs import waiting_review
from tests.support.timing import FakeClock, at_once

__all__ = ["cli"]  # the fixture, used by name

LATER = datetime(2026, 1, 10)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def timed(db_url: str, clock: FakeClock) -> Iterator[Store]:
    """A store whose time the test moves."""
    opened = Store.open(db_url, clock=clock)
    yield opened
    opened.close()


def test_an_away_persons_reviews_go_to_their_delegate_until_the_time_runs_out(
    timed: Store, clock: FakeClock
) -> None:
    made = timed.away("UANA", "UBEN", LATER, by="UANA")
    assert (made.person, made.delegate, made.until, made.created_by) == (
        "UANA",
        "UBEN",
        LATER,
        "UANA",
    )
    assert timed.delegates() == {"UANA": "UBEN"}
    clock.now = LATER  # the query compares the time: nothing ends it but the clock
    assert timed.delegates() == {}
    assert timed.active_delegations() == []
    assert timed.back("UANA", by="UANA") is None  # ran out already: nothing to end


def test_back_ends_it_early_once_and_a_new_absence_replaces_the_old(
    timed: Store, clock: FakeClock
) -> None:
    timed.away("UANA", "UBEN", LATER, by="UANA")
    timed.away("UANA", "UCAT", LATER, by="UANA")
    assert timed.delegates() == {"UANA": "UCAT"}
    clock.advance(hours=1)
    ended = timed.back("UANA", by="UADMIN")
    assert ended is not None and (ended.delegate, ended.ended_by) == ("UCAT", "UADMIN")
    assert ended.ended_at == clock.now
    assert timed.back("UANA", by="UANA") is None
    assert timed.delegates() == {}


def test_delegations_are_audit_records_of_no_crew_until_keep_audit_ends(
    timed: Store, clock: FakeClock
) -> None:
    start = clock.now
    timed.away("UANA", "UBEN", LATER, by="UANA")
    timed.away("UANA", "UCAT", LATER, by="UADMIN")  # replaces the first: it ends now
    clock.advance(hours=1)
    timed.back("UANA", by="UCAT")
    until = clock.now + timedelta(days=1000)
    timed.away("UDAN", "UEVE", until, by="UDAN")  # still in force when retention runs

    def trail(crew: str | None = None) -> list[tuple[str, str, str | None, str]]:
        records = timed.audit_records(since=start, until=until, crew=crew)
        return [
            (r.decision, r.decided_by, r.assigned_to, (r.details or {}).get("person", ""))
            for r in records
            if r.run_id == "" and r.crew == ""
        ]

    assert trail() == [
        ("away", "UANA", "UBEN", "UANA"),
        ("back", "UADMIN", "UBEN", "UANA"),
        ("away", "UADMIN", "UCAT", "UANA"),
        ("back", "UCAT", "UCAT", "UANA"),
        ("away", "UDAN", "UEVE", "UDAN"),
    ]
    (first, *_) = timed.audit_records(since=start, until=until)
    assert first.details == {"person": "UANA", "delegate": "UBEN", "until": "2026-01-10T00:00:00Z"}
    assert trail(crew="outreach") == []  # a delegation belongs to no crew

    clock.advance(days=400)
    keep_audit = RetentionPolicy(Retention(keep_audit=timedelta(days=365)))
    assert timed.prune(keep_audit, dry_run=True) == {NO_CREW: {"delegations": 2}}
    assert len(trail()) == 5  # a dry run deletes nothing
    one_crews = RetentionPolicy(crews={"outreach": Retention(keep_audit=timedelta(days=1))})
    assert timed.prune(one_crews) == {}  # a crew's keep_audit is not the deployment's
    timed.prune(keep_audit)
    assert trail() == [("away", "UDAN", "UEVE", "UDAN")]
    assert timed.delegates() == {"UDAN": "UEVE"}


def test_a_past_date_oneself_and_a_circle_are_refused_and_change_nothing(timed: Store) -> None:
    with pytest.raises(DelegationRefused, match="already past"):
        timed.away("UANA", "UBEN", datetime(2025, 12, 31), by="UANA")
    with pytest.raises(DelegationRefused, match="oneself"):
        timed.away("UANA", "UANA", LATER, by="UANA")
    timed.away("UANA", "UBEN", LATER, by="UANA")
    timed.away("UBEN", "UCAT", LATER, by="UBEN")
    with pytest.raises(DelegationRefused, match=r"circle \(UCAT → UANA → UBEN → UCAT\)"):
        timed.away("UCAT", "UANA", LATER, by="UCAT")
    # A chain that leads elsewhere is fine, and is followed to its end.
    assert timed.delegates() == {"UANA": "UCAT", "UBEN": "UCAT"}


def test_two_people_delegating_to_each_other_at_once_make_no_circle(db_url: str) -> None:
    """Writers take turns: one of A → B and B → A wins, the other is refused."""
    stores = [Store.open(db_url), Store.open(db_url)]
    try:
        for attempt in range(5):
            assert sorted(_crossing(stores, f"UA{attempt}", f"UB{attempt}")) == [
                "made",
                "refused",
            ]
            assert len(stores[0].active_delegations()) == attempt + 1
    finally:
        for store in stores:
            store.close()


def _crossing(stores: list[Store], a: str, b: str) -> list[str]:
    """``a`` away to ``b`` and ``b`` away to ``a`` at once: what became of each."""
    outcomes: list[str] = []
    barrier = threading.Barrier(2)

    def delegate(n: int) -> None:
        person, other = (a, b) if n == 0 else (b, a)
        barrier.wait()
        try:
            stores[n].away(person, other, datetime(2099, 1, 1), by=person)
            outcomes.append("made")
        except DelegationRefused:
            outcomes.append("refused")

    at_once(delegate, 2)
    return outcomes


def test_the_same_person_going_away_twice_at_once_keeps_one_delegation(db_url: str) -> None:
    stores = [Store.open(db_url) for _ in range(4)]
    try:
        barrier = threading.Barrier(4)

        def delegate(n: int) -> None:
            barrier.wait()
            stores[n].away("UANA", f"UD{n}", datetime(2099, 1, 1), by="UANA")

        at_once(delegate, 4)
        (only,) = stores[0].active_delegations()
        assert only.person == "UANA" and only.delegate.startswith("UD")
    finally:
        for store in stores:
            store.close()


def test_mentions_go_to_the_final_delegate_each_once() -> None:
    delegates = resolve({"UANA": "UBEN", "UBEN": "UCAT", "UDAN": "UCAT"})
    assert delegates == {"UANA": "UCAT", "UBEN": "UCAT", "UDAN": "UCAT"}
    assert covered(("UANA", "S_TEAM", "UBEN", "UEVE"), delegates) == ("UCAT", "S_TEAM", "UEVE")


# --- the command line ---------------------------------------------------------------------

README_AWAY = "countersign reviewers away U0ANA --until 2026-12-24 --to U0BEN"
README_BACK = "countersign reviewers back U0ANA"
README_LIST = "countersign reviewers list"


def _argv(line: str, until: str | None = None) -> list[str]:
    """A README line as arguments of ``main``; its date moved to ``until`` so that the test
    does not depend on today's date."""
    argv = shlex.split(line)[1:]
    if until is not None:
        argv[argv.index("--until") + 1] = until
    return argv


def test_the_readme_commands_hand_reviews_over_and_back(cli: Cli) -> None:
    documented = docs.section_commands("docs/guide/reviews.md", "Away: a delegate reviews")
    for line in (README_AWAY, README_BACK, README_LIST):
        assert line in documented
    day = (datetime.now(UTC) + timedelta(days=30)).date()
    made = cli.ok(*_argv(README_AWAY, day.isoformat())).out
    end = f"{day + timedelta(days=1)}T00:00:00Z"
    assert made == f"U0ANA is away until {end}: reviews go to U0BEN\n"
    assert cli.ok(*_argv(README_LIST)).out == f"U0ANA away until {end}: reviews go to U0BEN\n"
    (listed,) = cli.ok(*_argv(README_LIST), "--json").json()
    assert listed["person"] == "U0ANA" and listed["by"] == "U0ANA" and listed["until"] == end
    assert cli.ok(*_argv(README_BACK)).out == "U0ANA is back: reviews no longer go to U0BEN\n"
    assert cli.ok(*_argv(README_BACK)).out == "U0ANA was not away\n"
    assert cli.ok(*_argv(README_LIST)).out == "nobody is away\n"


def test_the_command_line_refuses_what_cannot_be(cli: Cli) -> None:
    away = ("reviewers", "away", "U0ANA")
    assert_refused(cli(*away, "--until", "2020-01-01", "--to", "U0BEN"), "already past")
    assert_refused(cli(*away, "--until", "2099-01-01", "--to", "U0ANA"), "to oneself")
    assert_refused(cli(*away, "--until", "next week", "--to", "U0BEN"), "is not a date")
    cli.ok(*away, "--until", "2099-01-01", "--to", "U0BEN")
    assert_refused(
        cli("reviewers", "away", "U0BEN", "--until", "2099-01-01", "--to", "U0ANA"),
        "circle (U0BEN → U0ANA → U0BEN)",
    )
    assert cli.ok("reviewers", "list", "--json").json()[0]["delegate"] == "U0BEN"


def test_a_delegate_decides_and_counts_as_themselves_in_a_quorum(cli: Cli) -> None:
    """The command line names who decides (``--by``) without asking Slack who reviews: a
    delegate decides there as anyone does, and their approval counts once, as theirs."""
    cli.ok("reviewers", "away", "alice", "--until", "2099-01-01", "--to", "bob")
    cli.ok("runs", "start", "deal", "topic=otters", "--by", "carol")
    cli.worker()
    (outline,) = cli.ok("reviews", "list", "--json").json()
    decide = ("reviews", "decide", outline["id"], "approve")
    assert "approval counted, 1 of 2 (bob)" in cli.ok(*decide, "--by", "bob").out
    assert_refused(cli(*decide, "--by", "bob"), "bob approved it already")


def test_an_away_reviewers_delegate_who_approved_is_not_expected_again(
    tmp_path: Path, timed: Store
) -> None:
    """Ben is away to Ana: once Ana approved, the review waits for Cat alone (Ana counts
    once, whether for herself or for Ben)."""
    config = tmp_path / "countersign.toml"
    config.write_text(
        '[crews.deal]\nfactory = "tests.support.crews:writer"\n'
        'reviewers = ["UANA", "UBEN", "UCAT"]\napprovals_required = 2\n'
    )
    spec = load_config(config).get("deal")
    run_id, review_id = waiting_review(timed)
    review = timed.decide(review_id, _approve("UANA"), approvals_required=2)
    run = timed.get_run(run_id)
    assert still_expected(spec, review, run, {}) == ("UBEN", "UCAT")
    timed.away("UBEN", "UANA", LATER, by="UBEN")
    assert still_expected(spec, review, run, timed.delegates()) == ("UCAT",)
