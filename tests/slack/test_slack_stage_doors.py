"""Where an approval chain's review is found and handled through Slack, on SQLite and
PostgreSQL: ``/crew pending``, the Home tab, Claim and Reassign follow the stage the review is
at (a stage passing refreshes the next stage's Home); reminders and escalations by DM go to
that stage's people alone; and a click recorded before the stage moved on, handled again
after a crash, is answered as the first time, not as "not your stage"."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest
from sqlalchemy import select, update

from bot.slack import home_text as t
from bot.slack import text
from crew_runtime.config import Config
from sandbox import StandInThread
from storage import Store
from storage.schema import inbox, review_events, reviews
from tests.support.slack_harness import (
    ALICE,
    BOB,
    CHANNEL,
    MALLORY,
    answer_to,
    configured,
    home_says,
    modal_for,
    review_with_buttons,
    root_of,
    said,
    shows,
    slack_and_bot,
    text_of,
    wait_until,
)
from tests.support.slack_harness import told as _told

LEGAL = "S0LEGAL"  # a user group: only Slack can say Alice is in it
CAROL = "UCAROL"

# No crew-wide reviewers: the chain's stages alone say who finds the outline's review.
CONFIG = f"""
[crews.deal]
factory = "tests.support.crews:writer"
channel = "{CHANNEL}"
stages = [
  {{ name = "legal",   reviewers = ["{LEGAL}"] }},
  {{ name = "manager", reviewers = ["{BOB}", "{CAROL}"] }},
]
"""

pytestmark = [pytest.mark.slow, pytest.mark.bot_config(CONFIG)]

NUDGED = f"""
[crews.nudged]
factory = "tests.support.crews:payments"
channel = "{CHANNEL}"
remind_after = "1s"
escalate_after = "2s"
remind_by = "dm"

[crews.nudged.gates.pay]
stages = [
  {{ name = "legal",   reviewers = ["{LEGAL}"] }},
  {{ name = "manager", reviewers = ["{BOB}"] }},
]
"""


def test_pending_home_and_claims_follow_the_stage_the_review_is_at(
    setup: tuple[Config, Store],
) -> None:
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        slack.add_usergroup(LEGAL, [ALICE])
        for person in (ALICE, BOB):
            slack.open_home(person)
            home_says(slack, person, t.HOME_NOTHING_PENDING)
        slack.slash_command(MALLORY, CHANNEL, "/crew", "run deal topic=otters")
        root = root_of(slack)
        outline = review_with_buttons(slack, root["ts"])

        # At legal: Alice (in the group) finds it; the manager and the channel do not.
        home_says(slack, ALICE, t.home_pending_count(1))
        assert answer_to(slack, ALICE, "pending") == "1 review waiting"
        for person in (BOB, MALLORY):
            assert answer_to(slack, person, "pending").startswith("Nothing is waiting"), person
        assert t.HOME_NOTHING_PENDING in text_of_home(slack, BOB)

        # Claim: a manager is told whose stage it is; Alice claims it.
        slack.click_button(BOB, CHANNEL, outline["ts"], "countersign:claim")
        _told(slack, BOB, 0, "is at its legal stage (1 of 2)")
        slack.click_button(ALICE, CHANNEL, outline["ts"], "countersign:claim")
        said(slack, root["ts"], f"<@{ALICE}> claimed this review")

        # Alice's approval passes legal: Bob's Home is refreshed with it, Alice's without.
        slack.click_button(ALICE, CHANNEL, outline["ts"], "countersign:approve")
        home_says(slack, BOB, t.home_pending_count(1))
        home_says(slack, ALICE, t.HOME_NOTHING_PENDING)
        assert answer_to(slack, BOB, "pending") == "1 review waiting"
        assert answer_to(slack, ALICE, "pending").startswith("Nothing is waiting")

        # Legal's turn is over: Alice may not claim it, nor may Bob give it to her; Carol,
        # a manager, may be given it.
        slack.click_button(ALICE, CHANNEL, outline["ts"], "countersign:claim")
        _told(slack, ALICE, 0, "is at its manager stage (2 of 2)")
        slack.click_button(BOB, CHANNEL, outline["ts"], "countersign:reassign")
        view = modal_for(slack, BOB, "to")
        refused = slack.submit_view(BOB, view["id"], {"to": ALICE})
        assert refused.json["errors"]["to"] == text.REASSIGN_NOT_A_REVIEWER
        assert slack.submit_view(BOB, view["id"], {"to": CAROL}).status == 200
        shows(slack, root["ts"], outline["ts"], f"Claimed by <@{CAROL}>")
        (review,) = store.list_reviews()
        assert (review.stage, review.claimed_by) == (1, CAROL)


def text_of_home(slack: StandInThread, user: str) -> str:
    view = slack.home_view(user)
    assert view is not None
    return text_of(view)


def test_a_click_handled_again_after_the_stage_moved_is_answered_as_the_first(
    setup: tuple[Config, Store],
) -> None:
    """Alice's claim and her approval that passed legal were not marked handled (the process
    died first): the recovery sweep hands them to the listeners again, whose stage check must
    let them through to storage, which answers them as the first time."""
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        slack.add_usergroup(LEGAL, [ALICE])
        slack.slash_command(MALLORY, CHANNEL, "/crew", "run deal topic=otters")
        root = root_of(slack)
        outline = review_with_buttons(slack, root["ts"])
        slack.click_button(ALICE, CHANNEL, outline["ts"], "countersign:claim")
        said(slack, root["ts"], f"<@{ALICE}> claimed this review")
        slack.click_button(ALICE, CHANNEL, outline["ts"], "countersign:approve")
        first = _told(slack, ALICE, 0, "Your approval passed the legal stage")
        (review,) = store.list_reviews()
        (approval,) = review.approvals
        key = approval.request_key
        assert review.stage == 1 and key is not None
        with store.engine.connect() as conn:
            (claim_key,) = conn.execute(select(review_events.c.request_key)).scalars()
        wait_until(lambda: _handled(store, key), what="the click handled")

        with store.engine.begin() as conn:  # as if the process died before marking them done
            conn.execute(
                update(inbox)
                .where(inbox.c.key.in_([claim_key, key]))
                .values(done_at=None, claimed_until=datetime(2000, 1, 1))
            )
        again = wait_until(
            lambda: [e.text for e in slack.ephemerals(ALICE) if "Your approval" in e.text][1:],
            what="Alice answered again",
        )
        assert again == [first]
        assert not [e for e in slack.ephemerals(ALICE) if "manager stage (2 of 2)" in e.text]
        wait_until(
            lambda: _handled(store, key) and _handled(store, claim_key), what="both handled again"
        )
        (after,) = store.list_reviews()
        assert after.stage == 1 and after.approvals == review.approvals
        said(slack, root["ts"], "Stage 2 of 2, manager")
        thread = [text_of(m) for m in slack.thread(CHANNEL, root["ts"])]
        assert sum("Stage 2 of 2, manager" in words for words in thread) == 1
        assert sum("claimed this review" in words for words in thread) == 1
        assert after.claimed_by == ALICE


def _handled(store: Store, key: str) -> bool:
    with store.engine.connect() as conn:
        done = conn.execute(inbox.select().where(inbox.c.key == key)).one().done_at
    return done is not None


def test_dm_reminders_and_escalations_go_to_the_stage_asked_now(
    tmp_path: Path, db_url: str
) -> None:
    with (
        configured(tmp_path, db_url, NUDGED) as (config, store),
        slack_and_bot(config, store) as (slack, _bot),
    ):
        slack.add_usergroup(LEGAL, [ALICE])
        slack.slash_command(MALLORY, CHANNEL, "/crew", "run nudged amount=1500")
        root = root_of(slack)
        call = review_with_buttons(slack, root["ts"])
        wait_until(
            lambda: len(_dms(slack, ALICE, "🚨")) == 1 and _dms(slack, ALICE, "⏰"),
            what="Alice reminded and escalated to by DM",
        )
        assert slack.direct_messages(BOB) == [] and slack.direct_messages(MALLORY) == []

        slack.click_button(ALICE, CHANNEL, call["ts"], "countersign:approve")
        said(slack, root["ts"], "Stage 2 of 2, manager")
        (review,) = store.list_reviews()
        with store.engine.begin() as conn:  # both due again, at the manager stage
            conn.execute(
                update(reviews)
                .where(reviews.c.id == review.id)
                .values(remind_at=datetime(2000, 1, 1), escalate_at=datetime(2000, 1, 1))
            )
        wait_until(
            lambda: _dms(slack, BOB, "🚨") and _dms(slack, BOB, "⏰"),
            what="Bob reminded and escalated to by DM",
        )
        assert len(_dms(slack, ALICE, "⏰")) == 1 and len(_dms(slack, ALICE, "🚨")) == 1
        assert slack.direct_messages(MALLORY) == []
        assert not [m for m in slack.thread(CHANNEL, root["ts"]) if "⏰" in text_of(m)]


def _dms(slack: StandInThread, user: str, mark: str) -> list[str]:
    return [text_of(m) for m in slack.direct_messages(user) if text_of(m).startswith(mark)]


MIXED = f"""
[crews.deal]
factory = "tests.support.crews:writer"
channel = "{CHANNEL}"
reviewers = ["{MALLORY}"]
stages = [
  {{ name = "legal",   reviewers = ["{ALICE}"] }},
  {{ name = "manager", reviewers = ["{BOB}"] }},
]

