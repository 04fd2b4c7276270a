"""What changed between two drafts, word by word: for a revised draft's review in Slack and
for the audit record of an edited draft. Pure functions of the two texts; whoever shows the
changes renders the pieces (``bot.slack.diff_blocks`` as mrkdwn, :func:`plain` for the audit).
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher
from typing import Literal, NamedTuple

Op = Literal["=", "-", "+"]
CONTEXT_WORDS = 4  # unchanged words kept on each side of a change
# Past this many tokens (words and the spaces between them) on a side, difflib's heuristic
# for popular tokens is let on: the diff stays fast on a long draft, a little less minimal.
_EXACT_UP_TO = 4_000

_TOKENS = re.compile(r"\s+|\S+")


class Piece(NamedTuple):
    """A stretch of text kept (``=``), removed (``-``) or added (``+``)."""

    op: Op
    text: str


def word_diff(old: str, new: str) -> list[Piece]:
    """``old`` to ``new`` as pieces whose ``=`` and ``+`` texts make ``new`` and whose ``=``
    and ``-`` texts make ``old``; neighbouring pieces of one kind are joined."""
    a, b = _TOKENS.findall(old), _TOKENS.findall(new)
    matcher = SequenceMatcher(None, a, b, autojunk=max(len(a), len(b)) > _EXACT_UP_TO)
    opcodes = matcher.get_opcodes()
    pieces: list[Piece] = []
    removed = added = ""  # a change goes on across a mere space between two changes
    for n, (tag, i1, i2, j1, j2) in enumerate(opcodes):
        kept = "".join(a[i1:i2])
        between = 0 < n < len(opcodes) - 1 and not kept.strip()
        if tag == "equal" and not between:
            _add(pieces, "-", removed)
            _add(pieces, "+", added)
            removed = added = ""
            _add(pieces, "=", kept)
            continue
        removed += kept
        added += "".join(b[j1:j2])
    _add(pieces, "-", removed)
    _add(pieces, "+", added)
    return pieces


def _add(pieces: list[Piece], op: Op, text: str) -> None:
    if not text:
        return
    if pieces and pieces[-1].op == op:
        pieces[-1] = Piece(op, pieces[-1].text + text)
    else:
        pieces.append(Piece(op, text))


def changed(pieces: list[Piece]) -> bool:
    return any(p.op != "=" for p in pieces)


def hunks(pieces: list[Piece], context: int = CONTEXT_WORDS) -> list[list[Piece]]:
    """The changes with ``context`` unchanged words around each; changes closer than
    twice that share a hunk. Unchanged text between hunks is left out."""
    found: list[list[Piece]] = []
    current: list[Piece] = []
    for n, piece in enumerate(pieces):
        if piece.op != "=":
            current.append(piece)
            continue
        words = _TOKENS.findall(piece.text)
        last = n == len(pieces) - 1
        if current and not last and len(words) <= 4 * context:
            current.append(piece)  # a short gap between two changes
            continue
        if current:
            current.append(Piece("=", "".join(words[: 2 * context])))
            found.append(current)
            current = []
        if not last:
            current = [Piece("=", "".join(words[-2 * context :]))]
    if current:
        found.append(current)
    return [[p for p in hunk if p.text] for hunk in found]


def plain(pieces: list[Piece], context: int = CONTEXT_WORDS) -> str:
    """The changes as text, as ``git diff --word-diff`` writes them: ``[-removed-]``,
    ``{+added+}``, hunks separated by `` … ``; empty if nothing changed."""
    marks = {"=": ("", ""), "-": ("[-", "-]"), "+": ("{+", "+}")}
    return " … ".join(
        "".join(f"{marks[p.op][0]}{p.text}{marks[p.op][1]}" for p in hunk)
        for hunk in hunks(pieces, context)
    )
