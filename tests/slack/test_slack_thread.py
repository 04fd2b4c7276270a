"""The run's thread through Slack: one progress message per run, edited as the crew moves; a
revised draft shows what changed since the round before; every review message carries
metadata naming its run and review; ``/crew pending`` links to where each review waits; the
audit trail has what an edit changed."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pytest
from sqlalchemy import func, select

from crew_runtime.config import Config
from sandbox import StandInThread
from storage import OutboxKind, RunStatus, Store
from storage.schema import outbox
from tests.support.slack_harness import (
    ALICE,
    BOB,
    CHANNEL,
    buttons,
    modal_for,
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
channel = "{CHANNEL}"
reviewers = ["{ALICE}", "{BOB}"]

[crews.quiet]
factory = "tests.support.crews:writer"
channel = "{CHANNEL}"
reviewers = ["{ALICE}"]
progress = false

[crews.loop]
factory = "tests.support.crews:long_loop"
channel = "{CHANNEL}"
reviewers = ["{ALICE}"]
"""

pytestmark = [pytest.mark.slow, pytest.mark.bot_config(CONFIG)]
SEARCHES = 30


def _pending(slack: StandInThread, user: str) -> Json:
    """The blocks ``user`` is shown privately after typing ``/crew pending``."""
    before = len(slack.ephemerals(user))
    slack.slash_command(user, CHANNEL, "/crew", "pending")
    told = wait_until(lambda: slack.ephemerals(user)[before:], what="the answer to pending")
    return {"text": told[0].text, "blocks": told[0].blocks}


def _decided(slack: StandInThread, root_ts: str, ts: str) -> Json:
    return wait_until(
        lambda: next(
            (m for m in slack.thread(CHANNEL, root_ts) if m["ts"] == ts and not buttons(m)),
            None,
        ),
        what=f"review message {ts} to lose its buttons",
    )


def test_a_revision_shows_its_changes_messages_carry_metadata_pending_links_audit_diffs(
    setup: tuple[Config, Store],
) -> None:
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        slack.slash_command(ALICE, CHANNEL, "/crew", "run writer topic=otters")
        root = root_of(slack)
        first = review_with_buttons(slack, root["ts"])
        (review,) = store.list_reviews()
        assert "What changed" not in text_of(first)  # the first round has nothing before it

        # /crew pending links to the review's message, as Slack's chat.getPermalink says
        # (once the dispatcher recorded where it went, its last step: until then, the thread).
        wait_until(lambda: store.get_review(review.id).message_ts, what="the message recorded")
        listed = _pending(slack, BOB)
        link = f"https://sandbox.slack.com/archives/{CHANNEL}/p{first['ts'].replace('.', '')}"
        assert f"<{link}?thread_ts={root['ts']}&cid={CHANNEL}|open the thread>" in text_of(listed)

        slack.click_button(ALICE, CHANNEL, first["ts"], "countersign:changes")
        view = modal_for(slack, ALICE)
        assert slack.submit_view(ALICE, view["id"], {"text": "make it shorter"}).status == 200

        # The revised draft: first what changed since round 1, then the draft with buttons.
        second = review_with_buttons(slack, root["ts"], after=first["ts"])
        thread = slack.thread(CHANNEL, root["ts"])
        between = [m for m in thread if float(first["ts"]) < float(m["ts"]) < float(second["ts"])]
        (changes,) = [m for m in between if "What changed since round 1" in text_of(m)]
        shown = text_of(changes)
        assert "~Outline~" not in shown and "~v0" in shown and "*v1" in shown
        revision = next(r for r in store.list_reviews() if r.id != review.id)

        # Every message of a review says so in its metadata: the run, the review, the step.
        for message, of in ((first, review.id), (changes, revision.id), (second, revision.id)):
            metadata = message["metadata"]
            assert metadata["event_type"] == "countersign_review"
            assert metadata["event_payload"]["run_id"] == review.run_id
            assert metadata["event_payload"]["review_id"] == of
        kept = _decided(slack, root["ts"], first["ts"])  # updated: its metadata stays
        assert kept["metadata"]["event_payload"]["review_id"] == review.id

        # Bob edits and approves; the audit trail has what his edit changed.
        slack.click_button(BOB, CHANNEL, second["ts"], "countersign:edit")
        edit_view = modal_for(slack, BOB)
        (field,) = [b for b in edit_view["blocks"] if b.get("block_id") == "text"]
        edited = field["element"]["initial_value"].replace("Outline v1", "Outline, edited,", 1)
        assert slack.submit_view(BOB, edit_view["id"], {"text": edited}).status == 200
        article = review_with_buttons(slack, root["ts"], after=second["ts"])
        slack.click_button(ALICE, CHANNEL, article["ts"], "countersign:approve")
        wait_until(
            lambda: store.get_run(review.run_id).status == RunStatus.SUCCEEDED,
            what="the run to succeed",
        )
        records = store.audit_records(since=datetime(2000, 1, 1), until=datetime(2100, 1, 1))
        diffs = {r.decision: r.edit_diff for r in records}
        assert (diffs["edit"] or "").startswith('[-Outline v1-]{+Outline, edited,+} on "Outline')
        assert diffs["changes"] is None and diffs["approve"] is None


