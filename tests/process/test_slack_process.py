"""``countersign serve`` as a real process: killed with a review pending, started again.

Nothing about a pending review lives in the bot's memory: the thread, the review
and its message are in the database, so a new process takes the click.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bot.slack import block_text as t
from crew_runtime.offline.drafts import parse_draft
from sandbox import StandInThread
from sandbox.calls import NO_ANSWER
from storage import ReviewKind, RunStatus, Store
from tests.support.harness import ON_SQLITE
from tests.support.processes import bot_env
from tests.support.processes import serve as _serve
from tests.support.processes import worker as _worker
from tests.support.slack_harness import (
    ALICE,
    CHANNEL,
    buttons,
    free_port,
    modal_for,
    new_standin,
    text_of,
    wait_until,
)
from tests.support.zygote import Zygote

pytestmark = pytest.mark.slow

Json = dict[str, Any]

CONFIG = f"""
[crews.writer]
factory = "tests.support.crews:writer"
description = "Outline then article, both reviewed"
channel = "{CHANNEL}"

[flows.article]
factory = "tests.support.crews:article_flow"
description = "A CrewAI Flow reviewed with @human_feedback"

[crews.longform]
factory = "tests.support.crews:longform"
description = "One long draft"
"""


def _start_and_wait_for_review(slack: StandInThread, command: str) -> tuple[Json, Json]:
    """``/crew COMMAND``, then the run's root message and its first review."""
    slack.slash_command(ALICE, CHANNEL, "/crew", command)
    root = wait_until(
        lambda: next((m for m in slack.messages(CHANNEL) if m.get("bot_id")), None),
        what="the root message",
    )
    review = wait_until(
        lambda: next((m for m in slack.thread(CHANNEL, root["ts"]) if buttons(m)), None),
        what="the first review",
    )
    return root, review


def test_bot_killed_with_a_review_pending_resumes_on_the_next_click(
    tmp_path: Path, db_url: str
) -> None:
    (tmp_path / "countersign.toml").write_text(CONFIG)
    store = Store.open(db_url)
    port = free_port()
    standin = new_standin(bot_endpoint=f"http://127.0.0.1:{port}/slack/events")
    with StandInThread(standin) as slack:
        env = bot_env(tmp_path, db_url, standin.bot_token, slack.api_url)
        with _worker(env):
            first = _serve(env, port)
            try:
                root, review = _start_and_wait_for_review(slack, "run writer topic=otters")
            finally:
                os.kill(first.pid, signal.SIGKILL)
                first.communicate(timeout=30)

            second = _serve(env, port)
            try:
                click = slack.click_button(ALICE, CHANNEL, review["ts"], "countersign:approve")
                assert click.status == 200
                article = wait_until(
                    lambda: next(
                        (
                            m
                            for m in slack.thread(CHANNEL, root["ts"])
                            if buttons(m) and "Article v0" in text_of(m)
                        ),
                        None,
                    ),
                    what="the article review after the restart",
                )
                assert parse_draft(
                    next(line for line in text_of(article).splitlines() if "Article v0" in line)
                ).context
                slack.click_button(ALICE, CHANNEL, article["ts"], "countersign:approve")
                wait_until(
                    lambda: store.list_runs()[0].status == RunStatus.SUCCEEDED,
                    what="the run to succeed",
                )
            finally:
                second.send_signal(signal.SIGTERM)
                out, _ = second.communicate(timeout=60)
            assert second.returncode == 0, out
    store.close()


@ON_SQLITE
def test_a_flow_paused_under_one_bot_is_routed_by_a_click_under_another(
    tmp_path: Path, db_url: str
) -> None:
    (tmp_path / "countersign.toml").write_text(CONFIG)
    store = Store.open(db_url)
    port = free_port()
    standin = new_standin(bot_endpoint=f"http://127.0.0.1:{port}/slack/events")
    with StandInThread(standin) as slack:
        env = bot_env(tmp_path, db_url, standin.bot_token, slack.api_url)
        with _worker(env):
            first = _serve(env, port)
            try:
                _root, review = _start_and_wait_for_review(slack, "run article topic=otters")
            finally:
                first.send_signal(signal.SIGTERM)
                first.communicate(timeout=60)
            second = _serve(env, port)
            try:
                slack.click_button(ALICE, CHANNEL, review["ts"], "countersign:outcome:0")
                form = modal_for(slack, ALICE)  # the outcome "approved", its feedback box
                assert slack.submit_view(ALICE, form["id"], {"text": ""}).status == 200
                wait_until(
                    lambda: store.list_runs()[0].status == RunStatus.SUCCEEDED,
                    what="the flow to finish",
                )
                assert store.list_runs()[0].output == "PUBLISHED: Draft on otters (round 0)"
            finally:
                second.send_signal(signal.SIGTERM)
                out, _ = second.communicate(timeout=60)
            assert second.returncode == 0, out
    store.close()


