"""A revised draft's changes against the previous round, word by word, as a message posted
before the draft: removed words struck out, added ones in bold, a few unchanged words around
each change, the rest left out. Past :data:`DIFF_BUDGET` characters the message shows the
first changes and says how many more there are: the whole draft follows it, as always."""

from __future__ import annotations

from itertools import groupby

from bot.slack import thread_text as t
from bot.slack.elements import Block, context, section
from bot.slack.message import Message
from bot.slack.mrkdwn import escape
from storage.word_diff import Piece, changed, hunks, word_diff

DIFF_BUDGET = 2500  # chars of changes shown, within one section (3000)
_MARK = {"-": "~", "+": "*"}


def changes_message(previous: str, revised: str, round_number: int) -> Message | None:
    """The changes from ``previous`` (round ``round_number``, from 1) to ``revised``; None
    when the words are the same (a draft shown again after a refused edit)."""
    pieces = word_diff(previous, revised)
    if not changed(pieces):
        return None
    shown, hidden = _shown(hunks(pieces))
    removed = sum(len(p.text.split()) for p in pieces if p.op == "-")
    added = sum(len(p.text.split()) for p in pieces if p.op == "+")
    blocks: list[Block] = [
        section(t.changes_title(round_number)),
        section(shown or t.CHANGES_TOO_LONG),
        context(t.changes_count(removed, added)),
    ]
    if hidden and shown:
        blocks.append(context(t.changes_not_shown(hidden)))
    return Message(t.changes_fallback(round_number), blocks)


def _shown(found: list[list[Piece]]) -> tuple[str, int]:
    """The hunks as mrkdwn, hunk after hunk and change after change while they fit
    :data:`DIFF_BUDGET`; and how many changes did not fit."""
    units = [
        (h > 0 and n == 0, list(group))
        for h, hunk in enumerate(found)
        for n, (_, group) in enumerate(groupby(hunk, key=lambda p: p.op == "="))
    ]
    total = sum(1 for _, group in units if group[0].op != "=")
    out, shown = "", 0
    for new_hunk, group in units:
        text = (" … " if new_hunk else "") + _rendered(out, group)
        if len(out) + len(text) > DIFF_BUDGET:
            break
        out += text
        shown += group[0].op != "="
    return (out if shown else ""), total - shown


def _rendered(before: str, group: list[Piece]) -> str:
    """Unchanged text, or one change (what it removed and added) as mrkdwn: escaped, each
    changed line's words inside its marks (Slack formats ``~x~`` and ``*x*`` only around
    text that starts and ends with a non-space, on one line)."""
    out = ""
    for piece in group:
        text = escape(piece.text)
        if piece.op == "=":
            out += text
            continue
        mark = _MARK[piece.op]
        lines = []
        for line in text.split("\n"):
            words = line.strip()
            lead = line[: len(line) - len(line.lstrip())]
            trail = line[len(line.rstrip()) :]
            lines.append(f"{lead}{mark}{words}{mark}{trail}" if words else line)
        marked = "\n".join(lines)
        end = (before + out)[-1:]
        if end and not end.isspace() and not marked[:1].isspace():
            out += " "  # a removal next to its replacement: two spans, not one word
        out += marked
    return out
