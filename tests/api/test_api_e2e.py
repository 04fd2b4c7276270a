"""A run started through the HTTP API is a run like any: its thread in the crew's channel, its
reviews there with their buttons, decided through the API (Slack's messages follow), to its
end; and a click in Slack and a decision through the API racing for one review, once.

The real bot on a real port with its embedded workers (threads) running the crew through
CrewAI's loop on the scripted LLM; Slack is the stand-in, over HTTP.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bot.tokens import Scope, Tokens
from crew_runtime.config import Config, load_config
from sandbox import StandInThread
from storage import Store
from tests.support import docs
from tests.support.api_harness import ApiClient
from tests.support.docs import API_SECTION
from tests.support.harness import ON_SQLITE
from tests.support.slack_harness import (
    ALICE,
    BOB,
    CHANNEL,
    buttons,
    draft_in,
    review_with_buttons,
    root_of,
    slack_and_bot,
    text_of,
    wait_until,
)
from tests.support.timing import at_once

Json = dict[str, Any]

CONFIG = f"""
[crews.writer]
factory = "tests.support.crews:writer"
description = "Outline then article, both reviewed"
channel = "{CHANNEL}"
reviewers = ["{ALICE}", "{BOB}"]
inputs = ["topic"]
"""

pytestmark = [pytest.mark.slow, pytest.mark.bot_config(CONFIG)]


def _pending(api: ApiClient, run_id: str, after: set[str]) -> Json:
    """The run's pending review, once there is one not in ``after``."""

    def find() -> Json | None:
        page = api.get("/reviews?crew=writer").body["reviews"]
        return next((r for r in page if r["run_id"] == run_id and r["id"] not in after), None)

    return wait_until(find, what="a pending review of the run")


def _decided_in_slack(slack: StandInThread, root_ts: str, ts: str) -> Json:
    return wait_until(
        lambda: next(
            (m for m in slack.thread(CHANNEL, root_ts) if m["ts"] == ts and not buttons(m)),
            None,
        ),
        what="the review message to lose its buttons",
    )


def test_a_run_started_and_decided_through_the_api_is_reviewed_in_its_thread(
    setup: tuple[Config, Store],
) -> None:
    config, store = setup
    secret = Tokens(store).create("ci", list(Scope), by="test")[1]
    with slack_and_bot(config, store) as (slack, bot):
        api = ApiClient(f"http://127.0.0.1:{bot.port}", secret)
        started = api.post("/runs", {"crew": "writer", "inputs": {"topic": "otters"}, "by": BOB})
        assert started.status == 201
        run_id = started.body["id"]
        root = root_of(slack)
        assert "writer" in text_of(root)

        outline = _pending(api, run_id, set())
        message = review_with_buttons(slack, root["ts"])
        assert outline["kind"] == "task_review" and draft_in(message).startswith("Outline v0")
        approved = api.post(f"/reviews/{outline['id']}/decision", {"kind": "approve", "by": ALICE})
        assert approved.status == 200 and approved.body["decision"]["by"] == ALICE
        assert ALICE in text_of(_decided_in_slack(slack, root["ts"], message["ts"]))

        article = _pending(api, run_id, {outline["id"]})
        edited = "Otters hold hands while they sleep."
        decided = api.post(
            f"/reviews/{article['id']}/decision", {"kind": "edit", "text": edited, "by": ALICE}
        )
        assert decided.status == 200

        def finished() -> Json | None:
            run: Json = api.get(f"/runs/{run_id}").body
            return run if run["status"] == "succeeded" else None

        run = wait_until(finished, what="the run to succeed")
        assert run["output"] == edited and run["started_by"] == BOB
        assert [r["decision"]["kind"] for r in run["reviews"]] == ["approve", "edit"]
        wait_until(
            lambda: "succeeded" in text_of(slack.messages(CHANNEL)[0]).lower(),
            what="the root message to show the run succeeded",
        )