[crews.deal.tasks.2]               # the article: one approval by the crew's reviewers
approvals_required = 1
"""


def test_a_delegate_finds_the_review_at_their_stage_and_the_crews_reviewers_the_rest(
    tmp_path: Path, db_url: str
) -> None:
    """Bob is away and left his reviews to Carol: she finds the outline once it reaches the
    manager stage, and decides it; the article, outside the chain, is Mallory's (the crew's
    reviewer), who never saw the outline."""
    with configured(tmp_path, db_url, MIXED) as (config, store):
        store.away(BOB, CAROL, datetime(2099, 1, 1), by=BOB)
        with slack_and_bot(config, store) as (slack, _bot):
            slack.add_user(CAROL, "carol")
            slack.slash_command(ALICE, CHANNEL, "/crew", "run deal topic=otters")
            root = root_of(slack)
            outline = review_with_buttons(slack, root["ts"])
            assert answer_to(slack, ALICE, "pending") == "1 review waiting"
            for person in (CAROL, MALLORY):
                assert answer_to(slack, person, "pending").startswith("Nothing is waiting"), person

            slack.click_button(ALICE, CHANNEL, outline["ts"], "countersign:approve")
            said(slack, root["ts"], "Stage 2 of 2, manager")
            for person in (CAROL, BOB):
                assert answer_to(slack, person, "pending") == "1 review waiting", person
            for person in (ALICE, MALLORY):
                assert answer_to(slack, person, "pending").startswith("Nothing is waiting"), person

            slack.click_button(CAROL, CHANNEL, outline["ts"], "countersign:approve")
            article = review_with_buttons(slack, root["ts"], after=outline["ts"])
            assert article["ts"] != outline["ts"]
            assert answer_to(slack, MALLORY, "pending") == "1 review waiting"
            for person in (ALICE, CAROL):
                assert answer_to(slack, person, "pending").startswith("Nothing is waiting"), person