def test_bot_killed_between_a_post_and_recording_it_does_not_post_it_again(
    tmp_path: Path, db_url: str
) -> None:
    """Slack stores the second part of a draft and the bot dies before the answer comes:
    the next bot finds that part by its metadata and goes on from there."""
    (tmp_path / "countersign.toml").write_text(CONFIG)
    store = Store.open(db_url)
    port = free_port()
    standin = new_standin(bot_endpoint=f"http://127.0.0.1:{port}/slack/events")
    part_1 = t.review_fallback("longform", ReviewKind.TASK_REVIEW)
    part_2 = t.part_label(2, 2)
    with StandInThread(standin) as slack:
        env = bot_env(tmp_path, db_url, standin.bot_token, slack.api_url)
        with _worker(env):
            slack.fail_next(
                "chat.postMessage",
                status=NO_ANSWER,
                after_applying=True,
                where=lambda params: params.get("text") == part_2,
            )
            first = _serve(env, port)
            try:
                slack.slash_command(
                    ALICE, CHANNEL, "/crew", "run longform topic=otters length=8000"
                )
                wait_until(
                    lambda: [c for c in slack.calls("chat.postMessage") if c.applied],
                    what="Slack to store part 2 and keep its answer",
                )
            finally:
                os.kill(first.pid, signal.SIGKILL)
                first.communicate(timeout=30)

            second = _serve(env, port)
            try:
                review = wait_until(
                    lambda: next((r for r in store.list_reviews() if r.message_ts), None),
                    what="the review's row to go out under the second bot",
                )
            finally:
                second.send_signal(signal.SIGTERM)
                out, _ = second.communicate(timeout=60)
            assert second.returncode == 0, out
            (run,) = store.list_runs()
            assert run.thread_ts is not None
            replies = slack.thread(CHANNEL, run.thread_ts)[1:]
            assert [m["text"] for m in replies if m["text"] in (part_1, part_2)] == [part_1, part_2]
            (with_buttons,) = [m for m in replies if buttons(m)]
            assert with_buttons["ts"] == review.message_ts
            assert len(slack.calls("conversations.replies")) == 1
    store.close()


@ON_SQLITE
def test_serve_with_no_workers_of_its_own_leaves_the_runs_to_a_worker_elsewhere(
    tmp_path: Path, db_url: str
) -> None:
    (tmp_path / "countersign.toml").write_text(CONFIG)
    store = Store.open(db_url)
    port = free_port()
    standin = new_standin(bot_endpoint=f"http://127.0.0.1:{port}/slack/events")
    with StandInThread(standin) as slack:
        env = bot_env(tmp_path, db_url, standin.bot_token, slack.api_url)
        bot = _serve(env, port)
        try:
            assert slack.slash_command(ALICE, CHANNEL, "/crew", "run writer topic=otters").ok
            wait_until(
                lambda: next((m for m in slack.messages(CHANNEL) if m.get("bot_id")), None),
                what="the run's root message",
            )
            children = Path(f"/proc/{bot.pid}/task/{bot.pid}/children").read_text().split()
            assert children == [], "serve --no-workers started a worker"
            (run,) = store.list_runs()
            assert run.status == RunStatus.QUEUED
            worker = Zygote.fork(
                ["worker", "--until-idle", "--poll", "0.1"], env, tmp_path, tmp_path / "worker.log"
            )
            out, _ = worker.communicate(timeout=120)
            assert worker.returncode == 0, out
            assert store.get_run(run.id).status == RunStatus.WAITING
        finally:
            bot.send_signal(signal.SIGTERM)
            out, _ = bot.communicate(timeout=60)
        assert bot.returncode == 0, out
    store.close()


def test_socket_mode_needs_no_signing_secret_and_stops_while_slack_is_unreachable(
    tmp_path: Path, db_url: str
) -> None:
    (tmp_path / "countersign.toml").write_text(CONFIG)
    env = bot_env(tmp_path, db_url, "xoxb-unused", f"http://127.0.0.1:{free_port()}/api/")
    env.pop("SLACK_SIGNING_SECRET")
    env["SLACK_APP_TOKEN"] = "xapp-1-unused"  # nothing listens where it would be used
    bot = subprocess.Popen(
        [sys.executable, "-m", "bot", "serve", "--socket-mode", "--workers", "0"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        said: list[str] = []
        assert bot.stdout is not None
        for line in bot.stdout:  # it starts, and keeps trying to reach Slack
            said.append(line)
            if "connecting to Slack" in line:  # its signal handlers are in place
                break
        assert bot.poll() is None, "".join(said)
        bot.send_signal(signal.SIGTERM)
        out, _ = bot.communicate(timeout=60)
    finally:
        if bot.poll() is None:
            bot.kill()
            bot.communicate()
    assert bot.returncode == 0, "".join(said) + out
