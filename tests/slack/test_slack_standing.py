"""Standing approvals through Slack: the stand-in's signed clicks on "Approve all <tool> calls"
and *Revoke* reach the real bot, a scripted crew's later calls run (or ask again) accordingly,
and the thread, the review messages and the private answers are what the reviewers see."""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from crew_runtime.config import Config
from sandbox import Delivery, StandInThread
from storage import ReviewStatus, RunStatus, Store
from tests.support.cli import Cli
from tests.support.crews import effects
from tests.support.slack_harness import (
    ALICE,
    BOB,
    CHANNEL,
    MALLORY,
    buttons,
    configured,
    modal_for,
    review_with_buttons,
    root_of,
    said,
    shows,
    slack_and_bot,
    text_of,
    wait_until,
)

pytestmark = pytest.mark.slow

Json = dict[str, Any]

APPROVE_ALL = "countersign:approve_all"
REVOKE = "countersign:revoke_standing"

CONFIG = f"""
[crews.payroll]
factory = "tests.support.crews:payroll"
channel = "{CHANNEL}"
reviewers = ["{ALICE}", "{BOB}"]

[crews.payroll.gates.pay]
allow_standing = true
standing_match = ["to"]

[crews.guarded]
factory = "tests.support.crews:payroll"
channel = "{CHANNEL}"
reviewers = ["{ALICE}", "{BOB}"]
forbid_self_approval = true

[crews.guarded.gates.pay]
allow_standing = true

[crews.strict]
factory = "tests.support.crews:payroll"
channel = "{CHANNEL}"
reviewers = ["{ALICE}", "{BOB}"]
"""


@pytest.fixture
def setup(
    tmp_path: Path, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Config, Store]]:
    # The crews run in the bot's own process: the payments they make go to this file.
    monkeypatch.setenv("COUNTERSIGN_TEST_EFFECTS", str(tmp_path / "effects.jsonl"))
    with configured(tmp_path, db_url, CONFIG) as pair:
        yield pair


def _paid(tmp_path: Path) -> list[tuple[int, str]]:
    paid = effects(tmp_path / "effects.jsonl")
    return [(e["amount"], e["to"]) for e in paid if e["kind"] == "paid"]


def _told(slack: StandInThread, user: str, words: str, before: int = 0) -> str:
    told = wait_until(
        lambda: [e.text for e in slack.ephemerals(user)[before:] if words in e.text],
        what=f"{user} told {words!r}",
    )
    return told[-1]


def _stale_click(slack: StandInThread, user: str, seen: Delivery) -> None:
    """``user`` clicks the button of the click ``seen`` on the message as it was then, before
    the bot's edit reached their screen (the stand-in, like Slack, shows the edit at once)."""
    stale = copy.deepcopy(seen.payload)
    stale["user"] = {**stale["user"], "id": user}
    assert slack.send_interaction(stale).status == 200


