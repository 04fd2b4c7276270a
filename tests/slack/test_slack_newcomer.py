"""What a newcomer meets in a run's thread, end to end: signed Slack traffic from the
stand-in to the real bot, crews on the scripted model in the bot's worker pool.

Who decided is named readably (a mention in the thread; the name Slack gives, kept with the
decision, in what the model reads), a waiting run says what it waits for, a reply while
nothing waits is answered privately once, and an input the crew does not take is refused.
"""

from __future__ import annotations

from typing import Any

import pytest

from crew_runtime.config import Config
from crew_runtime.offline.drafts import parse_draft
from sandbox import StandInThread
from storage import InboxStore, RunStatus, Store
from tests.support.harness import ON_SQLITE
from tests.support.slack_harness import (
    ALICE,
    BOB,
    CHANNEL,
    review_with_buttons,
    root_of,
    slack_and_bot,
    text_of,
    wait_until,
)

Json = dict[str, Any]

CONFIG = f"""
[crews.writer]
factory = "tests.support.crews:writer"
inputs = ["topic"]
reviewers = ["{ALICE}", "{BOB}"]

[crews.research]
factory = "tests.support.crews:research"

[crews.payments]
factory = "tests.support.crews:payments"
reviewers = ["{ALICE}"]
"""

pytestmark = [pytest.mark.slow, ON_SQLITE, pytest.mark.bot_config(CONFIG)]


def root_says(slack: StandInThread, root_ts: str, words: str) -> None:
    wait_until(
        lambda: words in text_of(slack.thread(CHANNEL, root_ts)[0]),
        what=f"the root message to say {words!r}",
    )


def settled(store: Store, status: RunStatus) -> Any:
    return wait_until(
        lambda: next((r for r in store.list_runs() if r.status == status), None),
        what=f"a run to be {status.value}",
    )


def handled(store: Store) -> None:
    """Every request the bot recorded has been handled (what it says is said by then)."""
    wait_until(lambda: InboxStore(store).count_open() == 0, what="the inbox to be handled")


def test_a_denied_call_names_the_reviewer_to_the_model_by_the_name_slack_gives(
    setup: tuple[Config, Store],
) -> None:
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        slack.standin.workspace.users[ALICE].real_name = "Alice Liddell"
        slack.slash_command(ALICE, CHANNEL, "/crew", "run payments amount=1500")
        root = root_of(slack)
        review_with_buttons(slack, root["ts"])
        root_says(slack, root["ts"], "Waiting for approval")
        slack.reply_in_thread(ALICE, CHANNEL, root["ts"], "deny: too much")
        run = settled(store, RunStatus.SUCCEEDED)
        (note,) = parse_draft(run.output or "").notes
        assert "pay was denied by reviewer Alice Liddell: too much" in note
        (review,) = store.list_reviews(status=None, run_id=run.id)
        assert review.decision is not None
        assert review.decision.details == {"by_name": "Alice Liddell", "digest": review.digest}


def test_a_rejected_run_names_who_rejected_it_with_a_mention(
    setup: tuple[Config, Store],
) -> None:
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        slack.slash_command(ALICE, CHANNEL, "/crew", "run writer topic=otters")
        root = root_of(slack)
        review_with_buttons(slack, root["ts"])
        root_says(slack, root["ts"], "Waiting for review")
        slack.reply_in_thread(BOB, CHANNEL, root["ts"], "reject")
        settled(store, RunStatus.REJECTED)
        result = wait_until(
            lambda: next(
                (m for m in slack.thread(CHANNEL, root["ts"]) if "stopped" in text_of(m)), None
            ),
            what="the run's result in its thread",
        )
        shown = text_of(result)
        assert f"<@{BOB}> rejected it" in shown
        assert shown.replace(f"<@{BOB}>", "").count(BOB) == 0  # no raw id


def test_a_run_waiting_for_an_answer_says_so(setup: tuple[Config, Store]) -> None:
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        slack.slash_command(BOB, CHANNEL, "/crew", 'run research topic="sea otters"')
        root = root_of(slack)
        review_with_buttons(slack, root["ts"])
        root_says(slack, root["ts"], "Waiting for an answer")
        assert "Waiting for review" not in text_of(slack.thread(CHANNEL, root["ts"])[0])


def test_a_reply_while_nothing_waits_is_told_so_once_and_only_in_a_runs_thread(
    setup: tuple[Config, Store],
) -> None:
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        slack.slash_command(ALICE, CHANNEL, "/crew", "run writer topic=otters")
        root = root_of(slack)
        first = review_with_buttons(slack, root["ts"])
        slack.reply_in_thread(ALICE, CHANNEL, root["ts"], "lgtm")
        review_with_buttons(slack, root["ts"], after=first["ts"])
        slack.reply_in_thread(ALICE, CHANNEL, root["ts"], "approve")
        settled(store, RunStatus.SUCCEEDED)
        handled(store)
        before = {user: len(slack.ephemerals(user)) for user in (ALICE, BOB)}

        # A reply that mentions the bot arrives twice (app_mention and message): one note.
        slack.mention_bot(BOB, CHANNEL, "thanks, nice article", thread_ts=root["ts"])
        other = slack.send_message(BOB, CHANNEL, "lunch?")
        assert other.ok
        chatter = next(m for m in slack.messages(CHANNEL) if m.get("text") == "lunch?")
        slack.reply_in_thread(ALICE, CHANNEL, chatter["ts"], "yes")  # not a run's thread
        handled(store)

        told = slack.ephemerals(BOB)[before[BOB] :]
        assert [e.thread_ts for e in told] == [root["ts"]]
        assert "Nothing in this run waits for an answer now (it has finished)" in told[0].text
        assert len(slack.ephemerals(ALICE)) == before[ALICE]


def test_an_input_the_crew_does_not_take_is_refused_naming_those_it_takes(
    setup: tuple[Config, Store],
) -> None:
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        answer = slack.slash_command(ALICE, CHANNEL, "/crew", "run writer topic=otters colour=blue")
        assert answer.status == 200
        said = wait_until(lambda: slack.ephemerals(ALICE), what="the answer to the command")
        assert "Crew `writer` does not take `colour`. It takes topic (required)" in said[-1].text
        assert store.list_runs() == []
        # A crew that names no inputs takes any.
        slack.slash_command(BOB, CHANNEL, "/crew", "run research topic=otters colour=blue")
        assert settled(store, RunStatus.WAITING).inputs == {"topic": "otters", "colour": "blue"}
