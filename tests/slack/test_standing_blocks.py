"""Standing approvals' Block Kit and clicks, without Slack: the "Approve all <tool> calls"
button (where it goes, its label within Slack's 75 characters), the thread's message before and
after a revocation (text from a model escaped), and the clicks' payloads."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

import pytest

from bot.slack import review_blocks
from bot.slack.message import Message
from bot.slack.payloads import PayloadError, parse_approve_all, parse_revoke_click
from bot.slack.standing_blocks import standing_message, with_approve_all
from bot.slack.thread_text import approve_all_label
from sandbox.blockkit import validate_blocks
from storage.details import details_from_json
from storage.records import Review, StandingApproval
from storage.status import ReviewKind
from tests.support.records import review, run

NOW = datetime(2026, 1, 1, 12, 0)
Json = dict[str, Any]


def _call(args: Json) -> Review:
    """A pending review of a call of ``pay`` with ``args``."""
    details = {"tool": "pay", "description": "Pays", "args": args}
    return replace(
        review(ReviewKind.TOOL_APPROVAL),
        prompt=f"pay({args})",
        details=details_from_json(ReviewKind.TOOL_APPROVAL, details),
    )


def _buttons(message: Message) -> list[Json]:
    return [e for b in message.blocks if b["type"] == "actions" for e in b["elements"]]


def _valid(message: Message) -> None:
    problems = validate_blocks(message.blocks)
    assert problems == [], [p.slack_line() for p in problems]


def test_the_button_goes_beside_approve_and_names_the_values() -> None:
    review = _call({"amount": 1500, "to": "ACME"})
    (last,) = review_blocks.review_messages(review, run())
    shown = with_approve_all(last, review, "pay", {"to": "ACME"})
    ids = [b["action_id"] for b in _buttons(shown)]
    assert ids[:3] == ["countersign:approve", "countersign:approve_all", "countersign:edit"]
    button = _buttons(shown)[1]
    assert button["value"] == review.id
    assert button["text"]["text"] == "Approve all pay calls (to = ACME)"
    _valid(shown)
    assert with_approve_all(last, review, "pay", None) == last  # the gate does not allow it
    assert last.blocks == review_blocks.review_messages(review, run())[0].blocks  # untouched


@pytest.mark.parametrize(
    ("match", "label"),
    [
        ({}, "Approve all pay calls"),
        ({"to": "ACME", "amount": 1500}, "Approve all pay calls (to = ACME, amount = 1500)"),
        ({"to": None}, "Approve all pay calls (to = null)"),
        ({"to": "A" * 40}, "Approve all pay calls (to = " + "A" * 23 + "…)"),
    ],
)
def test_the_label_shows_each_value_shortened(match: Json, label: str) -> None:
    assert approve_all_label("pay", match) == label


def test_a_long_label_is_cut_to_the_buttons_limit() -> None:
    match = {f"field{n}": "x" * 30 for n in range(5)}
    review = _call(match)
    (last,) = review_blocks.review_messages(review, run())
    button = _buttons(with_approve_all(last, review, "pay", match))[1]
    assert len(button["text"]["text"]) == 75 and button["text"]["text"].endswith("…")


def test_the_thread_message_escapes_values_and_loses_its_button_once_revoked() -> None:
    standing = StandingApproval(
        id="std_0a1b2c3d4e5f",
        run_id="run_0a1b2c3d4e5f",
        review_id="rev_0a1b2c3d4e5f",
        tool="pay",
        match={"to": "<!channel> & co"},
        granted_by="U0ANA",
        created_at=NOW,
    )
    granted = standing_message(standing)
    _valid(granted)
    assert granted.text == (
        'Standing approval of `pay` (to = "&lt;!channel&gt; &amp; co") by <@U0ANA> — later '
        "calls with these values in this run run without review."
    )
    (revoke,) = _buttons(granted)
    assert (revoke["action_id"], revoke["value"]) == ("countersign:revoke_standing", standing.id)
    later = datetime(2026, 1, 2, 9, 30)
    revoked = standing_message(
        StandingApproval(**{**standing.__dict__, "revoked_by": "U0BEN", "revoked_at": later})
    )
    _valid(revoked)
    assert _buttons(revoked) == []
    assert "— revoked by <@U0BEN> <!date^" in revoked.text
    assert "2026-01-02 09:30 UTC" in revoked.text
    assert revoked.text.endswith("later calls of `pay` are reviewed again.")


def _click(action_id: str, value: Any) -> Json:
    return {
        "type": "block_actions",
        "user": {"id": "U0ANA"},
        "container": {"channel_id": "C0PAY", "message_ts": "1700000250.000400"},
        "trigger_id": "1337.42",
        "actions": [{"action_id": action_id, "value": value}],
    }


def test_the_clicks_are_read_and_anything_else_refused() -> None:
    approve_all = parse_approve_all(_click("countersign:approve_all", "rev_0a1b2c3d4e5f"))
    assert (approve_all.review_id, approve_all.user_id) == ("rev_0a1b2c3d4e5f", "U0ANA")
    assert approve_all.message_ts == "1700000250.000400"
    revoke = parse_revoke_click(_click("countersign:revoke_standing", "std_0a1b2c3d4e5f"))
    assert (revoke.standing_id, revoke.channel_id) == ("std_0a1b2c3d4e5f", "C0PAY")
    with pytest.raises(PayloadError, match="not one of ours"):
        parse_revoke_click(_click("countersign:approve_all", "std_0a1b2c3d4e5f"))
    with pytest.raises(PayloadError, match="not a valid id"):
        parse_revoke_click(_click("countersign:revoke_standing", "<!channel>"))
    with pytest.raises(PayloadError):
        parse_approve_all(_click("countersign:approve_all", None))
