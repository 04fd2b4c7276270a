"""The progress message across a worker killed mid-run: the next worker takes the run over
(its lease run out), replays it and goes on editing the same message."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from sandbox import StandInThread
from storage import Store
from tests.support.crews import effects
from tests.support.processes import bot_env
from tests.support.processes import serve as _serve
from tests.support.processes import worker as _worker
from tests.support.slack_harness import (
    ALICE,
    CHANNEL,
    buttons,
    free_port,
    new_standin,
    text_of,
    wait_until,
)
from tests.support.zygote import Zygote

pytestmark = pytest.mark.slow

# As tests.process.test_slack_process's worker: a lease of 3 s, run out soon after the kill.
WORKER = ["worker", "--poll", "0.1", "--lease", "3", "--nice", "10"]

CONFIG = f"""
[crews.loop]
factory = "tests.support.crews:long_loop"
channel = "{CHANNEL}"
reviewers = ["{ALICE}"]
"""


def _progress(slack: StandInThread, root_ts: str) -> list[dict[str, object]]:
    return [m for m in slack.thread(CHANNEL, root_ts) if "*Progress*" in text_of(m)]


def test_a_worker_killed_mid_run_leaves_one_progress_message_that_goes_on(
    tmp_path: Path, db_url: str
) -> None:
    (tmp_path / "countersign.toml").write_text(CONFIG)
    store = Store.open(db_url)
    port = free_port()
    standin = new_standin(bot_endpoint=f"http://127.0.0.1:{port}/slack/events")
    effects_file = tmp_path / "effects.jsonl"
    with StandInThread(standin) as slack:
        env = bot_env(tmp_path, db_url, standin.bot_token, slack.api_url)
        env["COUNTERSIGN_TEST_EFFECTS"] = str(effects_file)
        serve = _serve(env, port)
        try:
            # The first worker holds on its model's second call, after one search.
            held = dict(env, COUNTERSIGN_TEST_HOLD="llm")
            first = Zygote.fork(WORKER, held, tmp_path, tmp_path / "worker-held.log")
            try:
                slack.slash_command(ALICE, CHANNEL, "/crew", "run loop topic=otters turns=3")
                wait_until(
                    lambda: any(e["kind"] == "holding" for e in effects(effects_file)),
                    what="the first worker to hold mid-run",
                )
                root = wait_until(
                    lambda: next((m for m in slack.messages(CHANNEL) if m.get("bot_id")), None),
                    what="the root message",
                )
                (before,) = wait_until(
                    lambda: [
                        m for m in _progress(slack, root["ts"]) if "1 tool call" in text_of(m)
                    ],
                    what="the progress message to count the first search",
                )
            finally:
                os.kill(first.pid, signal.SIGKILL)
                first.communicate(timeout=30)

            # The next worker takes the run over once its lease ran out, and goes on.
            with _worker(env):
                question = wait_until(
                    lambda: next(
                        (m for m in slack.thread(CHANNEL, root["ts"]) if buttons(m)), None
                    ),
                    what="the question after the takeover",
                )
                assert "Formal or casual" in text_of(question)
                wait_until(
                    lambda: any(
                        "Waiting for an answer" in text_of(m) for m in _progress(slack, root["ts"])
                    ),
                    what="the progress message to say the run waits",
                )
            (after,) = _progress(slack, root["ts"])
            assert after["ts"] == before["ts"]
            assert "⚙️ *Research otters* · Researcher" in text_of(after)
            posts = [
                c
                for c in slack.calls("chat.postMessage")
                if c.ok and "*Progress*" in str(c.params.get("blocks"))
            ]
            assert len(posts) == 1
        finally:
            serve.send_signal(signal.SIGTERM)
            out, _ = serve.communicate(timeout=60)
        assert serve.returncode == 0, out
    store.close()
