"""The HTTP entry point: what it refuses, what it answers itself, and what it records first."""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path

from crew_runtime.config import load_config
from sandbox import sign
from storage import Store
from tests.support.slack_harness import SECRET, slack_and_bot


def test_url_verification_is_answered_with_the_challenge(tmp_path: Path) -> None:
    (tmp_path / "countersign.toml").write_text("")
    store = Store.open(f"sqlite:///{tmp_path / 'db.sqlite'}")
    with slack_and_bot(load_config(tmp_path / "countersign.toml"), store) as (_slack, bot):
        body = json.dumps({"type": "url_verification", "challenge": "abc123", "token": "x"})
        now = int(time.time())
        request = urllib.request.Request(
            bot.url,
            data=body.encode(),
            headers={
                "Content-Type": "application/json",
                "X-Slack-Request-Timestamp": str(now),
                "X-Slack-Signature": sign(SECRET, now, body),
            },
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200
            assert "abc123" in response.read().decode()
    store.close()
