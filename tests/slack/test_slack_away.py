"""Delegation while away, through Slack: ``/crew away --until DATE --to @person`` hands one's
reviews to a delegate, who then may decide them, is mentioned in reminders and finds them in
``/crew pending``; ``/crew back`` ends it; what cannot be is refused with the reason."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from crew_runtime.config import Config
from storage import RunStatus, Store
from tests.support.slack_harness import (
    ALICE,
    BOB,
    CHANNEL,
    MALLORY,
    NUDGED,
    answer_to,
    configured,
    review_with_buttons,
    root_of,
    run_in_slack,
    shows,
    slack_and_bot,
    text_of,
    wait_until,
)

CONFIG = f"""
[crews.deal]
factory = "tests.support.crews:writer"
channel = "{CHANNEL}"
reviewers = ["{BOB}"]
remind_after = "1s"
"""

pytestmark = [pytest.mark.slow, pytest.mark.bot_config(CONFIG)]


def test_the_delegate_decides_is_reminded_and_finds_the_reviews_until_the_reviewer_is_back(
    setup: tuple[Config, Store],
) -> None:
    config, store = setup
    later = (datetime.now(UTC) + timedelta(days=30)).date().isoformat()
    with slack_and_bot(config, store) as (slack, _bot):
        slack.add_user("UROBOT", "robot", is_bot=True)
        refused = {
            f"away --until {later} --to @robot": "<@UROBOT> cannot review for you: that is a bot",
            "away --until 2020-01-01 --to @mallory": "is already past",
            f"away --until {later} --to @bob": "one cannot delegate to oneself",
            f"away --until {later} --to mallory": "Mention them after `--to`",
            "away --until someday --to @mallory": "is not a date",
        }
        for typed, says in refused.items():
            assert says in answer_to(slack, BOB, typed), typed
        assert store.active_delegations() == []

        told = answer_to(slack, BOB, f"away --until {later} --to @mallory")
        assert f"<@{MALLORY}> reviews for you" in told
        (made,) = store.active_delegations()
        assert (made.person, made.delegate, made.created_by) == (BOB, MALLORY, BOB)
        # Mallory, away to Bob now, would close a circle.
        assert "circle" in answer_to(slack, MALLORY, f"away --until {later} --to @bob")

        assert "Starting" in answer_to(slack, ALICE, "run deal topic=otters")
        root = root_of(slack)
        outline = review_with_buttons(slack, root["ts"])
        assert answer_to(slack, MALLORY, "pending") == "1 review waiting"
        reminder = wait_until(
            lambda: next((m for m in slack.thread(CHANNEL, root["ts"]) if "⏰" in text_of(m)), 0),
            what="a reminder",
        )
        assert f"<@{MALLORY}>" in text_of(reminder) and f"<@{BOB}>" not in text_of(reminder)

        # Alice is in the channel but reviews for nobody; Mallory decides for Bob.
        slack.click_button(ALICE, CHANNEL, outline["ts"], "countersign:approve")
        wait_until(
            lambda: [e for e in slack.ephemerals(ALICE) if "not a reviewer" in e.text],
            what="Alice told she is not a reviewer",
        )
        slack.click_button(MALLORY, CHANNEL, outline["ts"], "countersign:approve")
        article = review_with_buttons(slack, root["ts"], after=outline["ts"])
        (run,) = store.list_runs()
        first = store.list_reviews(status=None, run_id=run.id)[0]
        assert first.decision is not None and first.decision.decided_by == MALLORY

        assert "no longer go to" in answer_to(slack, BOB, "back")
        assert "were not away" in answer_to(slack, BOB, "back")
        assert answer_to(slack, MALLORY, "pending").startswith("Nothing is waiting")
        before = len(slack.ephemerals(MALLORY))
        slack.click_button(MALLORY, CHANNEL, article["ts"], "countersign:approve")
        wait_until(
            lambda: [e for e in slack.ephemerals(MALLORY)[before:] if "not a reviewer" in e.text],
            what="Mallory told she is not a reviewer any more",
        )
        slack.click_button(BOB, CHANNEL, article["ts"], "countersign:approve")
        done = wait_until(
            lambda: (r := store.get_run(run.id)).status.is_final and r, what="the run to end"
        )
        assert done.status == RunStatus.SUCCEEDED


def test_a_dm_reminder_goes_to_the_delegate_once_and_not_to_the_person_away(
    tmp_path: Path, db_url: str
) -> None:
    """Alice (named, and in the group named) is away to Bob, the group's other member: Bob
    is reminded once, Alice not at all; the escalation still goes to Mallory."""
    store = Store.open(db_url)
    store.away(ALICE, BOB, datetime(2099, 1, 1), by=ALICE)
    store.close()
    groups = {"S0PAYERS": [ALICE, BOB]}
    with run_in_slack(tmp_path, db_url, NUDGED, "run nudged amount=1500", groups) as (slack, *_):
        wait_until(lambda: slack.direct_messages(MALLORY), what="the escalation in Mallory's DM")
        reminded = slack.direct_messages(BOB)
        assert slack.direct_messages(ALICE) == []
    assert [text_of(m).split(" <")[0] for m in reminded] == [
        "⏰ A tool approval of a `nudged` run is still waiting for your decision."
    ]


QUORUM = f"""
[crews.deal]
factory = "tests.support.crews:writer"
channel = "{CHANNEL}"
reviewers = ["{ALICE}", "{BOB}"]
approvals_required = 2
"""


def test_a_quorum_expects_the_delegate_and_counts_their_approval(
    tmp_path: Path, db_url: str
) -> None:
    with configured(tmp_path, db_url, QUORUM) as (config, store):
        store.away(BOB, MALLORY, datetime(2099, 1, 1), by=BOB)
        with slack_and_bot(config, store) as (slack, _bot):
            slack.slash_command(ALICE, CHANNEL, "/crew", "run deal topic=otters")
            root = root_of(slack)
            outline = review_with_buttons(slack, root["ts"])
            slack.click_button(ALICE, CHANNEL, outline["ts"], "countersign:approve")
            tallied = text_of(shows(slack, root["ts"], outline["ts"], "1 of 2 approvals"))
            expected = tallied.split("needed")[1]
            assert f"<@{MALLORY}>" in expected and f"<@{BOB}>" not in expected
            slack.click_button(MALLORY, CHANNEL, outline["ts"], "countersign:approve")
            decided = shows(slack, root["ts"], outline["ts"], "Approved by")
            assert f"Approvals given: <@{ALICE}>, <@{MALLORY}>" in text_of(decided)
