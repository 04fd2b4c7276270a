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
# Past this many tokens (words with the spaces after them) on a side, difflib's heuristic
# for popular tokens is let on: the diff stays fast on a long draft, a little less minimal.
_EXACT_UP_TO = 2_000

# Compared: a word with the spaces after it (no popular " " token to slow difflib down);
# counted around a change: words and spaces.
_TOKENS = re.compile(r"\s+|\S+\s*")
_SPACED = re.compile(r"\s+|\S+")
_LINES = re.compile(r"[^\n]*\n|[^\n]+")


class Piece(NamedTuple):
    """A stretch of text kept (``=``), removed (``-``) or added (``+``)."""

    op: Op
    text: str


def word_diff(old: str, new: str) -> list[Piece]:
    """``old`` to ``new`` as pieces whose ``=`` and ``+`` texts make ``new`` and whose ``=``
    and ``-`` texts make ``old``; neighbouring pieces of one kind are joined.

    A long draft is compared line by line first, then word by word within the lines that
    changed: a word diff of the whole would let difflib's heuristic for popular tokens
    (spaces, common words) on, and a one-word change in an article would read as the whole
    article replaced."""
    if max(len(old), len(new)) <= _EXACT_UP_TO * 2:  # at most that many tokens
        return _tokens_diff(old, new)
    a, b = _LINES.findall(old), _LINES.findall(new)
    pieces: list[Piece] = []
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            _add(pieces, "=", "".join(a[i1:i2]))
            continue
        for piece in _tokens_diff("".join(a[i1:i2]), "".join(b[j1:j2])):
            _add(pieces, piece.op, piece.text)
    return pieces


def _tokens_diff(old: str, new: str) -> list[Piece]:
    a, b = _TOKENS.findall(old), _TOKENS.findall(new)
    # What both start and end with is kept as it is: the heuristic (past _EXACT_UP_TO
    # tokens, one long paragraph) only ever sees what lies between.
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    pieces: list[Piece] = []
    _add(pieces, "=", "".join(a[:head]))
    middle_a, middle_b = a[head : len(a) - tail], b[head : len(b) - tail]
    auto = max(len(middle_a), len(middle_b)) > _EXACT_UP_TO
    opcodes = SequenceMatcher(None, middle_a, middle_b, autojunk=auto).get_opcodes()
    removed = added = ""  # a change goes on across a mere space between two changes
    for n, (tag, i1, i2, j1, j2) in enumerate(opcodes):
        kept = "".join(middle_a[i1:i2])
        between = 0 < n < len(opcodes) - 1 and not kept.strip()
        if tag == "equal" and not between:
            _change(pieces, removed, added)
            removed = added = ""
            _add(pieces, "=", kept)
            continue
        removed += kept
        added += "".join(middle_b[j1:j2])
    _change(pieces, removed, added)
    _add(pieces, "=", "".join(a[len(a) - tail :]))
    return pieces


def _change(pieces: list[Piece], removed: str, added: str) -> None:
    """A change; the spaces both its sides end with (a word's, compared with it) are kept."""
    same = 0
    while (
        removed
        and added
        and same < min(len(removed), len(added))
        and removed[-1 - same] == added[-1 - same]
        and removed[-1 - same].isspace()
    ):
        same += 1
    _add(pieces, "-", removed[: len(removed) - same])
    _add(pieces, "+", added[: len(added) - same])
    _add(pieces, "=", removed[len(removed) - same :])


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
        words = _SPACED.findall(piece.text)
        last = n == len(pieces) - 1
        if current and not last and len(words) <= 4 * context:
            current.append(piece)  # a short gap between two changes
            continue
        if current:
            after = words[: 2 * context] if words[0].isspace() else words[: 2 * context - 1]
            current.append(Piece("=", "".join(after)))
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
