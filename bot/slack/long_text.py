"""A text longer than one Slack input, edited in several: cut where nothing is lost.

A ``plain_text_input`` holds at most 3,000 characters (UTF-16 code units). A longer draft
or argument is shown in consecutive inputs ("part 1 of 4", …), each within the limit, cut
at a paragraph break, else a line break, else a space, else anywhere not touching
whitespace. What lies between two parts (the whitespace at a cut, which Slack may trim
from an input's value) travels in the modal's ``private_metadata`` as ``joins``, so that
the parts read back join into the exact text that was shown. Nothing is ever cut away:
past what a modal holds (``bot.slack.modals``) the edit is refused, saying how else to
make it.
"""

from __future__ import annotations

from collections.abc import Mapping

# The most whitespace kept between two parts (a cut in a longer run moves elsewhere): the
# joins of a modal's parts must fit Slack's 3,000 characters of private_metadata.
MAX_JOIN = 4
PART_SEPARATOR = "#"  # block_id of part 2 of input "text": "text#2"


def utf16_len(text: str) -> int:
    """Slack's length: characters outside the BMP count twice."""
    return len(text) + sum(1 for char in text if ord(char) > 0xFFFF)


def _prefix_chars(text: str, units: int) -> int:
    """How many characters of ``text`` fit in ``units`` UTF-16 code units."""
    used = 0
    for i, char in enumerate(text):
        used += 2 if ord(char) > 0xFFFF else 1
        if used > units:
            return i
    return len(text)


def _cut(rest: str, fits: int) -> tuple[int, int]:
    """Where to cut ``rest``, of which ``fits`` characters fit: (end of part, start of next)."""
    floor = fits // 2
    for mark in ("\n\n", "\n", " "):
        at = rest.rfind(mark, floor, fits)
        while at > floor:
            start, end = at, at + 1
            while start > 0 and rest[start - 1].isspace():
                start -= 1
            while end < len(rest) and rest[end].isspace():
                end += 1
            if end - start <= MAX_JOIN and start > 0 and end < len(rest):
                return start, end
            at = rest.rfind(mark, floor, start)
    at = max(fits, 1)
    while at > max(floor, 1) and (rest[at - 1].isspace() or rest[at].isspace()):
        at -= 1
    return at, at


def split(text: str, limit: int) -> tuple[list[str], list[str]]:
    """``text`` in parts of at most ``limit`` UTF-16 units, and what lies between them.

    ``"".join`` of parts interleaved with joins (``join(parts, joins)``) is ``text``.
    """
    parts: list[str] = []
    joins: list[str] = []
    rest = text
    while utf16_len(rest) > limit:
        end, start = _cut(rest, _prefix_chars(rest, limit))
        parts.append(rest[:end])
        joins.append(rest[end:start])
        rest = rest[start:]
    parts.append(rest)
    return parts, joins


def join(parts: list[str], joins: list[str]) -> str:
    """The text of parts read back (a part left empty adds nothing, nor does its join)."""
    out = parts[0] if parts else ""
    for index, part in enumerate(parts[1:]):
        if not part:
            continue
        glue = joins[index] if index < len(joins) else "\n"
        out = f"{out}{glue}{part}" if out else part
    return out


def part_id(block_id: str, number: int) -> str:
    """The block_id of part ``number`` (from 1) of the input ``block_id``."""
    return block_id if number == 1 else f"{block_id}{PART_SEPARATOR}{number}"


def read(values: Mapping[str, str], block_id: str, joins: Mapping[str, list[str]]) -> str:
    """The whole text of the input ``block_id`` from its parts' values (``values`` by block_id)."""
    glue = joins.get(block_id, [])
    parts = [values.get(part_id(block_id, n), "") for n in range(1, len(glue) + 2)]
    return join(parts, glue)


def joins_of(value: object) -> dict[str, list[str]] | None:
    """The joins read back from ``private_metadata``; None when they are not joins."""
    if not isinstance(value, dict):
        return None
    for glue in value.values():
        if not isinstance(glue, list) or not all(isinstance(g, str) for g in glue):
            return None
    return value


def is_part(block_id: str) -> bool:
    """Whether ``block_id`` is part 2 or later of an input (read with its first part)."""
    base, sep, number = block_id.rpartition(PART_SEPARATOR)
    return bool(base and sep and number.isdigit())
