"""The HTTP entry point: what is acked before Bolt runs, and what Bolt must answer itself."""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

import pytest

from bot.http import acks_later
from bot.sandbox import sign
from crew_runtime.config import load_config
from storage import Store
from tests.slack_harness import SECRET, slack_and_bot


def _form(payload: dict[str, object]) -> str:
    return urlencode({"payload": json.dumps(payload)})


@pytest.mark.parametrize(
    ("body", "later"),
    [
        (urlencode({"command": "/crew", "text": "help"}), True),
        (_form({"type": "block_actions", "actions": []}), True),
        (json.dumps({"type": "event_callback", "event": {}}), True),
        (_form({"type": "view_closed"}), True),
        (_form({"type": "view_submission", "view": {}}), False),
        (json.dumps({"type": "url_verification", "challenge": "c"}), False),
        (urlencode({"ssl_check": "1", "token": "t"}), False),
    ],
)
def test_only_requests_whose_ack_is_empty_are_acked_early(body: str, later: bool) -> None:
    assert acks_later(body) is later


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
