"""Outbox rows that take several Slack calls, delivered through faults without a duplicate.

The real bot against the stand-in, with real crews (``longform``: a two-part draft at
8,000 characters, a draft uploaded as a file at 30,000). Each fault is injected at the
network boundary: a call that fails, or one that Slack applies and whose answer is then
lost (a 500, a dropped connection). What is counted is what the channel shows.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from bot.slack import block_text as t
from crew_runtime.config import Config
from sandbox import StandInThread
from sandbox.calls import DROP_CONNECTION
from storage import ReviewKind, RunStatus, Store
from tests.support.slack_harness import (
    ALICE,
    CHANNEL,
    buttons,
    slack_and_bot,
    wait_until,
)

Json = dict[str, Any]

CONFIG = """
[crews.longform]
factory = "tests.support.crews:longform"
description = "One long draft"
"""

pytestmark = [pytest.mark.slow, pytest.mark.bot_config(CONFIG)]
TWO_PARTS = "run longform topic=otters length=8000"
AS_A_FILE = "run longform topic=otters"  # 30,000 characters
PART_1 = t.review_fallback("longform", ReviewKind.TASK_REVIEW)  # its fallback text
PART_2 = t.part_label(2, 2)


def has_buttons(params: Json) -> bool:
    return "countersign:approve" in json.dumps(params.get("blocks"))


def with_text(words: str) -> Callable[[Json], bool]:
    return lambda params: params.get("text") == words


def bot_roots(slack: StandInThread) -> list[Json]:
    return [
        m
        for m in slack.messages(CHANNEL)
        if m.get("bot_id") and m.get("thread_ts") in (None, m["ts"])
    ]


def start(slack: StandInThread, store: Store, command: str) -> str:
    """Start a run with ``/crew``; the ts of its root message, once it is recorded."""
    slack.slash_command(ALICE, CHANNEL, "/crew", command)
    run = wait_until(
        lambda: next((r for r in store.list_runs() if r.thread_ts), None),
        what="the run's root message to be recorded",
    )
    assert run.thread_ts is not None
    return run.thread_ts


def review_out(store: Store) -> None:
    """Wait until the review's row went out whole (its message is recorded with the send)."""
    wait_until(
        lambda: [r for r in store.list_reviews() if r.message_ts],
        what="the review's message to be recorded",
    )


def in_thread(slack: StandInThread, root_ts: str, fallback: str) -> list[Json]:
    """The replies in the thread whose notification text is ``fallback``."""
    replies = slack.thread(CHANNEL, root_ts)[1:]
    return [m for m in replies if m.get("text") == fallback]


def test_a_two_part_draft_whose_second_post_fails_shows_each_part_once(
    setup: tuple[Config, Store],
) -> None:
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        slack.fail_next(
            "chat.postMessage", status=200, error="fatal_error", where=with_text(PART_2)
        )
        root_ts = start(slack, store, TWO_PARTS)
        review_out(store)
        assert len(in_thread(slack, root_ts, PART_1)) == 1
        assert len(in_thread(slack, root_ts, PART_2)) == 1
        assert len([m for m in slack.thread(CHANNEL, root_ts) if buttons(m)]) == 1
        assert [c.error for c in slack.calls("chat.postMessage") if not c.ok] == ["fatal_error"]
        assert len(slack.calls("conversations.replies")) == 1  # part 2 was looked for, once


def test_a_result_whose_root_update_fails_is_posted_once(setup: tuple[Config, Store]) -> None:
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        root_ts = start(slack, store, TWO_PARTS)
        review_out(store)
        finished = t.run_fallback("longform", RunStatus.SUCCEEDED)
        slack.fail_next("chat.update", status=200, error="fatal_error", where=with_text(finished))
        (review,) = [m for m in slack.thread(CHANNEL, root_ts) if buttons(m)]
        slack.click_button(ALICE, CHANNEL, review["ts"], "countersign:approve")
        wait_until(
            lambda: slack.thread(CHANNEL, root_ts)[0]["text"] == finished,
            what="the root message to say the run succeeded",
        )
        failed = [c for c in slack.calls("chat.update") if not c.ok]
        assert [c.error for c in failed] == ["fatal_error"]
        for part in (1, 2):
            shown = in_thread(slack, root_ts, finished if part == 1 else t.result_part(2, 2))
            assert len(shown) == 1, f"result part {part} shown {len(shown)} times"


def test_a_long_draft_whose_summary_post_fails_is_uploaded_once(
    setup: tuple[Config, Store],
) -> None:
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        slack.fail_next("chat.postMessage", status=200, error="fatal_error", where=has_buttons)
        root_ts = start(slack, store, AS_A_FILE)
        review_out(store)
        assert len(slack.files()) == 1
        thread = slack.thread(CHANNEL, root_ts)
        assert len([m for m in thread if m.get("files")]) == 1
        assert len([m for m in thread if buttons(m)]) == 1
        assert [c.error for c in slack.calls("chat.postMessage") if not c.ok] == ["fatal_error"]


# What is lost: (the method, how its answer is lost, which call, where the retry looks).
LOST = {
    "root message": (
        "chat.postMessage",
        500,
        lambda p: not p.get("thread_ts"),
        "conversations.history",
    ),
    "thread part": (
        "chat.postMessage",
        DROP_CONNECTION,
        with_text(PART_2),
        "conversations.replies",
    ),
    "upload completion": ("files.completeUploadExternal", 500, None, "files.info"),
}


@pytest.mark.parametrize("lost", list(LOST))
def test_a_post_applied_whose_answer_was_lost_is_not_made_again(
    setup: tuple[Config, Store], lost: str
) -> None:
    config, store = setup
    method, status, where, lookup = LOST[lost]
    with slack_and_bot(config, store) as (slack, _bot):
        slack.fail_next(method, status=status, after_applying=True, where=where)
        root_ts = start(slack, store, AS_A_FILE if method.startswith("files.") else TWO_PARTS)
        review_out(store)
        (lost_call,) = [c for c in slack.calls(method) if c.applied]
        assert len(bot_roots(slack)) == 1
        thread = slack.thread(CHANNEL, root_ts)
        assert len([m for m in thread if buttons(m)]) == 1
        if method.startswith("files."):
            assert len(slack.files()) == 1
            assert len([m for m in thread if m.get("files")]) == 1
        else:
            assert len(in_thread(slack, root_ts, PART_1)) == 1
            assert len(in_thread(slack, root_ts, PART_2)) == 1
        assert lost_call.error in ("http_500", "dropped")
        assert len(slack.calls(lookup)) == 1


def test_a_post_slack_refused_is_made_again_without_looking_for_it(
    setup: tuple[Config, Store],
) -> None:
    """Rate limited past the client's own retries: Slack posted nothing, so the retry
    posts again at once instead of spending a rate-limited lookup."""
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        slack.fail_next("chat.postMessage", retry_after=0, times=6, where=with_text(PART_2))
        root_ts = start(slack, store, TWO_PARTS)
        review_out(store)
        assert len(in_thread(slack, root_ts, PART_1)) == 1
        assert len(in_thread(slack, root_ts, PART_2)) == 1
        refused = [c for c in slack.calls("chat.postMessage") if not c.ok]
        assert [c.status for c in refused] == [429] * 6
        assert slack.calls("conversations.replies") == []