def _race(*racers: Callable[[], object]) -> None:
    """Run ``racers`` in threads released at the same moment; wait for all of them."""
    start = threading.Barrier(len(racers))

    def go(racer: Callable[[], object]) -> None:
        start.wait()
        racer()

    threads = [threading.Thread(target=go, args=(racer,)) for racer in racers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _first_review(slack: StandInThread, crew: str) -> tuple[Json, Json]:
    slack.slash_command(ALICE, CHANNEL, "/crew", f"run {crew}")
    root = root_of(slack)
    return root, review_with_buttons(slack, root["ts"])


def test_approve_all_then_revoke_from_the_thread(
    setup: tuple[Config, Store], tmp_path: Path
) -> None:
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        root, acme = _first_review(slack, "payroll")
        shown = buttons(acme)
        assert list(shown)[:3] == ["countersign:approve", APPROVE_ALL, "countersign:edit"]
        assert shown[APPROVE_ALL]["text"]["text"] == "Approve all pay calls (to = ACME)"
        (review,) = store.list_reviews()

        # Mallory is not a reviewer: told so, nothing recorded.
        slack.click_button(MALLORY, CHANNEL, acme["ts"], APPROVE_ALL)
        _told(slack, MALLORY, "not a reviewer")
        assert store.get_review(review.id).status == ReviewStatus.PENDING

        # Alice approves all pay calls to ACME: the call, and the standing approval, once.
        clicked = slack.click_button(ALICE, CHANNEL, acme["ts"], APPROVE_ALL)
        assert slack.retry(clicked).status == 200  # Slack's retry: the same request
        granted = said(slack, root["ts"], "Standing approval of `pay`")
        assert f'(to = "ACME") by <@{ALICE}>' in text_of(granted)
        assert "later calls with these values in this run run without review" in text_of(granted)
        assert list(buttons(granted)) == [REVOKE]
        decided = shows(slack, root["ts"], acme["ts"], "Approved by")
        assert not buttons(decided)

        # ACME 2000 runs under it; GLOBEX 1200 asks, and its button names GLOBEX.
        globex = review_with_buttons(slack, root["ts"], after=granted["ts"])
        assert _paid(tmp_path) == [(1500, "ACME"), (2000, "ACME")]
        label = buttons(globex)[APPROVE_ALL]["text"]["text"]
        assert label == "Approve all pay calls (to = GLOBEX)"
        run = store.get_run(review.run_id)
        (standing,) = store.standing_approvals(run.id)
        assert (standing.granted_by, standing.match, standing.revoked_by) == (
            ALICE,
            {"to": "ACME"},
            None,
        )

        # Revoke: not Mallory's to do; Bob's counts; Alice's second is told Bob was first.
        slack.click_button(MALLORY, CHANNEL, granted["ts"], REVOKE)
        _told(slack, MALLORY, "not a reviewer", before=1)
        assert store.standing_approvals(run.id)[0].revoked_by is None
        clicked = slack.click_button(BOB, CHANNEL, granted["ts"], REVOKE)
        revoked = shows(slack, root["ts"], granted["ts"], f"revoked by <@{BOB}>")
        assert not buttons(revoked)
        before = len(slack.ephemerals(ALICE))
        _stale_click(slack, ALICE, clicked)
        told = _told(slack, ALICE, "revoked this standing approval already", before)
        assert told.startswith(f"<@{BOB}> revoked")
        assert store.standing_approvals(run.id)[0].revoked_by == BOB

        # The rest of the run, and the audit trail: the grant and the revocation are records.
        slack.click_button(ALICE, CHANNEL, globex["ts"], "countersign:approve")
        wait_until(lambda: store.get_run(run.id).status == RunStatus.SUCCEEDED, what="the end")
        records = list(store.audit_records(since=datetime(2000, 1, 1), until=datetime(2100, 1, 1)))
        trail = [(r.decision, r.decided_by, r.review_id) for r in records]
        assert [t for t in trail if t[0] != "standing_used"][:3] == [
            ("approve", ALICE, review.id),
            ("standing", ALICE, review.id),
            ("standing_revoked", BOB, review.id),
        ]
        # The call the standing approval approved before the revocation, on its own record.
        (used,) = [r for r in records if r.decision == "standing_used"]
        assert (used.decided_by, used.approved_args) == (ALICE, {"amount": 2000, "to": "ACME"})
        thread = [text_of(m) for m in slack.thread(CHANNEL, root["ts"])]
        assert sum("Standing approval of" in words for words in thread) == 1


def test_a_gate_without_standing_approvals_shows_no_button(setup: tuple[Config, Store]) -> None:
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        _root, acme = _first_review(slack, "strict")
        assert "countersign:approve" in buttons(acme)
        assert APPROVE_ALL not in buttons(acme)
        # A forged click (the button is not on the message; Edit only opens a modal) is
        # refused by the service, which reads the gate's configuration.
        seen = slack.click_button(ALICE, CHANNEL, acme["ts"], "countersign:edit")
        forged = copy.deepcopy(seen.payload)
        forged["actions"][0].update(action_id=APPROVE_ALL)
        assert slack.send_interaction(forged).status == 200
        _told(slack, ALICE, "does not allow approving its later calls")
        assert store.list_reviews()[0].status == ReviewStatus.PENDING
        assert store.standing_approvals(store.list_reviews()[0].run_id) == []


def test_approve_all_racing_a_rejection_and_a_double_click(setup: tuple[Config, Store]) -> None:
    """Bob's Reject (submitted from its modal) races Alice's two clicks on "Approve all": one
    decision wins; a standing approval exists only if an Approve all won, and then once."""
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        _root, acme = _first_review(slack, "payroll")
        slack.click_button(BOB, CHANNEL, acme["ts"], "countersign:reject")
        reject_view = modal_for(slack, BOB)
        results: dict[str, Any] = {}

        def approve_all(n: int) -> None:
            results[f"all{n}"] = slack.click_button(ALICE, CHANNEL, acme["ts"], APPROVE_ALL)

        def reject() -> None:
            results["reject"] = slack.submit_view(BOB, reject_view["id"], {"text": "not now"})

        _race(lambda: approve_all(1), lambda: approve_all(2), reject)
        assert all(r.status == 200 for r in results.values())
        (review,) = store.list_reviews(status=None)
        decided = wait_until(lambda: store.get_review(review.id).decision, what="a decision")
        standing = store.standing_approvals(review.run_id)
        if decided.decided_by == ALICE:
            assert len(standing) == 1 and standing[0].granted_by == ALICE
            _told(slack, ALICE, "already")  # her other click came too late
            errors = (results["reject"].json or {}).get("errors", {})
            assert "already" in errors.get("text", "").lower()
        else:
            assert standing == []
            wait_until(
                lambda: len([e for e in slack.ephemerals(ALICE) if "already" in e.text]) == 2,
                what="both of Alice's clicks told they came too late",
            )


def test_who_may_approve_all_and_a_revocation_from_the_cli(
    setup: tuple[Config, Store], tmp_path: Path, db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The rules of Approve hold: who started the run may not (``forbid_self_approval``), a
    delegate may while the reviewer is away. A revocation from the command line edits the
    thread's message, and a click on its Revoke as it was is told who revoked it first."""
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        root, acme = _first_review(slack, "guarded")  # started by Alice
        assert buttons(acme)[APPROVE_ALL]["text"]["text"] == "Approve all pay calls"
        slack.click_button(ALICE, CHANNEL, acme["ts"], APPROVE_ALL)
        _told(slack, ALICE, "You started this run")
        (review,) = store.list_reviews()
        assert store.standing_approvals(review.run_id) == []

        store.away(BOB, MALLORY, datetime(2099, 1, 1), by=BOB)
        slack.click_button(MALLORY, CHANNEL, acme["ts"], APPROVE_ALL)
        granted = said(slack, root["ts"], "Standing approval of `pay`")
        assert f"by <@{MALLORY}>" in text_of(granted)
        assert "later calls of it in this run run without review" in text_of(granted)
        store.back(BOB, by=BOB)

        # Back from away, Bob's reviews are his again: Mallory may not revoke.
        seen = slack.click_button(MALLORY, CHANNEL, granted["ts"], REVOKE)
        _told(slack, MALLORY, "not a reviewer")
        (standing,) = store.standing_approvals(review.run_id)
        assert standing.revoked_by is None
        cli = Cli(db_url, tmp_path / "countersign.toml", capsys)
        cli.ok("reviews", "revoke", standing.id, "--by", ALICE)
        revoked = shows(slack, root["ts"], granted["ts"], f"revoked by <@{ALICE}>")
        assert not buttons(revoked)
        # A click on the button as Bob's screen still showed it: told who revoked it first.
        _stale_click(slack, BOB, seen)
        _told(slack, BOB, f"<@{ALICE}> revoked this standing approval already")


def test_two_revocations_racing_edit_the_message_for_the_winner(
    setup: tuple[Config, Store],
) -> None:
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        root, acme = _first_review(slack, "payroll")
        slack.click_button(ALICE, CHANNEL, acme["ts"], APPROVE_ALL)
        granted = said(slack, root["ts"], "Standing approval of `pay`")
        _race(
            lambda: slack.click_button(ALICE, CHANNEL, granted["ts"], REVOKE),
            lambda: slack.click_button(BOB, CHANNEL, granted["ts"], REVOKE),
        )
        (standing,) = store.standing_approvals(store.list_reviews(status=None)[0].run_id)
        winner = wait_until(lambda: store.get_standing(standing.id).revoked_by, what="a revoke")
        loser = BOB if winner == ALICE else ALICE
        shows(slack, root["ts"], granted["ts"], f"revoked by <@{winner}>")
        _told(slack, loser, f"<@{winner}> revoked this standing approval already")