def progress_messages(slack: StandInThread, root_ts: str) -> list[Json]:
    return [m for m in slack.thread(CHANNEL, root_ts) if "*Progress*" in text_of(m)]


def progress_shows(slack: StandInThread, root_ts: str, *words: str) -> Json:
    def shown() -> Json | None:
        found = progress_messages(slack, root_ts)
        return next((m for m in found if all(w in text_of(m) for w in words)), None)

    return wait_until(shown, what=f"the progress message to show {words}")


def _tool_calls(text: str) -> int:
    """The tool calls a version of the progress message counts (0 before the first)."""
    for line in text.splitlines():
        if "tool call" in line:
            return int(line.rsplit("· ", 1)[1].split()[0].replace(",", ""))
    return 0


def test_one_progress_message_follows_the_crew_with_few_edits_however_many_calls(
    setup: tuple[Config, Store],
) -> None:
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        slack.slash_command(ALICE, CHANNEL, "/crew", f"run loop topic=otters turns={SEARCHES}")
        root = root_of(slack)
        question = review_with_buttons(slack, root["ts"])
        # Paused on the question: the message says so, and who is to answer.
        shown = progress_shows(slack, root["ts"], "Waiting for an answer", f"<@{ALICE}>")
        assert "⚙️ *Research otters* · Researcher" in text_of(shown)
        assert "Edit the report" not in text_of(shown)  # the second task has not started

        slack.reply_in_thread(ALICE, CHANNEL, root["ts"], "casual, please")
        final = review_with_buttons(slack, root["ts"], after=question["ts"])
        progress_shows(slack, root["ts"], "✅ *Research otters*", "⚙️ *Edit the report")
        slack.click_button(ALICE, CHANNEL, final["ts"], "countersign:approve")
        (run,) = store.list_runs()
        wait_until(lambda: store.get_run(run.id).status == RunStatus.SUCCEEDED, what="success")
        done = progress_shows(slack, root["ts"], "Succeeded", "✅ *Edit the report")
        assert "Waiting" not in text_of(done)

        # One message, made once; its edits far fewer than the calls, in the crew's order.
        wait_until(lambda: not _unsent_progress(store, run.id), what="the last progress row")
        (message,) = progress_messages(slack, root["ts"])
        posts = [
            c
            for c in slack.calls("chat.postMessage")
            if c.ok and "*Progress*" in json.dumps(c.params.get("blocks"))
        ]
        assert len(posts) == 1
        edits = [c for c in slack.calls("chat.update") if c.params.get("ts") == message["ts"]]
        # The searches, ask_human (asking, then again on resume, answered) and publish.
        calls = SEARCHES + 3
        assert len(edits) < calls / 2
        counts = [_tool_calls(text_of({"blocks": c.params["blocks"]})) for c in edits]
        assert counts == sorted(counts) and counts[-1] == calls
        with store.engine.connect() as conn:
            rows = conn.execute(
                select(func.count()).where(
                    outbox.c.run_id == run.id, outbox.c.kind == OutboxKind.RUN_PROGRESS
                )
            ).scalar()
        assert rows == len(posts) + len(edits)  # every row one post or edit, none lost


def _unsent_progress(store: Store, run_id: str) -> int:
    with store.engine.connect() as conn:
        return int(
            conn.execute(
                select(func.count()).where(
                    outbox.c.run_id == run_id,
                    outbox.c.kind == OutboxKind.RUN_PROGRESS,
                    outbox.c.sent_at.is_(None),
                )
            ).scalar_one()
        )


def test_a_crew_with_progress_off_has_no_progress_message(setup: tuple[Config, Store]) -> None:
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        slack.slash_command(ALICE, CHANNEL, "/crew", "run quiet topic=otters")
        root = root_of(slack)
        review = review_with_buttons(slack, root["ts"])
        slack.click_button(ALICE, CHANNEL, review["ts"], "countersign:approve")
        review_with_buttons(slack, root["ts"], after=review["ts"])
        assert progress_messages(slack, root["ts"]) == []
        assert store.load_progress(store.list_runs()[0].id) is None
