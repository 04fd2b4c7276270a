"""Block Kit for standing approvals: the "Approve all <tool> calls" button beside Approve on
a gated call's review whose gate allows it, and the run's thread message about a standing
approval, with its *Revoke* button until it is revoked (then who revoked it, and when).

The button is added to a review's last message as built by ``bot.slack.review_blocks`` (which
knows the review alone, not the configuration), wherever that message is posted or redrawn
with its buttons."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.slack import thread_text as t
from bot.slack.elements import Block, context, plain, section
from bot.slack.message import Message
from bot.slack.payloads import APPROVE_ALL, REVOKE, action_id
from storage.records import Review, StandingApproval
from storage.status import DecisionKind

BUTTON_TEXT_LIMIT = 75  # Slack's limit on a button's text


def with_approve_all(
    message: Message, review: Review, tool: str, match: Mapping[str, Any] | None
) -> Message:
    """``message`` (the review's last one, with its buttons) with "Approve all ``tool``
    calls" after Approve; as it is when ``match`` is None (the gate does not allow it)."""
    if match is None:
        return message
    button: Block = {
        "type": "button",
        "action_id": action_id(APPROVE_ALL),
        "text": plain(t.approve_all_label(tool, match), BUTTON_TEXT_LIMIT),
        "value": review.id,
    }
    approve = action_id(DecisionKind.APPROVE)
    shown: list[Block] = []
    for block in message.blocks:
        if block.get("type") == "actions" and block.get("block_id") == f"countersign:{review.id}":
            elements = list(block["elements"])
            at = next((i + 1 for i, e in enumerate(elements) if e["action_id"] == approve), 0)
            elements.insert(at, button)
            block = {**block, "elements": elements}
        shown.append(block)
    return Message(message.text, shown)


def standing_message(standing: StandingApproval) -> Message:
    """The thread's message about a standing approval: with *Revoke* while it stands, and
    who revoked it and when once revoked."""
    tool, match, by = standing.tool, standing.match, standing.granted_by
    if standing.revoked_by is None or standing.revoked_at is None:
        words = t.standing_granted(tool, match, by)
        revoke: Block = {
            "type": "button",
            "action_id": action_id(REVOKE),
            "text": plain(t.REVOKE_BUTTON, BUTTON_TEXT_LIMIT),
            "value": standing.id,
        }
        blocks = [
            section(words),
            {"type": "actions", "block_id": f"countersign:{standing.id}", "elements": [revoke]},
            context(t.standing_ref(standing.id)),
        ]
        return Message(words, blocks)
    words = t.standing_revoked(tool, match, by, standing.revoked_by, standing.revoked_at)
    return Message(words, [section(words), context(t.standing_ref(standing.id))])
