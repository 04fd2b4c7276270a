"""Approval chains through Slack: the stand-in's signed clicks and replies reach the real bot,
whose messages and private answers are what the reviewers see, on SQLite and PostgreSQL; the
bot restarted between two stages carries the chain on from the database."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from crew_runtime.config import Config
from sandbox import StandInThread
from storage import APPROVAL_STAGES, ReviewStatus, RunStatus, Store
from tests.support.slack_harness import (
    ALICE,
    BOB,
    CHANNEL,
    MALLORY,
    BotThread,
    buttons,
    configured,
    free_port,
    new_standin,
    review_with_buttons,
    root_of,
    shows,
    slack_and_bot,
    slack_settings,
    text_of,
    wait_until,
)
from tests.support.slack_harness import told as _told

Json = dict[str, Any]
LEGAL = "S0LEGAL"  # a user group: only Slack can say Alice is in it

CONFIG = f"""
[crews.deal]
factory = "tests.support.crews:writer"
channel = "{CHANNEL}"
stages = [
  {{ name = "legal",   reviewers = ["{LEGAL}"] }},
  {{ name = "manager", reviewers = ["{BOB}", "{MALLORY}"], approvals_required = 2 }},
]

[crews.deal.tasks.2]
approvals_required = 1
"""

pytestmark = [pytest.mark.slow, pytest.mark.bot_config(CONFIG)]


def _in_thread(slack: StandInThread, root_ts: str, words: str) -> Json:
    return wait_until(
        lambda: next((m for m in slack.thread(CHANNEL, root_ts) if words in text_of(m)), None),
        what=f"the thread to say {words!r}",
    )


def test_legal_then_two_managers_with_a_race_at_each_door(setup: tuple[Config, Store]) -> None:
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        slack.standin.add_usergroup(LEGAL, [ALICE])
        slack.slash_command(MALLORY, CHANNEL, "/crew", "run deal topic=otters")
        root = root_of(slack)
        outline = review_with_buttons(slack, root["ts"])
        assert f"Stage 1 of 2 · legal · waiting for <!subteam^{LEGAL}> · next: manager" in (
            text_of(outline)
        )
        run = store.list_runs()[0]

        # A manager clicking early is told whose turn it is; nothing is recorded.
        slack.click_button(BOB, CHANNEL, outline["ts"], "countersign:approve")
        early = _told(slack, BOB, 0, "is at its legal stage (1 of 2)")
        assert "You are asked at the manager stage, after it" in early
        assert store.list_reviews(run_id=run.id)[0].approvals == ()

        # Alice (legal) and Bob (a manager) click at the same moment: Alice passes the legal
        # stage; Bob is refused (the review was still at legal) or counted at manager.
        results: dict[str, Any] = {}

        def approve(user: str) -> None:
            results[user] = slack.click_button(user, CHANNEL, outline["ts"], "countersign:approve")

        racers = [threading.Thread(target=approve, args=(u,)) for u in (ALICE, BOB)]
        for racer in racers:
            racer.start()
        for racer in racers:
            racer.join()
        assert results[ALICE].status == 200 and results[BOB].status == 200
        _told(slack, ALICE, 0, "Your approval passed the legal stage")
        passed = _in_thread(slack, root["ts"], "Stage 2 of 2, manager")
        assert f"Legal approved by <@{ALICE}>" in text_of(passed)
        assert f"<@{BOB}> <@{MALLORY}>, this review is yours to decide now" in text_of(passed)
        review = store.list_reviews(run_id=run.id)[0]
        assert review.stage == 1
        by_stage = {a.decided_by: a.stage for a in review.approvals}
        assert by_stage[ALICE] == "legal" and by_stage.get(BOB, "manager") == "manager"
        if BOB not in by_stage:  # refused at legal: now it is his turn
            slack.click_button(BOB, CHANNEL, outline["ts"], "countersign:approve")
        _told(slack, BOB, 0, "Your approval is counted at the manager stage (1 of 2)")

        # Alice's second click finds the review at the manager stage, not hers.
        slack.click_button(ALICE, CHANNEL, outline["ts"], "countersign:approve")
        _told(slack, ALICE, 1, "is at its manager stage (2 of 2)")
        shown = text_of(shows(slack, root["ts"], outline["ts"], "manager: 1 of 2 approvals"))
        assert f"Stage 2 of 2 · manager: 1 of 2 approvals (<@{BOB}>)" in shown
        assert f"waiting for <@{MALLORY}> · legal approved by <@{ALICE}>" in shown
        assert "countersign:approve" in buttons(shows(slack, root["ts"], outline["ts"], "Stage 2"))

        # Mallory's approval is the last stage's second: the review is decided.
        slack.click_button(MALLORY, CHANNEL, outline["ts"], "countersign:approve")
        decided = shows(slack, root["ts"], outline["ts"], "Approvals given")
        assert not buttons(decided)
        assert (
            f"Approvals given: <@{ALICE}> (legal), <@{BOB}> (manager), <@{MALLORY}> (manager)"
            in text_of(decided)
        )
        (first,) = store.list_reviews(status=ReviewStatus.DECIDED, run_id=run.id)
        assert first.decision is not None
        assert [s["stage"] for s in first.decision.details[APPROVAL_STAGES]] == [
            "legal",
            "manager",
            "manager",
        ]
        article = review_with_buttons(slack, root["ts"], after=outline["ts"])
        slack.click_button(ALICE, CHANNEL, article["ts"], "countersign:approve")
        done = wait_until(
            lambda: (r := store.get_run(run.id)).status.is_final and r, what="the run to end"
        )
        assert done.status == RunStatus.SUCCEEDED


def test_a_restart_between_stages_and_a_rejection_by_the_second(
    setup: tuple[Config, Store],
) -> None:
    """Legal approves, the bot stops; a new bot on the same database shows the manager stage
    and takes a manager's rejection, replied in the thread, which rejects the run."""
    config, store = setup
    port = free_port()
    standin = new_standin(bot_endpoint=f"http://127.0.0.1:{port}/slack/events")
    standin.add_usergroup(LEGAL, [ALICE])
    with StandInThread(standin) as slack:
        settings = slack_settings(slack)
        with BotThread(settings, config, store, port):
            slack.slash_command(MALLORY, CHANNEL, "/crew", "run deal topic=otters")
            root = root_of(slack)
            outline = review_with_buttons(slack, root["ts"])
            slack.click_button(ALICE, CHANNEL, outline["ts"], "countersign:approve")
            _in_thread(slack, root["ts"], "Stage 2 of 2, manager")
        run = store.list_runs()[0]
        assert store.list_reviews(run_id=run.id)[0].stage == 1

        with BotThread(settings, config, store, port):
            # Legal's reply now is refused: the chain is at the manager stage.
            slack.reply_in_thread(ALICE, CHANNEL, root["ts"], "reject: too late for me")
            _told(slack, ALICE, 0, "is at its manager stage (2 of 2)")
            slack.reply_in_thread(BOB, CHANNEL, root["ts"], "reject: not this quarter")
            done = wait_until(
                lambda: (r := store.get_run(run.id)).status.is_final and r, what="the run to end"
            )
            assert done.status == RunStatus.REJECTED
            decided = shows(slack, root["ts"], outline["ts"], "Approvals given")
            assert f"Approvals given: <@{ALICE}> (legal)" in text_of(decided)


def test_a_reminder_mentions_the_stage_asked_now(tmp_path: Path, db_url: str) -> None:
    reminded = CONFIG.replace('channel = "', 'remind_after = "1s"\nchannel = "', 1)
    with (
        configured(tmp_path, db_url, reminded) as (config, store),
        slack_and_bot(config, store) as (slack, _bot),
    ):
        slack.standin.add_usergroup(LEGAL, [ALICE])
        slack.slash_command(MALLORY, CHANNEL, "/crew", "run deal topic=otters")
        root = root_of(slack)
        nudge = text_of(_in_thread(slack, root["ts"], "⏰"))
        assert nudge.startswith(f"⏰ <!subteam^{LEGAL}>: ")
        assert BOB not in nudge and MALLORY not in nudge
