"""A message to post, and the pieces of Block Kit every message of the bot is built from:
a header, escaped text in sections, a list within a message's budget, the revise button.
``bot.slack.review_blocks`` builds a review's messages, ``bot.slack.blocks`` the rest."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.slack import block_text as t
from bot.slack.elements import (
    SECTION_LIMIT,
    Block,
    context,
    plain,
    section,
    split_text,
)
from bot.slack.mrkdwn import escape
from bot.slack.payloads import REVISE, action_id

# Of a message's ~12k chars of block text (MAX_BLOCK_TEXT_TOTAL in the stand-in; Slack's
# msg_blocks_too_long hits between 11.3k and 13.3k), the draft gets 7000; the rest is the
# header, the task, a tool call's arguments and, once decided, the decision.
DRAFT_PER_MESSAGE = 7000
LISTING_BUDGET = 9000  # chars of a list in one message


@dataclass(frozen=True)
class Message:
    """A message to post: ``text`` is the notification fallback, ``blocks`` what is shown."""

    text: str
    blocks: list[dict[str, Any]]


def header(text: str) -> Block:
    return {"type": "header", "text": plain(text, 150)}


def text_sections(raw: str) -> list[Block]:
    if not raw.strip():
        return [section(t.EMPTY_DRAFT)]
    return [section(escape(piece)) for piece in split_text(raw, SECTION_LIMIT)]


def listing(lines: list[str], budget: int = LISTING_BUDGET) -> list[Block]:
    """Lines of mrkdwn packed into sections, within ``budget`` chars; then "…and N more".

    Keeps a list (crews, reviews) inside one message's ~12k chars of block text.
    """
    sections: list[str] = []
    used = 0
    for shown, line in enumerate(lines):
        line = line[:SECTION_LIMIT]
        if used + len(line) > budget:
            return [*map(section, sections), context(t.more_not_shown(len(lines) - shown))]
        used += len(line) + 1
        if sections and len(sections[-1]) + 1 + len(line) <= SECTION_LIMIT:
            sections[-1] += "\n" + line
        else:
            sections.append(line)
    return [section(s) for s in sections]


def revise_button(run_id: str) -> Block:
    return {
        "type": "button",
        "action_id": action_id(REVISE),
        "text": plain(t.REVISE_BUTTON, 75),
        "value": run_id,
    }
