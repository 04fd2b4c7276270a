"""What the bot refuses through Slack, and how it says so: signed traffic from the stand-in
to the real bot, crews on the scripted LLM, as in ``test_slack_e2e``.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from bot.slack import text
from crew_runtime.config import Config
from storage import Store
from tests.support.harness import ON_SQLITE
from tests.support.slack_harness import (
    ALICE,
    BOB,
    CHANNEL,
    MALLORY,
    buttons,
    modal_for,
    review_with_buttons,
    root_of,
    slack_and_bot,
    text_of,
    wait_until,
)

Json = dict[str, Any]

EDITORS = "S0EDITORS"

CONFIG = f"""
[crews.writer]
factory = "tests.support.crews:writer"
description = "Outline then article, both reviewed"
channel = "{CHANNEL}"
reviewers = ["{ALICE}", "{BOB}"]

[crews.open]
factory = "tests.support.crews:writer"
description = "Anyone in the channel may review"
channel = "{CHANNEL}"

[crews.grouped]
factory = "tests.support.crews:writer"
description = "A user group reviews"
channel = "{CHANNEL}"
reviewers = ["{EDITORS}"]
"""

pytestmark = [pytest.mark.slow, pytest.mark.bot_config(CONFIG)]


# crew, the Web API method its reviewer check calls, how that call fails
LOOKUPS: dict[str, tuple[str, str, dict[str, Any]]] = {
    # slack_sdk retries a 5xx twice, so three in a row make the lookup fail.
    "channel-http-500": ("open", "conversations.members", {"status": 500, "times": 3}),
    "channel-ok-false": ("open", "conversations.members", {"status": 200, "error": "fatal_error"}),
    "group-ok-false": ("grouped", "usergroups.users.list", {"status": 200, "error": "fatal_error"}),
}


@ON_SQLITE
@pytest.mark.parametrize("lookup", list(LOOKUPS))
def test_a_failed_membership_lookup_is_not_a_no(setup: tuple[Config, Store], lookup: str) -> None:
    config, store = setup
    crew, method, failure = LOOKUPS[lookup]
    with slack_and_bot(config, store) as (slack, _bot):
        slack.add_usergroup(EDITORS, [ALICE])
        slack.slash_command(BOB, CHANNEL, "/crew", f"run {crew} topic=otters")
        root = root_of(slack)
        review = review_with_buttons(slack, root["ts"])

        slack.fail_next(method, **failure)
        slack.click_button(ALICE, CHANNEL, review["ts"], "countersign:approve")
        told = wait_until(lambda: slack.ephemerals(ALICE), what="an answer to Alice's click")
        assert told[-1].text == text.CHECK_FAILED
        slack.fail_next(method, **failure)
        slack.reply_in_thread(ALICE, CHANNEL, root["ts"], "lgtm")
        told = wait_until(lambda: slack.ephemerals(ALICE)[1:], what="an answer to Alice's reply")
        assert told[-1].text == text.CHECK_FAILED
        (pending,) = store.list_reviews()
        assert pending.decision is None

        slack.click_button(ALICE, CHANNEL, review["ts"], "countersign:approve")
        decided = wait_until(
            lambda: store.get_review(pending.id).decision, what="Alice's second click to count"
        )
        assert decided.decided_by == ALICE
        assert len(slack.ephemerals(ALICE)) == 2


def test_text_no_database_can_store_is_refused_where_it_enters(
    setup: tuple[Config, Store],
) -> None:
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        slack.slash_command(ALICE, CHANNEL, "/crew", "run writer topic=a\x00b")
        told = wait_until(lambda: slack.ephemerals(ALICE), what="an answer to /crew run")
        assert "The input 'topic' contains U+0000" in told[-1].text
        assert store.list_runs() == []

        slack.slash_command(ALICE, CHANNEL, "/crew", "run writer topic=otters")
        root = root_of(slack)
        review = review_with_buttons(slack, root["ts"])
        slack.reply_in_thread(BOB, CHANNEL, root["ts"], "shorter,\x00please")
        told = wait_until(lambda: slack.ephemerals(BOB), what="an answer to Bob's reply")
        assert "The decision's text contains U+0000" in told[-1].text
        slack.click_button(ALICE, CHANNEL, review["ts"], "countersign:changes")
        view = modal_for(slack, ALICE)
        # JSON carries a lone surrogate as an escape (\ud800) where a form cannot.
        refused = slack.submit_view(ALICE, view["id"], {"text": "shorter,\ud800please"})
        assert "The decision's text contains U+D800" in refused.json["errors"]["text"]
        (pending,) = store.list_reviews()
        assert pending.decision is None


ELSEWHERE = "C0RANDOM"
CAROL = "UCAROL"


@ON_SQLITE
def test_crew_status_shows_a_run_only_in_its_channel_or_to_its_people(
    setup: tuple[Config, Store],
) -> None:
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        slack.add_user(CAROL, "carol")
        slack.add_channel(ELSEWHERE, "random", [ALICE, BOB, MALLORY, CAROL])
        slack.slash_command(MALLORY, CHANNEL, "/crew", "run writer topic=secret-otters")
        root = root_of(slack)
        review_with_buttons(slack, root["ts"])
        (run,) = store.list_runs()

        def status(user: str, channel: str, run_id: str) -> str:
            before = len(slack.ephemerals(user))
            slack.slash_command(user, channel, "/crew", f"status {run_id}")
            told = wait_until(lambda: slack.ephemerals(user)[before:], what=f"{user}'s answer")
            return text_of({"text": told[0].text, "blocks": told[0].blocks})

        never = "run_000000000000"
        hidden = status(CAROL, ELSEWHERE, run.id)
        assert hidden == status(CAROL, ELSEWHERE, never).replace(never, run.id)
        assert "secret-otters" not in hidden
        assert "secret-otters" in status(CAROL, CHANNEL, run.id)  # in the run's channel
        assert "secret-otters" in status(MALLORY, ELSEWHERE, run.id)  # who started it
        assert "secret-otters" in status(BOB, ELSEWHERE, run.id)  # a reviewer


@ON_SQLITE
def test_a_click_carrying_another_reviews_id_decides_nothing(
    setup: tuple[Config, Store],
) -> None:
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        slack.slash_command(ALICE, CHANNEL, "/crew", "run writer topic=otters")
        slack.slash_command(ALICE, CHANNEL, "/crew", "run writer topic=seals")

        def reviews() -> list[Json]:
            found = [m for m in slack.messages(CHANNEL) if buttons(m)]
            return found if len(found) == 2 else []

        first, second = wait_until(reviews, what="both runs' reviews")
        target = store.get_review(buttons(first)["countersign:approve"]["value"])
        # A real click on the other review's message (Edit only opens a modal), sent again
        # as Approve with the target's id: what Slack's client never sends.
        seen = slack.click_button(ALICE, CHANNEL, second["ts"], "countersign:edit")
        forged = copy.deepcopy(seen.payload)
        forged["actions"][0].update(action_id="countersign:approve", value=target.id)
        told_before = len(slack.ephemerals(ALICE))
        assert slack.send_interaction(forged).status == 200

        def decisions() -> list[Any]:
            return [r.decision for r in store.list_reviews(status=None)]

        wait_until(
            lambda: slack.ephemerals(ALICE)[told_before:] or any(decisions()),
            what="an answer to the forged click, or a decision",
        )
        assert decisions() == [None, None]
        told = slack.ephemerals(ALICE)[told_before:]
        assert told[0].text == text.NOT_THE_REVIEW_MESSAGE


@ON_SQLITE
def test_a_click_on_a_review_whose_posting_is_not_finished_is_taken(
    setup: tuple[Config, Store],
) -> None:
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        # The review is posted, then the root message's update fails: the dispatcher has not
        # recorded the review's message yet when the reviewer, quick, clicks.
        slack.fail_next("chat.update", status=500, times=5)
        slack.slash_command(ALICE, CHANNEL, "/crew", "run writer topic=otters")
        review = review_with_buttons(slack, root_of(slack)["ts"])
        review_id = buttons(review)["countersign:approve"]["value"]
        assert store.get_review(review_id).message_ts is None
        assert slack.click_button(ALICE, CHANNEL, review["ts"], "countersign:approve").ok
        decided = wait_until(lambda: store.get_review(review_id).decision, what="the decision")
        assert (decided.kind, decided.decided_by) == ("approve", ALICE)
