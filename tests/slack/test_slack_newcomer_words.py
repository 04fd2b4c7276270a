"""What a newcomer meets in a run's thread beyond the tour, through the real bot and the
Slack stand-in (signed HTTP, crews on the scripted model): a long draft edited in Slack is
approved whole, private notices after a click or a reply come in the run's thread, and a
decision made in a modal leaves a log line as a click does."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from bot.slack import text
from crew_runtime.config import Config
from storage import RunStatus, Store
from tests.support.harness import ON_SQLITE
from tests.support.slack_harness import (
    ALICE,
    BOB,
    CHANNEL,
    MALLORY,
    modal_for,
    review_with_buttons,
    root_of,
    slack_and_bot,
    text_of,
    wait_until,
)

Json = dict[str, Any]

CONFIG = f"""
[crews.longform]
factory = "tests.support.crews:longform"
description = "One long draft"
channel = "{CHANNEL}"
reviewers = ["{ALICE}", "{BOB}"]

[crews.pair]
factory = "tests.support.crews:writer"
description = "Two approvals per draft"
channel = "{CHANNEL}"
reviewers = ["{ALICE}", "{BOB}"]
approvals_required = 2
inputs = ["topic"]
"""

pytestmark = [pytest.mark.slow, pytest.mark.bot_config(CONFIG)]


@ON_SQLITE
def test_a_long_draft_edited_in_slack_is_approved_whole(
    setup: tuple[Config, Store], caplog: pytest.LogCaptureFixture
) -> None:
    config, store = setup
    caplog.set_level(logging.INFO, logger="bot.slack")
    with slack_and_bot(config, store) as (slack, _bot):
        slack.slash_command(ALICE, CHANNEL, "/crew", "run longform topic=otters length=11000")
        root = root_of(slack)
        review = review_with_buttons(slack, root["ts"])
        (pending,) = store.list_reviews()
        assert len(pending.prompt) > 10_000
        slack.click_button(ALICE, CHANNEL, review["ts"], "countersign:edit")
        view = modal_for(slack, ALICE)
        boxes = [b for b in view["blocks"] if b["type"] == "input"]
        assert len(boxes) >= 4
        shown = [b["element"]["initial_value"] for b in boxes]
        assert all(len(part) <= 3000 for part in shown)
        last = boxes[-1]["block_id"]
        edited = shown[-1] + "\n\nA closing paragraph by Alice."
        assert slack.submit_view(ALICE, view["id"], {last: edited}).status == 200
        run = wait_until(
            lambda: next((r for r in store.list_runs() if r.status is RunStatus.SUCCEEDED), None),
            what="the run to succeed",
        )
        assert run.output == pending.prompt + "\n\nA closing paragraph by Alice."
    assert f"review {pending.id}: edit by {ALICE}" in caplog.text


@ON_SQLITE
def test_private_notices_after_a_click_or_reply_come_in_the_runs_thread(
    setup: tuple[Config, Store],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config, store = setup
    caplog.set_level(logging.INFO)
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-as-serve-has-it")  # bolt reads it too
    with slack_and_bot(config, store) as (slack, _bot):
        slack.slash_command(BOB, CHANNEL, "/crew", "run pair nope=1")  # a mistake
        wait_until(lambda: slack.ephemerals(BOB), what="Bob told his mistake")
        slack.slash_command(MALLORY, CHANNEL, "/crew", "run pair topic=otters")
        root = root_of(slack)
        review = review_with_buttons(slack, root["ts"])
        started = len(slack.ephemerals(MALLORY))  # "Starting `pair`…", in the channel

        slack.click_button(ALICE, CHANNEL, review["ts"], "countersign:approve")
        counted = wait_until(lambda: slack.ephemerals(ALICE), what="Alice's approval counted")
        assert "1 of 2" in counted[-1].text
        slack.click_button(MALLORY, CHANNEL, review["ts"], "countersign:approve")
        refused = wait_until(lambda: slack.ephemerals(MALLORY)[started:], what="Mallory refused")
        assert refused[-1].text == text.NOT_A_REVIEWER
        slack.reply_in_thread(MALLORY, CHANNEL, root["ts"], "lgtm")
        again = wait_until(
            lambda: slack.ephemerals(MALLORY)[started + 1 :], what="Mallory's reply refused"
        )
        assert again[-1].text == text.NOT_A_REVIEWER
        notices = [*counted, *refused[-1:], *again]
        assert [n.thread_ts for n in notices] == [root["ts"]] * len(notices)
    assert "will be unused" not in caplog.text  # slack_bolt's warning at every start
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert "run of pair refused" in caplog.text


@ON_SQLITE
def test_a_long_revision_shows_what_changed_before_its_uploaded_draft(
    setup: tuple[Config, Store],
) -> None:
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        slack.slash_command(ALICE, CHANNEL, "/crew", "run longform topic=otters length=20000")
        root = root_of(slack)
        first = review_with_buttons(slack, root["ts"])
        slack.click_button(ALICE, CHANNEL, first["ts"], "countersign:changes")
        view = modal_for(slack, ALICE)
        slack.submit_view(ALICE, view["id"], {"text": "name the otters"})
        second = review_with_buttons(slack, root["ts"], after=first["ts"])
        later = [m for m in slack.thread(CHANNEL, root["ts"]) if m["ts"] > first["ts"]]
        (changes,) = [m for m in later if "What changed since round 1" in text_of(m)]
        assert "~" in text_of(changes) and "*" in text_of(changes)  # the change itself
        files = [f for f in slack.files() if f.shared_in and f.shared_in[0][1] > first["ts"]]
        (revised,) = files
        assert changes["ts"] < revised.shared_in[0][1] <= second["ts"]
