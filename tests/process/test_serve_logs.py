"""A real ``serve`` process's log (stderr), text and JSON: a valid token sent with a stray byte
is refused and never written, and a ``by`` holding a newline writes no line of its own."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from bot.tokens import PREFIX, Scope, Tokens
from sandbox import StandInThread
from storage import Store
from tests.support.api_harness import ApiClient, raw_request
from tests.support.harness import ROOT
from tests.support.slack_harness import CHANNEL, SECRET, free_port, new_standin, wait_until

pytestmark = pytest.mark.slow

CONFIG = f"""
[crews.writer]
factory = "tests.support.crews:writer"
channel = "{CHANNEL}"
"""
FORGED = "U0EVE\n2026-01-01 00:00:00,000 ERROR countersign.serve: forged"


def _up(base: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base}/api/v1/openapi.json", timeout=5) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_serves_log_holds_no_token_and_no_forged_line(
    tmp_path: Path, db_url: str, log_format: str
) -> None:
    (tmp_path / "countersign.toml").write_text(CONFIG)
    store = Store.open(db_url)
    token = Tokens(store).create("ci", list(Scope), by="test")[1]
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "serve.log"
    with (
        contextlib.closing(store),
        StandInThread(new_standin(bot_endpoint=f"{base}/slack/events")) as slack,
    ):
        env = dict(os.environ)
        env.update(
            PYTHONPATH=str(ROOT),
            DATABASE_URL=db_url,
            COUNTERSIGN_CONFIG=str(tmp_path / "countersign.toml"),
            SLACK_BOT_TOKEN=slack.standin.bot_token,
            SLACK_SIGNING_SECRET=SECRET,
            SLACK_API_URL=slack.api_url,
            LOG_FORMAT=log_format,
        )
        with log.open("ab") as out:
            serve = subprocess.Popen(
                [sys.executable, "-m", "bot", "serve", "--no-workers", "--port", str(port)],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        try:
            wait_until(lambda: _up(base), timeout=120, what="serve's HTTP port")
            for stray in (b"\r", b"\x01"):
                answer = raw_request(
                    base,
                    b"GET /api/v1/reviews HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    b"Authorization: Bearer " + token.encode() + stray + b"\r\n\r\n",
                )
                assert b" 400 " in answer.split(b"\r\n")[0]
            started = ApiClient(base, token).post(
                "/runs", {"crew": "writer", "inputs": {"topic": "o"}, "by": FORGED}
            )
            assert started.status == 201
            wait_until(lambda: "started by U0EVE" in log.read_text(), 60, "the run's log line")
        finally:
            serve.terminate()
            serve.wait(60)
    written = log.read_text()
    assert token.removeprefix(PREFIX).split("_", 1)[1] not in written  # the secret part
    assert "Traceback" not in written
    lines = written.splitlines()
    assert not any(line.startswith("2026-01-01") for line in lines)
    refused = [line for line in lines if "not valid HTTP" in line]
    assert len(refused) == 2
    if log_format == "json":
        said = [json.loads(line) for line in lines]
        assert any(FORGED in entry["message"] for entry in said)
        assert {json.loads(line)["level"] for line in refused} == {"WARNING"}
