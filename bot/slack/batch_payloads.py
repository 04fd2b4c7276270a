"""The payloads of batch review, read as ``bot.slack.payloads`` reads the others (checked
once, a ``PayloadError`` otherwise).

*Decide several* (``action_id`` ``countersign:batch``) is a button of the Home tab and of
``/crew pending``'s answer; it opens the choosing modal (``callback_id``
``countersign:modal:batch``): the reviews as checkboxes, ten to an input (``pick:<n>``,
action ``pick``), the decision (``decision``, radio buttons) and an optional reason
(``text``). Each checkbox's value is ``<review id> <digest>``: the review and the first
digits of its action digest (``service.review_digest``), so a review whose action changed
since (a new review, a new digest) is skipped, not decided. The confirmation
(``countersign:modal:batch_confirm``) lists the chosen ones, and its button
(``countersign:batch_confirm``, value the decision and, after a space, the reason) is a
click, recorded before it is acked like any; the chosen reviews and the channel travel in
its ``private_metadata``, at most 3,000 characters: a hundred reviews, each with the first
:data:`CARRIED_DIGITS` digits of its digest (``rev_… 1a2b3c4d``, 28 characters in the JSON).

*Approve all N shown* and *Reject all N shown* (``countersign:batch_approve_shown``,
``countersign:batch_reject_shown``) sit by it: their value is the reviews the person is
shown there, as the checkboxes' values are (``<review id> <digest>``, comma-separated); a
click opens the same confirmation, listing them, whose button is the same click.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.slack.payloads import (
    ACTION_PREFIX,
    PayloadError,
    _click,
    _clicked_message,
    _decision,
    _id,
    _input_text,
    _mapping,
    _optional_id,
    _optional_mapping,
    _state_values,
    _str,
    _suffix,
    _user,
    _view,
    callback_id,
)
from storage import CountersignError, Review
from storage.status import DecisionKind

BATCH = "batch"
CONFIRM = "batch_confirm"
DECISIONS = (DecisionKind.APPROVE, DecisionKind.REJECT)
"""What a batch decides: approvals and rejections (an edit, a question's answer, changes
asked for are one review's, with their own words)."""
SHOWN = {DecisionKind.APPROVE: "batch_approve_shown", DecisionKind.REJECT: "batch_reject_shown"}
"""The ``action_id`` suffix of *Approve all N shown* and *Reject all N shown*."""
PICK_PREFIX = "pick:"
REASON_LIMIT = 250
"""A batch's reason, at most: with a hundred reviews it fits the confirmation's metadata."""
_MAX_DIGEST = 128
CARRIED_DIGITS = 8
"""How much of a review's digest a confirmation carries: the fewest a decision may name
(``digests.matches``), so that a hundred reviews fit its metadata."""
# A checkbox's value for a review with no action digest (a question).
NO_DIGEST = "-"
_MAX_METADATA = 3000  # Slack's cap on private_metadata: longer cannot be ours


MAX_BATCH = 100
"""The most decisions one batch takes (the API's list, a Slack selection): what a Slack
modal lists at once (ten groups of ten checkboxes)."""


@dataclass(frozen=True)
class BatchItem:
    """One decision of a batch: the review, the decision, its text, and what its decider
    was shown of the review (``digest``: ``service.review_digest`` then; None: not said)."""

    review_id: str
    kind: DecisionKind
    text: str | None = None
    digest: str | None = None
    standing: bool = False


@dataclass(frozen=True)
class ItemResult:
    """What became of one item: the review as recorded (``error`` None), or why not."""

    item: BatchItem
    review: Review | None
    error: CountersignError | None


def pick_block_id(group: int) -> str:
    """The ``block_id`` (and ``action_id``: unique in a view) of the ``group``-th input of
    ten checkboxes: ``pick:0``."""
    return f"{PICK_PREFIX}{group}"


def pick_value(review_id: str, digest: str | None) -> str:
    """A checkbox's value: the review and what its decider is shown of it (its action
    digest's first digits; ``-`` for a review with none)."""
    return f"{review_id} {digest or NO_DIGEST}"


@dataclass(frozen=True)
class Picked:
    """A review ticked: its id, its digest as shown, and its checkbox's words (its text
    and description)."""

    review_id: str
    digest: str | None
    label: str
    about: str = ""


@dataclass(frozen=True)
class BatchClick:
    """A click on *Decide several*: in the Home tab (no channel) or in ``/crew pending``'s
    answer (its channel)."""

    user_id: str
    trigger_id: str | None
    channel_id: str | None


@dataclass(frozen=True)
class BatchChoice:
    """The reviews ticked, with the decision and its reason: the choosing modal submitted,
    or its confirmation's button clicked."""

    user_id: str
    view_id: str
    kind: DecisionKind
    text: str
    picked: tuple[Picked, ...]
    channel_id: str | None


def parse_batch_click(body: Mapping[str, Any]) -> BatchClick:
    """A ``block_actions`` payload of a click on ``countersign:batch``."""
    body, clicked = _click(body)
    _suffix(_str(clicked, "action_id", "actions[0]"), ACTION_PREFIX, (BATCH,), "action_id")
    channel_id, _ts = _clicked_message(body)
    return BatchClick(_user(body), _optional_id(body, "trigger_id", "payload"), channel_id)


@dataclass(frozen=True)
class ShownClick:
    """A click on *Approve all N shown* or *Reject all N shown*: the reviews it was shown
    with (their ids and digests; no words yet) and where (the Home tab: no channel)."""

    click: BatchClick
    kind: DecisionKind
    picked: tuple[Picked, ...]


def shown_value(picks: Sequence[tuple[str, str | None]]) -> str:
    """The value of *Approve all N shown*: each review (its id and digest as shown)."""
    return ",".join(pick_value(review_id, digest) for review_id, digest in picks)


def parse_shown_click(body: Mapping[str, Any]) -> ShownClick:
    """A ``block_actions`` payload of a click on ``countersign:batch_approve_shown`` (or
    ``…reject_shown``)."""
    body, clicked = _click(body)
    action = _str(clicked, "action_id", "actions[0]")
    word = _suffix(action, ACTION_PREFIX, tuple(SHOWN.values()), "action_id")
    kind = next(k for k, suffix in SHOWN.items() if suffix == word)
    items = _str(clicked, "value", "actions[0]").split(",")
    if len(items) > MAX_BATCH:
        raise PayloadError(f"actions[0].value names more than {MAX_BATCH} reviews")
    channel_id, _ts = _clicked_message(body)
    click = BatchClick(_user(body), _optional_id(body, "trigger_id", "payload"), channel_id)
    return ShownClick(click, kind, tuple(_pick(i, "actions[0].value") for i in items))


def parse_batch_submission(body: Mapping[str, Any]) -> BatchChoice:
    """A ``view_submission`` of the choosing modal: what was ticked, the decision (radio
    buttons ``decision``) and the reason (``text``)."""
    body, view, meta = _view(body)
    _suffix(_str(view, "callback_id", "view"), callback_id(""), (BATCH,), "callback_id")
    values = _state_values(view)
    word = _input_text(values, "decision", "decision")
    kind = _decision(ACTION_PREFIX + word, ACTION_PREFIX, DECISIONS, "decision")
    return BatchChoice(
        user_id=_user(body),
        view_id=_id(view, "id", "view"),
        kind=kind,
        text=_input_text(values, "text"),
        picked=_picked(values),
        channel_id=_optional_id(meta, "channel_id", "private_metadata"),
    )


def parse_batch_confirm(body: Mapping[str, Any]) -> BatchChoice:
    """A ``block_actions`` payload of a click on the confirmation's button: the view it was
    clicked in (its id; the reviews, reason and channel its ``private_metadata`` carries)."""
    body, clicked = _click(body)
    _suffix(_str(clicked, "action_id", "actions[0]"), ACTION_PREFIX, (CONFIRM,), "action_id")
    word, _, text = _str(clicked, "value", "actions[0]").partition(" ")
    kind = _decision(ACTION_PREFIX + word, ACTION_PREFIX, DECISIONS, "value")
    view = _optional_mapping(body, "view")
    if view is None:
        raise PayloadError("a confirmation's click comes from its modal: no view")
    _suffix(_str(view, "callback_id", "view"), callback_id(""), (CONFIRM,), "callback_id")
    raw = _str(view, "private_metadata", "view")
    try:
        meta = json.loads(raw) if len(raw) <= _MAX_METADATA else None
    except (ValueError, RecursionError):
        meta = None
    items = meta.get("items") if isinstance(meta, dict) else None
    if not isinstance(meta, dict) or not isinstance(items, list) or len(items) > MAX_BATCH:
        raise PayloadError("view.private_metadata is not ours")
    where = "view.private_metadata.items"
    return BatchChoice(
        user_id=_user(body),
        view_id=_id(view, "id", "view"),
        kind=kind,
        text=text,
        picked=tuple(_pick(i if isinstance(i, str) else "", where) for i in items),
        channel_id=_optional_id(meta, "channel_id", "private_metadata"),
    )


def _picked(values: Mapping[str, Any]) -> tuple[Picked, ...]:
    """The reviews ticked, in the order of their inputs (``pick:0``, ``pick:1``, …)."""
    picked: list[Picked] = []
    groups = sorted(
        (k for k in values if isinstance(k, str) and k.startswith(PICK_PREFIX)),
        key=lambda k: (len(k), k),
    )
    for block_id in groups:
        where = f"view.state.values.{block_id[:40]}"
        entry = _mapping(_mapping(values[block_id], where).get(block_id), where)
        chosen = entry.get("selected_options") or []
        if not isinstance(chosen, list):
            raise PayloadError(f"{where}.selected_options must be a list")
        for option in chosen:
            option = _mapping(option, where)
            value = _str(option, "value", where)
            picked.append(
                _pick(value, where, _words(option, "text"), _words(option, "description"))
            )
    return tuple(picked)


def _pick(value: str, where: str, label: str = "", about: str = "") -> Picked:
    """A review chosen, from its value (``<review id> <digest>``)."""
    review_id, _, digest = value.partition(" ")
    if not digest or len(digest) > _MAX_DIGEST or not digest.isprintable():
        raise PayloadError(f"{where}: a review's value is not ours")
    shown = None if digest == NO_DIGEST else digest
    return Picked(_id({"value": review_id}, "value", where), shown, label, about)


def _words(option: Mapping[str, Any], key: str) -> str:
    """An option's text object's words; empty where it has none."""
    shown = _optional_mapping(option, key) or {}
    words = shown.get("text")
    return words if isinstance(words, str) else ""


__all__ = [
    "BATCH",
    "CARRIED_DIGITS",
    "CONFIRM",
    "DECISIONS",
    "MAX_BATCH",
    "REASON_LIMIT",
    "SHOWN",
    "BatchChoice",
    "BatchClick",
    "BatchItem",
    "ItemResult",
    "Picked",
    "ShownClick",
    "parse_batch_click",
    "parse_batch_confirm",
    "parse_batch_submission",
    "parse_shown_click",
    "pick_block_id",
    "pick_value",
    "shown_value",
]
