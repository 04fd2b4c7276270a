"""The app's Home tab, through Slack: opening it shows one's pending reviews (oldest first,
with links to their threads), one's runs still going and one's last decisions; a change for
someone who opened it refreshes it, a burst of changes once; nobody who never opened it is
published to; text from people and models is escaped; Slack refusing a publish holds back
nothing."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from bot.slack import home_text
from crew_runtime.config import Config
from sandbox import StandInThread
from storage import Store
from tests.support.slack_harness import (
    ALICE,
    BOB,
    CHANNEL,
    MALLORY,
    configured,
    home_says,
    review_with_buttons,
    slack_and_bot,
    wait_until,
)

CONFIG = f"""
[crews.writer]
factory = "tests.support.crews:writer"
channel = "{CHANNEL}"
reviewers = ["{BOB}"]
"""

pytestmark = [pytest.mark.slow, pytest.mark.bot_config(CONFIG)]


def _publishes(slack: StandInThread, user: str) -> int:
    return len([c for c in slack.calls("views.publish") if c.params.get("user_id") == user])


def _roots(slack: StandInThread, count: int) -> list[dict[str, object]]:
    def found() -> list[dict[str, object]] | None:
        roots = [
            m
            for m in slack.messages(CHANNEL)
            if m.get("bot_id") and m.get("thread_ts") in (None, m["ts"])
        ]
        return roots if len(roots) >= count else None

    return wait_until(found, what=f"{count} runs' root messages")


def test_home_shows_pending_reviews_in_order_with_links_and_is_refreshed_by_changes(
    setup: tuple[Config, Store],
) -> None:
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        slack.open_home(MALLORY, tab="messages")  # the Messages tab is Slack's: nothing
        slack.open_home(MALLORY)
        empty = home_says(slack, MALLORY, home_text.HOME_NOTHING_PENDING)
        assert home_text.HOME_NO_RUNS in empty and home_text.HOME_NO_DECISIONS in empty
        slack.open_home(BOB)
        home_says(slack, BOB, home_text.HOME_NOTHING_PENDING)

        nasty = "<!channel> <@U123> <https://evil|click>"
        slack.slash_command(ALICE, CHANNEL, "/crew", f'run writer topic="{nasty}"')
        (first_root,) = _roots(slack, 1)
        first = review_with_buttons(slack, str(first_root["ts"]))
        shown = home_says(slack, BOB, home_text.home_pending_count(1))
        for raw in ("<!channel>", "<@U123>", "<https://evil|click>"):
            assert raw not in shown
        assert "&lt;!channel&gt;" in shown

        slack.slash_command(ALICE, CHANNEL, "/crew", "run writer topic=otters")
        second_root = _roots(slack, 2)[-1]
        second = review_with_buttons(slack, str(second_root["ts"]))
        shown = home_says(slack, BOB, home_text.home_pending_count(2))
        links = [
            f"https://sandbox.slack.com/archives/{CHANNEL}/p{str(m['ts']).replace('.', '')}"
            f"?thread_ts={root['ts']}&amp;cid={CHANNEL}"
            for m, root in ((first, first_root), (second, second_root))
        ]
        assert links[0] in shown and links[1] in shown
        assert shown.index(links[0]) < shown.index(links[1])  # oldest first
        # Each review's action digest, short, on Home and on its card alike.
        for review, card in zip(store.list_reviews(), (first, second), strict=True):
            assert review.digest is not None
            assert f"action `{review.digest[:12]}`" in shown
            assert f"action `{review.digest[:12]}`" in json.dumps(card["blocks"])

        slack.click_button(BOB, CHANNEL, first["ts"], "countersign:approve")
        decided = home_says(slack, BOB, f"Approved by <@{BOB}>")
        assert home_text.HOME_DECISIONS_TITLE in decided

        # Alice started both runs but never opened Home: nothing is published to her;
        # Mallory decides nothing here: hers was published once, when she opened it.
        assert _publishes(slack, ALICE) == 0
        assert _publishes(slack, MALLORY) == 1
        slack.open_home(ALICE)
        mine = home_says(slack, ALICE, home_text.HOME_RUNS_TITLE)
        assert mine.count("*writer* · ") == 2 and home_text.HOME_NOTHING_PENDING in mine
        assert [c for c in slack.calls("views.publish") if not c.ok] == []


GROUPED = f"""
[crews.writer]
factory = "tests.support.crews:writer"
channel = "{CHANNEL}"
reviewers = ["S0WRITERS"]
"""


def test_a_group_member_and_the_delegate_of_one_away_see_the_review_on_home(
    tmp_path: Path, db_url: str
) -> None:
    """Bob reviews as a member of a user group; Alice, in it too, is away and left her
    reviews to Mallory: a new review refreshes Bob's Home and Mallory's, not Alice's."""
    with configured(tmp_path, db_url, GROUPED) as (config, store):
        store.away(ALICE, MALLORY, datetime(2099, 1, 1), by=ALICE)
        with slack_and_bot(config, store) as (slack, _bot):
            slack.add_usergroup("S0WRITERS", [ALICE, BOB])
            for person in (BOB, MALLORY):
                slack.open_home(person)
                home_says(slack, person, home_text.HOME_NOTHING_PENDING)
            slack.slash_command(BOB, CHANNEL, "/crew", "run writer topic=otters")
            (root,) = _roots(slack, 1)
            review_with_buttons(slack, str(root["ts"]))
            for person in (BOB, MALLORY):
                home_says(slack, person, home_text.home_pending_count(1))
            assert _publishes(slack, ALICE) == 0


def test_a_burst_of_changes_is_one_refresh(setup: tuple[Config, Store]) -> None:
    """Three runs wait for Bob while his refresh is held back (a long debounce): none is
    published meanwhile, and his next opening publishes all three in one view, leaving no
    refresh pending."""
    config, store = setup
    with slack_and_bot(config, store) as (slack, bot):
        slack.open_home(BOB)
        home_says(slack, BOB, home_text.HOME_NOTHING_PENDING)
        assert bot.deployment is not None
        bot.deployment.dispatcher.home.debounce = timedelta(hours=1)
        for topic in ("otters", "herons", "voles"):
            slack.slash_command(ALICE, CHANNEL, "/crew", f"run writer topic={topic}")
        for root in _roots(slack, 3):
            review_with_buttons(slack, str(root["ts"]))
        wait_until(
            lambda: not store.due_outbox() and all(r.message_ts for r in store.list_reviews()),
            what="every review announced",
        )
        assert _publishes(slack, BOB) == 1
        slack.open_home(BOB)
        home_says(slack, BOB, home_text.home_pending_count(3))
        assert _publishes(slack, BOB) == 2
        wait_until(lambda: not store.due_homes(), what="no refresh pending")
        assert store.claim_home(BOB, "test", timedelta(seconds=1)) is None


def test_slack_refusing_a_publish_holds_back_nothing(setup: tuple[Config, Store]) -> None:
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        slack.fail_next("views.publish", status=200, error="user_not_found", times=1)
        slack.open_home(BOB)
        wait_until(lambda: slack.calls("views.publish"), what="the refused publish")
        wait_until(lambda: not store.due_homes(), what="the refused publish given up")
        slack.slash_command(ALICE, CHANNEL, "/crew", "run writer topic=otters")
        (root,) = _roots(slack, 1)
        review_with_buttons(slack, str(root["ts"]))
        home_says(slack, BOB, home_text.home_pending_count(1))  # the next change publishes again