def test_a_click_and_an_api_decision_at_once_decide_once(setup: tuple[Config, Store]) -> None:
    config, store = setup
    secret = Tokens(store).create("ci", list(Scope), by="test")[1]
    with slack_and_bot(config, store) as (slack, bot):
        api = ApiClient(f"http://127.0.0.1:{bot.port}", secret)
        run_id = api.post("/runs", {"crew": "writer", "inputs": {"topic": "otters"}}).body["id"]
        root = root_of(slack)
        message = review_with_buttons(slack, root["ts"])
        review = _pending(api, run_id, set())
        answers: dict[str, int] = {}

        def act(n: int) -> None:
            if n == 0:
                click = slack.click_button(ALICE, CHANNEL, message["ts"], "countersign:approve")
                answers["slack"] = click.status
            else:
                body = {"kind": "reject", "text": "no", "by": BOB}
                answers["api"] = api.post(f"/reviews/{review['id']}/decision", body).status

        at_once(act, 2)
        assert answers["slack"] == 200  # a click is acked once recorded, whoever wins
        decided = wait_until(
            lambda: store.get_review(review["id"]).decision, what="the review decided"
        )
        assert answers["api"] == (200 if decided.decided_by == BOB else 409)
        shown = _decided_in_slack(slack, root["ts"], message["ts"])
        assert decided.decided_by in text_of(shown)


EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "countersign.toml"
README_CHANNEL = "C0README"  # the channel a reader names as CHANNEL_ID
README_USER = "U0ANA01"  # who decides in the README, a member of that channel


@ON_SQLITE
def test_the_http_api_section_runs_as_written(tmp_path: Path, db_url: str) -> None:
    """docs/guide/http-api.md's commands, line after line in a shell, against the bot on its
    port with the example crews (``examples/countersign.toml``, no reviewers, no channel, on the
    offline model), as the command line's session runs: ``localhost:3000`` is the bot's
    address, ``CHANNEL_ID`` a channel the app is in (the decider is a member), ``RUN_ID``
    the run the first ``curl`` started and ``REVIEW_ID`` its pending review, as a reader
    would fill them in. The run's thread is in that channel."""
    env = {
        **os.environ,
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]),
        "DATABASE_URL": db_url,
        "USER": "alice",
    }
    outputs: list[str] = []
    env.pop("COUNTERSIGN_LLM", None)
    store = Store.open(db_url)
    with slack_and_bot(load_config(EXAMPLES), store) as (slack, bot):
        slack.add_user(README_USER, "ana")
        slack.add_channel(README_CHANNEL, "content", [README_USER])
        run_id = ""
        for line in docs.section_commands(*API_SECTION):
            command = line.replace("localhost:3000", f"127.0.0.1:{bot.port}")
            command = command.replace("RUN_ID", run_id).replace("CHANNEL_ID", README_CHANNEL)
            if "REVIEW_ID" in command:
                pending = wait_until(
                    lambda run_id=run_id: store.list_reviews(run_id=run_id),
                    what="the run's first review",
                )
                command = command.replace("REVIEW_ID", pending[0].id)
            name = re.match(r"export (\w+)=", command)
            if name:  # the shell keeps what it exports: so does this session
                command += f'; printf %s "${name.group(1)}"'
            done = subprocess.run(
                ["bash", "-c", command], env=env, capture_output=True, text=True, timeout=60
            )
            assert done.returncode == 0, f"{line!r}:\n{done.stdout}\n{done.stderr}"
            if name:
                env[name.group(1)] = done.stdout
            elif done.stdout.startswith("{"):
                answer = json.loads(done.stdout)
                assert not isinstance(answer.get("error"), dict), (line, answer)
                run_id = run_id or answer["id"]
            outputs.append(done.stdout)
        assert any(m.get("bot_id") for m in slack.messages(README_CHANNEL)), "no thread"
    store.close()
    assert env["COUNTERSIGN_TOKEN"].startswith("cs_")
    decided = next(json.loads(o) for o in outputs if '"decision": {' in o)
    assert decided["decision"]["by"] == "U0ANA01"
    assert "ci-bot" in outputs[-2] and env["COUNTERSIGN_TOKEN"] not in outputs[-2]
    assert "revoked" in outputs[-1]
