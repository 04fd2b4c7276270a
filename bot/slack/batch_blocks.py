"""Block Kit of batch review: the *Decide several…* button (the Home tab, ``/crew pending``),
the modal that chooses the reviews (checkboxes, ten to an input, as Slack allows), its
confirmation listing what will happen, and the answer listing what was recorded and what
was skipped, and why. Pure functions; ``bot.slack.batch_payloads`` reads them back.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from bot.slack import block_text as t
from bot.slack import text
from bot.slack.batch_payloads import (
    BATCH,
    CARRIED_DIGITS,
    CONFIRM,
    DECISIONS,
    MAX_BATCH,
    REASON_LIMIT,
    SHOWN,
    BatchChoice,
    ItemResult,
    Picked,
    pick_block_id,
    pick_value,
    shown_value,
)
from bot.slack.elements import Block, args_line, plain, ran_args, section
from bot.slack.message import listing
from bot.slack.payloads import action_id, callback_id
from crew_runtime.service import review_digest
from storage import ALLOWED_DECISIONS, PendingReviews, Review, ReviewStatus, Run
from storage.status import DecisionKind

GROUP = 10  # a checkboxes element holds ten options
OPTION_TEXT = 75  # an option's text and description, Slack's limit


def batch_button(shown: Sequence[Review] = ()) -> Block:
    """The button that opens the choosing modal and, where ``shown`` (the reviews listed
    beside it) has some a batch can decide, *Approve all N shown* and *Reject all N shown*:
    their value names those reviews with their digests as shown (at most twenty of them
    fit a button's value of 2,000 characters: ``bot.slack.batch_payloads``)."""
    button = {
        "type": "button",
        "action_id": action_id(BATCH),
        "text": plain(t.BATCH_BUTTON, 75),
        "value": BATCH,
    }
    elements = [button]
    picks = [(r.id, review_digest(r)) for r in shown if batchable(r)][:MAX_BATCH]
    for kind in DECISIONS if picks else ():
        elements.append(
            {
                "type": "button",
                "action_id": action_id(SHOWN[kind]),
                "text": plain(t.batch_shown_button(kind, len(picks)), 75),
                "value": shown_value(picks),
            }
        )
    return {"type": "actions", "block_id": BATCH, "elements": elements}


def picked(review: Review, run: Run | None, digest: str | None) -> Picked:
    """``review`` as a confirmation lists it, with ``digest`` (what its decider was shown
    of it: a review that changed since is skipped)."""
    return Picked(review.id, digest, label(review, run), _about(review))


def batchable(review: Review) -> bool:
    """Whether a batch can decide ``review``: one approving or rejecting takes (not a
    question, which needs its answer)."""
    return all(kind in ALLOWED_DECISIONS[review.kind] for kind in DECISIONS)


def choose_view(pending: PendingReviews, channel_id: str | None) -> dict[str, Any]:
    """The modal choosing among ``pending`` (the clicker's, oldest first, at most
    ``MAX_BATCH``): a notice where none can be decided here."""
    shown = [r for r in pending.reviews if batchable(r)][:MAX_BATCH]
    if not shown:
        return _notice(t.BATCH_NOTHING)
    questions = len(pending.reviews) - len([r for r in pending.reviews if batchable(r)])
    blocks: list[Block] = [section(t.batch_intro(len(shown), pending.total, questions))]
    for start in range(0, len(shown), GROUP):
        group = shown[start : start + GROUP]
        options = [_option(r, pending) for r in group]
        blocks.append(
            {
                "type": "input",
                "block_id": pick_block_id(start // GROUP),
                "optional": True,
                "label": plain(t.batch_group_label(start + 1, start + len(group)), 2000),
                "element": {
                    "type": "checkboxes",
                    "action_id": pick_block_id(start // GROUP),
                    "options": options,
                },
            }
        )
    decisions = [{"text": plain(t.BATCH_DECISIONS[k], 75), "value": k.value} for k in DECISIONS]
    blocks += [
        {
            "type": "input",
            "block_id": "decision",
            "label": plain(t.BATCH_DECISION_LABEL, 2000),
            "element": {
                "type": "radio_buttons",
                "action_id": "decision",
                "options": decisions,
                "initial_option": decisions[0],
            },
        },
        {
            "type": "input",
            "block_id": "text",
            "optional": True,
            "label": plain(t.BATCH_REASON_LABEL, 2000),
            "element": {
                "type": "plain_text_input",
                "action_id": "value",
                "multiline": True,
                "max_length": REASON_LIMIT,
            },
        },
    ]
    return {
        "type": "modal",
        "callback_id": callback_id(BATCH),
        "title": plain(t.BATCH_TITLE, 24),
        "submit": plain(t.BATCH_NEXT, 24),
        "close": plain(t.BATCH_CANCEL, 24),
        "private_metadata": json.dumps({"channel_id": channel_id}),
        "blocks": blocks,
    }


def confirm_view(choice: BatchChoice) -> dict[str, Any]:
    """The confirmation: what will happen (the decision, the reason, each chosen review in
    the words it was shown with), and the one button that records them; the reviews travel
    in its ``private_metadata``, the reason in its button's value (``bot.slack.batch_payloads``
    reads them back)."""
    lines = [t.batch_line(p.label, p.about) for p in choice.picked]
    blocks: list[Block] = [
        section(t.batch_confirm_head(choice.kind, len(choice.picked), choice.text)),
        *listing(lines),
    ]
    button = {
        "type": "button",
        "action_id": action_id(CONFIRM),
        "text": plain(t.batch_confirm_button(choice.kind, len(choice.picked)), 75),
        "value": f"{choice.kind.value} {choice.text[:REASON_LIMIT]}".strip(),
        "style": "primary" if choice.kind is DecisionKind.APPROVE else "danger",
    }
    blocks.append({"type": "actions", "block_id": CONFIRM, "elements": [button]})
    meta = {
        "channel_id": choice.channel_id,
        "items": [
            pick_value(p.review_id, p.digest and p.digest[:CARRIED_DIGITS]) for p in choice.picked
        ],
    }
    return {
        "type": "modal",
        "callback_id": callback_id(CONFIRM),
        "title": plain(t.BATCH_TITLE, 24),
        "close": plain(t.BATCH_CANCEL, 24),
        "private_metadata": json.dumps(meta, ensure_ascii=False, separators=(",", ":")),
        "blocks": blocks,
    }


def recording_view() -> dict[str, Any]:
    return _notice(t.BATCH_RECORDING)


def done_text(kind: DecisionKind, results: Sequence[ItemResult], labels: Mapping[str, str]) -> str:
    """The answer (mrkdwn): how many were recorded, and each one skipped (by ``labels``,
    its words by review id) with why."""
    recorded = [r.review for r in results if r.review is not None]
    waiting = sum(r.status is ReviewStatus.PENDING for r in recorded)
    skipped = [(r.item.review_id, r.error) for r in results if r.error is not None]
    lines = [t.batch_done(kind, len(recorded), waiting, len(skipped))]
    lines += [
        t.batch_skipped(labels.get(review_id, review_id), text.refusal(error))
        for review_id, error in skipped
    ]
    return "\n".join(lines)


def label(review: Review, run: Run | None) -> str:
    """A review's words in a batch: its crew and kind (plain text)."""
    return t.batch_option(run.crew if run else "", review.kind)


def done_view(answer: str) -> dict[str, Any]:
    """The modal after the decisions: the answer, in as many sections as it takes."""
    view = _notice("")
    view["blocks"] = listing(answer.split("\n"))
    return view


def _notice(words: str) -> dict[str, Any]:
    return {
        "type": "modal",
        "title": plain(t.BATCH_TITLE, 24),
        "close": plain(t.CLOSE, 24),
        "blocks": [section(words)],
    }


def _option(review: Review, pending: PendingReviews) -> dict[str, Any]:
    """A review's checkbox: its crew and kind, the start of what it is about, and (its
    value) its id and digest as shown."""
    run = pending.runs.get(review.run_id)
    return {
        "text": plain(label(review, run), OPTION_TEXT),
        "description": plain(_about(review), OPTION_TEXT),
        "value": pick_value(review.id, review_digest(review)),
    }


def _about(review: Review) -> str:
    """The start of what a review is about, on one line: its call's arguments, else its
    draft or question."""
    args = ran_args(review)
    return args_line(args) if args else " ".join(review.prompt.split())
