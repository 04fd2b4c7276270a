"""Claim and Reassign through Slack: the stand-in's signed clicks and modal reach the real bot,
whose thread, review message, reminders and private answers are what the reviewers see."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from sqlalchemy import update

from crew_runtime.config import Config
from storage import ReviewStatus, Store
from storage.schema import reviews
from tests.support.slack_harness import (
    ALICE,
    BOB,
    CHANNEL,
    MALLORY,
    buttons,
    modal_for,
    review_with_buttons,
    root_of,
    said,
    shows,
    slack_and_bot,
    text_of,
    wait_until,
)

Json = dict[str, Any]

CONFIG = f"""
[crews.deal]
factory = "tests.support.crews:writer"
channel = "{CHANNEL}"
reviewers = ["{ALICE}", "{BOB}"]

[crews.dm]
factory = "tests.support.crews:writer"
channel = "{CHANNEL}"
reviewers = ["{ALICE}", "{BOB}"]
remind_after = "1h"
remind_by = "dm"
"""

pytestmark = [pytest.mark.slow, pytest.mark.bot_config(CONFIG)]


def _due_now(store: Store, review_id: str) -> None:
    """Make the review's reminder due (the sweep of the running bot then sends it)."""
    with store.engine.begin() as conn:
        conn.execute(
            update(reviews).where(reviews.c.id == review_id).values(remind_at=datetime(2000, 1, 1))
        )


def test_claim_take_over_and_reassign_show_in_the_thread_and_reminders_follow(
    setup: tuple[Config, Store],
) -> None:
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        slack.slash_command(ALICE, CHANNEL, "/crew", "run deal topic=otters")
        root = root_of(slack)
        outline = review_with_buttons(slack, root["ts"])
        assert {"countersign:claim", "countersign:reassign"} <= set(buttons(outline))
        (review,) = store.list_reviews()

        # Mallory is not a reviewer: told so, nothing recorded.
        slack.click_button(MALLORY, CHANNEL, outline["ts"], "countersign:claim")
        wait_until(
            lambda: [e for e in slack.ephemerals(MALLORY) if "not a reviewer" in e.text],
            what="Mallory told she is not a reviewer",
        )
        assert store.get_review(review.id).claimed_by is None

        # Bob claims it; Alice's later claim moves it, and the thread says so each time.
        clicked = slack.click_button(BOB, CHANNEL, outline["ts"], "countersign:claim")
        said(slack, root["ts"], f"<@{BOB}> claimed this review")
        shows(slack, root["ts"], outline["ts"], f"Claimed by <@{BOB}>")
        assert slack.retry(clicked).status == 200  # Slack's retry of the click: recorded once
        slack.click_button(ALICE, CHANNEL, outline["ts"], "countersign:claim")  # after the retry
        said(slack, root["ts"], f"<@{ALICE}> took this review over from <@{BOB}>")
        shown = shows(slack, root["ts"], outline["ts"], f"Claimed by <@{ALICE}>")
        assert "countersign:approve" in buttons(shown)

        # Reassign: choosing someone who may not decide is an error in the modal.
        slack.click_button(ALICE, CHANNEL, outline["ts"], "countersign:reassign")
        view = modal_for(slack, ALICE, "to")
        refused = slack.submit_view(ALICE, view["id"], {"to": MALLORY})
        assert refused.problems == []
        assert "not a reviewer" in refused.json["errors"]["to"]
        assert store.get_review(review.id).claimed_by == ALICE
        assert slack.submit_view(ALICE, view["id"], {"to": BOB}).status == 200
        said(slack, root["ts"], f"<@{ALICE}> reassigned this review to <@{BOB}>")
        shows(slack, root["ts"], outline["ts"], f"Claimed by <@{BOB}>")
        assert store.get_review(review.id).claimed_by == BOB

        # A reminder now mentions whoever has the review.
        _due_now(store, review.id)
        reminder = said(slack, root["ts"], "⏰")
        assert f"<@{BOB}>" in text_of(reminder) and f"<@{ALICE}>" not in text_of(reminder)

        # Anyone allowed still decides; the audit trail has each claim and the reassignment.
        slack.click_button(ALICE, CHANNEL, outline["ts"], "countersign:approve")
        decided = shows(slack, root["ts"], outline["ts"], "Approved by")
        assert not buttons(decided)
        assert store.get_review(review.id).status == ReviewStatus.DECIDED
        records = store.audit_records(since=datetime(2000, 1, 1), until=datetime(2100, 1, 1))
        thread = [text_of(m) for m in slack.thread(CHANNEL, root["ts"])]
        assert sum("claimed this review" in words for words in thread) == 1
        assert [(r.decision, r.decided_by, r.assigned_to) for r in records] == [
            ("claim", BOB, BOB),
            ("claim", ALICE, ALICE),
            ("reassign", ALICE, BOB),
            ("approve", ALICE, None),
        ]


def test_a_reminder_by_dm_goes_to_whoever_claimed_the_review_alone(
    setup: tuple[Config, Store],
) -> None:
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        slack.slash_command(ALICE, CHANNEL, "/crew", "run dm topic=otters")
        root = root_of(slack)
        outline = review_with_buttons(slack, root["ts"])
        (review,) = store.list_reviews()
        slack.click_button(BOB, CHANNEL, outline["ts"], "countersign:claim")
        said(slack, root["ts"], f"<@{BOB}> claimed this review")
        _due_now(store, review.id)
        (told,) = wait_until(lambda: slack.direct_messages(BOB), what="the reminder in Bob's DM")
        assert text_of(told).startswith("⏰ A task review of a `dm` run is still waiting")
        wait_until(lambda: store.get_review(review.id).remind_at is None, what="the sweep")
        assert slack.direct_messages(ALICE) == []
