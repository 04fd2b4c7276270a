"""The payloads of a flow's outcome buttons and of their feedback modal, read as
``bot.slack.payloads`` reads the others (checked once, a ``PayloadError`` otherwise).

A ``@human_feedback(emit=[...])`` review offers one button per outcome: ``action_id``
``countersign:outcome:<n>``, ``n`` the outcome's place in the review's ``outcomes``, and
``value`` the review id. The outcome's own words (the flow author's, any characters) never
travel in a payload: the handler reads them from the review by their place. The modal
(``callback_id`` ``countersign:modal:outcome``) carries the review id, the place and the
message clicked in ``private_metadata``; its feedback is ``state.values.text.value``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.slack.payloads import (
    ACTION_PREFIX,
    PayloadError,
    _click,
    _id,
    _input_text,
    _on_review,
    _optional_id,
    _state_values,
    _str,
    _suffix,
    _user,
    _view,
    callback_id,
)

OUTCOME = "outcome"
MAX_OUTCOMES = 100  # places 0-99: more than any message shows (its buttons are capped)
OUTCOME_PATTERN = re.compile(rf"^{ACTION_PREFIX}{OUTCOME}:(\d{{1,2}})$")
"""The ``action_id`` of a flow's outcome buttons."""


def outcome_action_id(index: int) -> str:
    """The ``action_id`` of the button of a review's outcome at place ``index``."""
    return f"{ACTION_PREFIX}{OUTCOME}:{index}"


@dataclass(frozen=True)
class OutcomeClick:
    """A click on the button of a flow review's outcome at place ``index``."""

    index: int
    review_id: str
    user_id: str
    channel_id: str | None
    message_ts: str | None
    trigger_id: str | None
    thread_ts: str | None = None


@dataclass(frozen=True)
class OutcomeSubmission:
    """The submitted feedback modal of an outcome; ``text`` is ``""`` when left empty."""

    index: int
    review_id: str
    user_id: str
    text: str
    view_id: str
    channel_id: str | None
    message_ts: str | None


def parse_outcome_click(body: Mapping[str, Any]) -> OutcomeClick:
    """A ``block_actions`` payload of a click on ``countersign:outcome:<n>``."""
    body, clicked = _click(body)
    found = OUTCOME_PATTERN.fullmatch(_str(clicked, "action_id", "actions[0]"))
    if found is None:
        raise PayloadError("actions[0].action_id is not one of our outcome buttons")
    return OutcomeClick(index=int(found.group(1)), **_on_review(body, clicked))


def parse_outcome_submission(body: Mapping[str, Any]) -> OutcomeSubmission:
    """A ``view_submission`` of an outcome's feedback modal."""
    body, view, meta = _view(body)
    _suffix(_str(view, "callback_id", "view"), callback_id(""), (OUTCOME,), "callback_id")
    index = meta.get("outcome")
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < MAX_OUTCOMES:
        raise PayloadError("view.private_metadata.outcome must be an outcome's place")
    return OutcomeSubmission(
        index=index,
        review_id=_id(meta, "review_id", "private_metadata"),
        user_id=_user(body),
        text=_input_text(_state_values(view), "text"),
        view_id=_id(view, "id", "view"),
        channel_id=_optional_id(meta, "channel_id", "private_metadata"),
        message_ts=_optional_id(meta, "message_ts", "private_metadata"),
    )
