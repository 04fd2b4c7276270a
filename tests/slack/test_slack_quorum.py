"""Reviews that need several approvers, through Slack: the stand-in's signed clicks reach the
real bot, whose messages and private answers are what the reviewers see."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from crew_runtime.config import Config
from storage import APPROVED_BY, ReviewStatus, RunStatus, Store
from tests.support.slack_harness import (
    ALICE,
    BOB,
    CHANNEL,
    MALLORY,
    buttons,
    review_with_buttons,
    root_of,
    shows,
    slack_and_bot,
    text_of,
    wait_until,
)
from tests.support.slack_harness import told as _told

Json = dict[str, Any]

CONFIG = f"""
[crews.deal]
factory = "tests.support.crews:writer"
channel = "{CHANNEL}"
reviewers = ["{ALICE}", "{BOB}", "{MALLORY}"]
approvals_required = 2
forbid_self_approval = true
"""

pytestmark = [pytest.mark.slow, pytest.mark.bot_config(CONFIG)]


def test_two_approvers_the_starter_refused_a_second_click_told_and_a_race_decides_once(
    setup: tuple[Config, Store],
) -> None:
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        slack.slash_command(ALICE, CHANNEL, "/crew", "run deal topic=otters")
        root = root_of(slack)
        outline = review_with_buttons(slack, root["ts"])
        run = store.list_runs()[0]
        assert run.started_by == ALICE

        # The starter may not approve: told privately, nothing recorded.
        slack.click_button(ALICE, CHANNEL, outline["ts"], "countersign:approve")
        _told(slack, ALICE, 0, "You started this run")
        assert store.list_reviews(run_id=run.id)[0].approvals == ()

        # One approval of two: Bob is told, the message shows him and who is still expected.
        slack.click_button(BOB, CHANNEL, outline["ts"], "countersign:approve")
        assert "1 of 2" in _told(slack, BOB, 0, "Your approval is counted")
        tallied = shows(slack, root["ts"], outline["ts"], "1 of 2 approvals")
        shown = text_of(tallied)
        assert f"1 of 2 approvals: <@{BOB}>" in shown
        assert f"from <@{MALLORY}>" in shown and f"<@{ALICE}>" not in shown.split("needed")[1]
        assert "countersign:approve" in buttons(tallied)

        # Bob again: each reviewer counts once.
        slack.click_button(BOB, CHANNEL, outline["ts"], "countersign:approve")
        assert "1 of 2 approvals" in _told(slack, BOB, 1, "You approved this already")

        # Mallory's approval reaches the quorum: the review is decided, the run goes on.
        slack.click_button(MALLORY, CHANNEL, outline["ts"], "countersign:approve")
        decided = shows(slack, root["ts"], outline["ts"], "Approved by")
        assert not buttons(decided)
        assert f"Approvals given: <@{BOB}>, <@{MALLORY}>" in text_of(decided)
        (first,) = store.list_reviews(status=ReviewStatus.DECIDED, run_id=run.id)
        assert first.decision is not None
        assert first.decision.details[APPROVED_BY] == [BOB, MALLORY]

        # The article: Bob and Mallory approve at once; one decision, the run succeeds.
        article = review_with_buttons(slack, root["ts"], after=outline["ts"])
        results: dict[str, Any] = {}

        def approve(user: str) -> None:
            results[user] = slack.click_button(user, CHANNEL, article["ts"], "countersign:approve")

        racers = [threading.Thread(target=approve, args=(u,)) for u in (BOB, MALLORY)]
        for racer in racers:
            racer.start()
        for racer in racers:
            racer.join()
        assert results[BOB].status == 200 and results[MALLORY].status == 200
        done = wait_until(
            lambda: (r := store.get_run(run.id)).status.is_final and r, what="the run to end"
        )
        assert done.status == RunStatus.SUCCEEDED
        second = store.list_reviews(status=ReviewStatus.DECIDED, run_id=run.id)[1]
        assert sorted(a.decided_by for a in second.approvals) == [BOB, MALLORY]
