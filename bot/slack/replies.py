"""A threaded reply, in plain words, turned into a typed decision by fixed rules.

Why rules and not an LLM: a reviewer must be able to predict what their words do, and
the same reply must always mean the same thing (decisions are typed, never an LLM's
reading of a person's words). The rules:

1. Leading mentions (``<@U123>``, ``<@U123|name>``) and surrounding whitespace are
   removed; Slack's ``&amp;``, ``&lt;`` and ``&gt;`` are turned back into ``&``, ``<``
   and ``>``. Nothing else of the text changes.
2. **Question**: any non-empty reply is the answer, in full.
3. **Task review**:

   - a reply made only of approval phrases (:data:`APPROVE_PHRASES`, any case, with
     punctuation around them: ``LGTM!``, ``approved, ship it``, ``:+1:``) approves;
   - ``reject`` or ``rejected``, optionally followed by ``:``, ``-``, an en dash or ``—`` and a
     reason, rejects (``reject: off topic``; no reason gives ``text=None``);
   - anything else is a change request, the whole reply being the feedback
     (``approve but shorten the intro`` asks for changes).

4. **Tool approval**: approval phrases approve; ``deny``, ``denied``, ``reject`` or
   ``rejected`` (with an optional reason, as above) rejects; anything else is not a
   decision (``None``): the bot answers with a hint, since a tool call has no feedback.

Emoji skin tones (``:+1::skin-tone-3:``, 👍🏽) count as the plain emoji. Nothing here
raises: a reply that fits no rule is ``None``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bot.slack.mrkdwn import unescape
from storage.status import DecisionKind, ReviewKind

__all__ = ["APPROVE_PHRASES", "REJECT_WORDS", "Reply", "interpret_reply"]

APPROVE_PHRASES: tuple[str, ...] = (
    "approve",
    "approved",
    "lgtm",
    "ship it",
    "looks good",
    "looks good to me",
    "go ahead",
    "+1",
    ":+1:",
    ":thumbsup:",
    ":white_check_mark:",
    ":heavy_check_mark:",
    "👍",
    "✅",
)
"""Replies made only of these (any case, any punctuation between) approve."""

REJECT_WORDS: dict[ReviewKind, tuple[str, ...]] = {
    ReviewKind.TASK_REVIEW: ("rejected", "reject"),
    ReviewKind.TOOL_APPROVAL: ("rejected", "reject", "denied", "deny"),
}
"""The words that start a rejection, per review kind (longest first)."""

# "<@U0BOT>: approve" - but the colon of "<@U0BOT> :+1:" belongs to the emoji.
_MENTION = re.compile(r"^\s*<@[A-Z0-9]+(?:\|[^>]*)?>(?:\s*[,:](?=\s|$))?\s*")
_SKIN_TONE = re.compile(r":skin-tone-[2-6]:|[\U0001F3FB-\U0001F3FF]")
# Punctuation a person puts around phrases: "LGTM!", "approved, ship it.", "ok…".
_FILLER = frozenset(" \t\n\r\u00a0.,;:!?…")
_PHRASES_LONGEST_FIRST = sorted(APPROVE_PHRASES, key=len, reverse=True)
_REASON_SEPARATOR = re.compile(r"\s*[:\-\u2013\u2014]\s*|\s+")  # :, -, en/em dash


@dataclass(frozen=True)
class Reply:
    """The decision a reply stands for; ``text`` is the answer, feedback or reason."""

    decision: DecisionKind
    text: str | None


def interpret_reply(text: str, kind: ReviewKind) -> Reply | None:
    """Map a thread reply on a review of ``kind`` to a decision, or ``None``.

    Example:
        >>> interpret_reply("<@U0BOT> LGTM!", ReviewKind.TASK_REVIEW)
        Reply(decision=<DecisionKind.APPROVE: 'approve'>, text=None)
        >>> interpret_reply("reject — off topic", ReviewKind.TASK_REVIEW).text
        'off topic'
    """
    if not isinstance(text, str):
        return None
    body = _clean(text)
    if not body:
        return None
    if kind is ReviewKind.QUESTION:
        return Reply(DecisionKind.ANSWER, body)
    if kind not in REJECT_WORDS:
        return None
    if is_approval(body):
        return Reply(DecisionKind.APPROVE, None)
    rejection = _rejection(body, REJECT_WORDS[kind])
    if rejection is not None:
        return rejection
    if kind is ReviewKind.TASK_REVIEW:
        return Reply(DecisionKind.CHANGES, body)
    return None


def is_approval(text: str) -> bool:
    """Whether ``text`` is made only of approval phrases and punctuation."""
    rest = _SKIN_TONE.sub("", text).lower()
    matched = False
    while rest:
        for phrase in _PHRASES_LONGEST_FIRST:
            if rest.startswith(phrase) and _ends_word(rest, len(phrase)):
                rest = rest[len(phrase) :]
                matched = True
                break
        else:
            if rest[0] not in _FILLER:
                return False
            rest = rest[1:]
    return matched


def _ends_word(text: str, at: int) -> bool:
    """A phrase ending in a letter must not run into more letters ("approvedly")."""
    return at == len(text) or not (text[at - 1].isalnum() and text[at].isalnum())


def _clean(text: str) -> str:
    while True:
        stripped = _MENTION.sub("", text, count=1)
        if stripped == text:
            break
        text = stripped
    return unescape(text).strip()


def _rejection(text: str, words: tuple[str, ...]) -> Reply | None:
    lowered = text.lower()
    for word in words:
        if not lowered.startswith(word):
            continue
        rest = text[len(word) :]
        if not rest.strip(" \t\n\r\u00a0.!"):
            return Reply(DecisionKind.REJECT, None)
        separator = _REASON_SEPARATOR.match(rest)
        if separator is None:
            continue  # "rejection", "denying": a different word
        reason = rest[separator.end() :].strip()
        return Reply(DecisionKind.REJECT, reason or None)
    return None
