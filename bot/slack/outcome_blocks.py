"""Block Kit for a flow's ``@human_feedback(emit=[...])`` review: one button per outcome,
in the flow author's words, instead of Approve / Request changes / Reject; and the modal each
opens, whose feedback box is the text CrewAI gives the flow (``last_human_feedback.feedback``).

A button names its outcome by its place in the review's ``outcomes``
(``bot.slack.outcome_payloads``); its label is the outcome as the author wrote it (plain text,
cut to Slack's 75 characters), and mrkdwn shows it in code, escaped. Whether the box must be
filled is the kind the choice is recorded as (``flow_outcomes.kind_for``): a change request
carries words, an approval or a rejection may.
"""

from __future__ import annotations

import json
from typing import Any

from bot.slack import block_text as t
from bot.slack.elements import Block, context, plain, section
from bot.slack.modals import INPUT_LIMIT
from bot.slack.outcome_payloads import OUTCOME, outcome_action_id
from bot.slack.payloads import callback_id
from crew_runtime import flow_outcomes
from storage.details import FlowFeedbackDetails
from storage.records import Review
from storage.status import DecisionKind

BUTTONS_PER_BLOCK = 25  # an actions block's limit
MAX_BUTTONS = 50  # outcomes past this many are chosen by `reviews decide --outcome`


def outcomes_of(review: Review) -> tuple[str, ...]:
    """The outcomes a review offers as buttons (none: it is not a flow's with ``emit``)."""
    details = review.details
    return details.outcomes if isinstance(details, FlowFeedbackDetails) else ()


def outcome_blocks(review: Review) -> list[Block]:
    """The outcome buttons of a pending flow review, under a line saying what they are."""
    outcomes = outcomes_of(review)[:MAX_BUTTONS]
    buttons: list[Block] = []
    for index, outcome in enumerate(outcomes):
        button: Block = {
            "type": "button",
            "action_id": outcome_action_id(index),
            "text": plain(outcome, 75),
            "value": review.id,
        }
        kind = flow_outcomes.kind_for(outcome, outcomes)
        if kind is DecisionKind.APPROVE:
            button["style"] = "primary"
        elif kind is DecisionKind.REJECT:
            button["style"] = "danger"
        buttons.append(button)
    blocks: list[Block] = [section(t.OUTCOMES_LEAD)]
    for n, start in enumerate(range(0, len(buttons), BUTTONS_PER_BLOCK)):
        blocks.append(
            {
                "type": "actions",
                "block_id": f"countersign:{OUTCOME}:{n}:{review.id}",
                "elements": buttons[start : start + BUTTONS_PER_BLOCK],
            }
        )
    return blocks


def needs_feedback(review: Review, index: int) -> bool:
    """Whether choosing the outcome at ``index`` needs words (a change request does)."""
    outcomes = outcomes_of(review)
    kind = flow_outcomes.kind_for(outcomes[index], outcomes)
    return kind.needs_text


def outcome_modal(
    review: Review, index: int, channel_id: str | None, message_ts: str | None
) -> dict[str, Any]:
    """The feedback modal of the outcome at ``index`` of ``review``'s outcomes.

    Raises:
        IndexError: the review has no outcome at ``index``.
    """
    outcome = outcomes_of(review)[index]
    needed = needs_feedback(review, index)
    placeholder = t.OUTCOME_PLACEHOLDER_NEEDED if needed else t.OUTCOME_PLACEHOLDER_OPTIONAL
    metadata = {
        "review_id": review.id,
        "outcome": index,
        "channel_id": channel_id,
        "message_ts": message_ts,
    }
    field: Block = {
        "type": "input",
        "block_id": "text",
        "label": plain(t.OUTCOME_LABEL, 2000),
        "element": {
            "type": "plain_text_input",
            "action_id": "value",
            "multiline": True,
            "max_length": INPUT_LIMIT,
            "placeholder": plain(placeholder, 150),
        },
        "optional": not needed,
    }
    return {
        "type": "modal",
        "callback_id": callback_id(OUTCOME),
        "private_metadata": json.dumps(metadata),
        "title": plain(t.OUTCOME_TITLE, 24),
        "submit": plain(t.OUTCOME_SUBMIT, 24),
        "close": plain(t.MODAL_CLOSE, 24),
        "blocks": [
            context(t.review_ref(review.id, review.run_id)),
            section(t.outcome_chosen(outcome)),
            field,
        ],
    }
