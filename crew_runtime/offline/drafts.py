"""The drafts the scripted model writes, and :func:`parse_draft`, which reads the one-line
kind back.

The draft is one line that shows what the model saw, every value JSON-encoded so
:func:`parse_draft` can read it back exactly (wrapped here)::

    Outline v2 on "Outline otters" | feedback: ["make it shorter", "add a title"]
    | saw_previous_draft: yes | context: null | notes: ["search: 3 facts about otters"]

``v2`` counts the feedback messages; ``on`` is the first line of the task description;
``saw_previous_draft`` says whether an earlier draft of this task is in the conversation
(CrewAI leaves it out on the ReAct path; the runtime's review provider puts it back);
``context`` is the earlier tasks' output CrewAI put in the task prompt; ``notes`` are the
tool observations of the task so far, as ``"<tool>: <observation>"``. Inside the values the
colon of ``Final Answer:``, ``Action:`` and ``Observation:`` is written ``\\u003a``, so CrewAI's
parser never mistakes quoted feedback for a step.

Readable drafts (``draft_style="readable"``), for demos: the same reply rules, but the draft is
written for a person, not for :func:`parse_draft`. A version line, what the reviewer asked
for so far, the agent's text (``draft_body``, which may use the :data:`PLACEHOLDERS`; the
task's first line when empty), what the tools returned and what the draft was built on::

    Outline (version 2)
    Revised after your feedback:
    ✓ add a section on costs

    Durable agents: an outline
    1. Why durable agents matter now
    ...

    Gathered along the way:
    • search: …

    Built on: "Outline (version 2)"

The version counts from 1 (``v0`` of the one-line format is version 1). The colon of
``Final Answer:``, ``Action:`` and ``Observation:`` is written as U+A789 (modifier letter colon,
which reads as one) anywhere in it, for the same reason as above.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Final, Literal

from crew_runtime.offline.conversation import FINAL_ANSWER_MARK, Conversation, first_line
from crew_runtime.offline.plan import fill, placeholder_values

# Words CrewAI's ReAct parser acts on (agents/parser.py). Inside the draft's JSON strings their
# colon is written as \u003a: the parser no longer sees them, json.loads still does.
_REACT_KEYWORD_RE: Final = re.compile(r"(Final Answer|Action|Observation)(\s*\d*\s*):")

# In readable drafts (plain text, no JSON to hide it in) the colon becomes U+A789, which
# reads as one.
_READABLE_COLON: Final = "\ua789"

DraftStyle = Literal["line", "readable"]
"""``line``: one line :func:`parse_draft` reads back; ``readable``: a draft for people."""


@dataclass(frozen=True)
class ScriptedDraft:
    """A draft read back by :func:`parse_draft`."""

    label: str
    revision: int
    subject: str
    feedback: tuple[str, ...]
    saw_previous_draft: bool
    context: str | None
    notes: tuple[str, ...]


def parse_draft(text: str) -> ScriptedDraft:
    """Read a draft written by :class:`ScriptedLLM` back into its parts.

    Accepts the draft alone or a reply ending in ``Final Answer: <draft>``.

    Raises:
        ValueError: ``text`` is not a scripted draft.
    """
    if FINAL_ANSWER_MARK in text:
        text = text.rsplit(FINAL_ANSWER_MARK, 1)[1]
    text = text.strip()
    head = re.match(r"(?P<label>[^|\n]+?) v(?P<revision>\d+) on ", text)
    if head is None:
        raise ValueError(f"not a scripted draft: {text[:80]!r}")
    reader = _Reader(text, head.end())
    subject = reader.value(str)
    feedback = reader.field("feedback", list)
    saw = reader.field("saw_previous_draft", None)
    context = reader.field("context", str | None)
    notes = reader.field("notes", list)
    reader.end()
    return ScriptedDraft(
        label=head["label"],
        revision=int(head["revision"]),
        subject=subject,
        feedback=tuple(str(f) for f in feedback),
        saw_previous_draft=saw == "yes",
        context=context,
        notes=tuple(str(n) for n in notes),
    )


def line_draft(label: str, convo: Conversation) -> str:
    def j(value: object) -> str:
        return _REACT_KEYWORD_RE.sub(r"\1\2\\u003a", json.dumps(value, ensure_ascii=False))

    notes = [f"{tool}: {observed}" for tool, observed in convo.observations]
    return (
        f"{label} v{len(convo.feedback)} on {j(convo.subject)}"
        f" | feedback: {j(list(convo.feedback))}"
        f" | saw_previous_draft: {'yes' if convo.saw_previous_draft else 'no'}"
        f" | context: {j(convo.context)}"
        f" | notes: {j(notes)}"
    )


def readable_draft(label: str, convo: Conversation, body: str) -> str:
    """A draft for people: see this module's docstring."""
    parts = [f"{label} (version {len(convo.feedback) + 1})"]
    if convo.feedback:
        parts[0] += "\nRevised after your feedback:"
        parts[0] += "".join(f"\n✓ {_indented(text)}" for text in convo.feedback)
    values = placeholder_values(convo, len(convo.observations))
    parts.append(fill(body, values).strip() if body.strip() else convo.subject)
    if convo.observations:
        notes = (f"• {tool}: {_indented(observed)}" for tool, observed in convo.observations)
        parts.append("Gathered along the way:\n" + "\n".join(notes))
    if convo.context:
        parts.append(f'Built on: "{first_line(convo.context)}"')
    return _REACT_KEYWORD_RE.sub(rf"\1\2{_READABLE_COLON}", "\n\n".join(parts))


def _indented(text: str) -> str:
    """Continuation lines of a bullet, indented under it."""
    return "\n  ".join(line.rstrip() for line in text.strip().splitlines())


class _Reader:
    """Walks a draft's ``| key: <json>`` fields for :func:`parse_draft`."""

    def __init__(self, text: str, pos: int) -> None:
        self.text = text
        self.pos = pos
        self.decoder = json.JSONDecoder()

    def value(self, expected: Any) -> Any:
        try:
            value, self.pos = self.decoder.raw_decode(self.text, self.pos)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not a scripted draft: {exc}") from exc
        if expected is not None and not isinstance(value, expected):
            raise ValueError(f"not a scripted draft: unexpected {value!r}")
        return value

    def field(self, key: str, expected: Any) -> Any:
        prefix = f" | {key}: "
        if not self.text.startswith(prefix, self.pos):
            raise ValueError(f"not a scripted draft: expected {prefix!r} at {self.pos}")
        self.pos += len(prefix)
        if expected is None:  # the bare word yes/no
            word = re.compile(r"yes|no").match(self.text, self.pos)
            if word is None:
                raise ValueError("not a scripted draft: saw_previous_draft is not yes/no")
            self.pos = word.end()
            return word.group()
        return self.value(expected)

    def end(self) -> None:
        if self.pos != len(self.text):
            raise ValueError(f"not a scripted draft: trailing text {self.text[self.pos :]!r}")
