"""A run's reviewer named in its inputs, through Slack: ``/crew run deal approver=@bob`` (the
stand-in escapes the command as Slack does with the manifest's ``should_escape``) makes Bob
the one who may decide that run's reviews, is reminded, and finds them in ``/crew pending``."""

from __future__ import annotations

import pytest

from crew_runtime.config import Config
from storage import RunStatus, Store
from tests.support.slack_harness import (
    ALICE,
    BOB,
    CHANNEL,
    MALLORY,
    answer_to,
    review_with_buttons,
    root_of,
    slack_and_bot,
    text_of,
    wait_until,
)

CONFIG = f"""
[crews.deal]
factory = "tests.support.crews:writer"
channel = "{CHANNEL}"
inputs = ["topic", "approver"]
reviewers_from_input = "approver"
remind_after = "1s"

[crews.notes]
factory = "tests.support.crews:writer"
channel = "{CHANNEL}"
"""

pytestmark = [pytest.mark.slow, pytest.mark.bot_config(CONFIG)]


def test_the_named_reviewer_alone_decides_is_reminded_and_finds_the_review(
    setup: tuple[Config, Store],
) -> None:
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        slack.add_user("UROBOT", "robot", is_bot=True)
        slack.add_user("UGONE", "gone", deleted=True)
        refused = {
            "approver=bob": "mention one person there",
            "approver=@nobody": "mention one person there",  # no such handle: plain text
            "approver=<@UBOB>": "mention one person there",  # typed markup arrives escaped
            'approver="@bob and @mallory"': "mention one person there",
            "approver=@robot": "<@UROBOT> cannot review this run: that is a bot",
            "approver=@gone": "<@UGONE> cannot review this run: their account is deactivated",
        }
        for given, says in refused.items():
            told = answer_to(slack, ALICE, f"run deal topic=otters {given}")
            assert says in told and "Nothing was started" in told, told
        assert "needs `approver`" in answer_to(slack, ALICE, "run deal topic=otters")
        assert store.list_runs() == []

        assert "Starting" in answer_to(slack, ALICE, "run deal topic=otters approver=@bob")
        [run] = store.list_runs()
        assert run.inputs == {"topic": "otters", "approver": BOB}
        root = root_of(slack)
        assert f"*approver*: <@{BOB}>" in text_of(root)  # Slack shows the name, pings Bob
        outline = review_with_buttons(slack, root["ts"])

        # Alice started it and is in the channel, but Bob is its reviewer.
        slack.click_button(ALICE, CHANNEL, outline["ts"], "countersign:approve")
        wait_until(
            lambda: [e for e in slack.ephemerals(ALICE) if "not a reviewer" in e.text],
            what="Alice told she is not the reviewer",
        )
        assert store.list_reviews(run_id=run.id)[0].decision is None
        assert answer_to(slack, MALLORY, "pending").startswith("Nothing is waiting")
        assert answer_to(slack, BOB, "pending") == "1 review waiting"
        before = len(slack.ephemerals(BOB))
        slack.slash_command(BOB, CHANNEL, "/crew", f"status {run.id}")
        status = wait_until(lambda: slack.ephemerals(BOB)[before:], what="Bob's /crew status")
        assert f"*approver*: <@{BOB}>" in str(status[0].blocks)
        reminder = wait_until(
            lambda: next((m for m in slack.thread(CHANNEL, root["ts"]) if "⏰" in text_of(m)), 0),
            what="a reminder",
        )
        assert f"<@{BOB}>" in text_of(reminder) and f"<@{ALICE}>" not in text_of(reminder)

        slack.click_button(BOB, CHANNEL, outline["ts"], "countersign:approve")
        article = review_with_buttons(slack, root["ts"], after=outline["ts"])
        slack.click_button(BOB, CHANNEL, article["ts"], "countersign:approve")
        done = wait_until(
            lambda: (r := store.get_run(run.id)).status.is_final and r, what="the run to end"
        )
        assert done.status == RunStatus.SUCCEEDED


def test_inputs_read_as_typed_when_slack_sends_markup(setup: tuple[Config, Store]) -> None:
    """Mentions, channels and links arrive as Slack markup; a crew gets them as typed."""
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        typed = "run notes topic=https://x.io/a?b=1&c=2 where=#writing who=@mallory at=a<b>"
        assert "Starting" in answer_to(slack, ALICE, typed)
        [run] = store.list_runs()
        assert run.inputs == {
            "topic": "https://x.io/a?b=1&c=2",
            "where": "#writing",
            "who": "@mallory",
            "at": "a<b>",
        }
