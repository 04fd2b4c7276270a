"""The ``/crew`` slash command: its text parsed into a typed command, or a ``CommandError``.

Why a hand-written grammar and not ``shlex``: Slack changes what people type. It turns
``"`` and ``'`` into smart quotes on some clients (U+201C/U+201D and U+2018/U+2019),
sends ``&``, ``<`` and ``>`` as ``&amp;``, ``&lt;`` and ``&gt;``, and an apostrophe inside
a word (``don't``, often U+2019) must not open a quote. ``shlex`` gets all three wrong
and raises ``ValueError`` on the rest.

Grammar (verbs are case-insensitive; empty text means ``help``)::

    run NAME key=value ...     NAME: [a-z0-9][a-z0-9_-]* (given in any case, lowercased)
    list | pending | help      no arguments (``help`` ignores any)
    status RUN_ID | cancel RUN_ID
    away --until DATE --to @person | back      (in either order; the person a mention)

A value is either bare (up to the next whitespace; it may contain ``=`` and quotes) or
quoted: it starts right after ``=`` with ``"``, ``“``, ``”`` (closed by any of the three)
or ``'``, U+2018, U+2019 (closed by any of those). A quote closes the value only when
whitespace or the end of the text follows it, so ``'don't stop'`` is one value. Inside
quotes a backslash makes the next quote or backslash literal; other backslashes stay.
Keys are identifiers (``[A-Za-z_][A-Za-z0-9_]*``) because crews use them as
``{placeholders}``; a key given twice is an error.

The manifest sets ``should_escape``, so Slack sends what it recognised as markup: a user
mentioned as ``<@U123|dana>``, a channel as ``<#C123|general>``, a link as ``<https://x>``
or ``<https://x|x>``, ``@here`` as ``<!here>``. The text is read back as the person typed
it (``@dana``, ``#general``, ``https://x``), and a value that is exactly one user mention
is also kept as that user's id (``RunCommand.mentions``): the only way to name a person
that a typed ``<@U123>`` (sent as ``&lt;@U123&gt;``) cannot forge.

Example:
    >>> parse_command('run blog topic="durable agents" tone=dry')
    RunCommand(crew='blog', inputs={'topic': 'durable agents', 'tone': 'dry'}, mentions={})
    >>> parse_command("run deal approver=<@U0DANA01|dana> url=<https://x.io>").mentions
    {'approver': 'U0DANA01'}
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from bot.errors import BotError
from bot.slack import text as t
from bot.slack.mrkdwn import unescape

__all__ = [
    "USAGE",
    "AwayCommand",
    "BackCommand",
    "CancelCommand",
    "Command",
    "CommandError",
    "HelpCommand",
    "ListCommand",
    "PendingCommand",
    "RunCommand",
    "StatusCommand",
    "format_run",
    "parse_command",
]

USAGE = t.USAGE

_CREW = re.compile(r"[a-z0-9][a-z0-9_-]*")
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_RUN_ID = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
_DOUBLE = frozenset('"“”')
_SINGLE = frozenset("'\u2018\u2019")
_QUOTE_FAMILY = {q: _DOUBLE for q in _DOUBLE} | {q: _SINGLE for q in _SINGLE}
_MARKUP = re.compile(r"<([^<>|]*)(?:\|([^<>]*))?>")
_MENTION = re.compile(r"@([UW][A-Z0-9]{2,})")

# Where user mentions are in the text read back: start -> (end, user id).
Mentions = dict[int, tuple[int, str]]


@dataclass(frozen=True)
class RunCommand:
    """``/crew run NAME key=value ...``: start a run of ``crew`` with these inputs.

    ``mentions`` maps each input whose value is one user mention to that user's id.
    """

    crew: str
    inputs: dict[str, str]
    mentions: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ListCommand:
    """``/crew list``: the configured crews."""


@dataclass(frozen=True)
class StatusCommand:
    """``/crew status RUN_ID``."""

    run_id: str


@dataclass(frozen=True)
class CancelCommand:
    """``/crew cancel RUN_ID``."""

    run_id: str


@dataclass(frozen=True)
class PendingCommand:
    """``/crew pending``: reviews waiting for a decision."""


@dataclass(frozen=True)
class AwayCommand:
    """``/crew away --until DATE --to @person``: the person asking is away through ``until``
    (as typed: the service reads it) and ``delegate`` (a user id) reviews for them."""

    until: str
    delegate: str


@dataclass(frozen=True)
class BackCommand:
    """``/crew back``: the person asking is back."""


@dataclass(frozen=True)
class HelpCommand:
    """``/crew help`` or ``/crew`` alone."""


Command = (
    RunCommand
    | ListCommand
    | StatusCommand
    | CancelCommand
    | PendingCommand
    | AwayCommand
    | BackCommand
    | HelpCommand
)


class CommandError(BotError, ValueError):
    """The text is not a valid ``/crew`` command.

    ``message`` is ready to show the person as an ephemeral reply (mrkdwn, their input
    escaped) and already ends with the usage line of what they tried.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def parse_command(text: str) -> Command:
    """Parse the ``text`` of a ``/crew`` slash command.

    Raises:
        CommandError: for any text that is not a command; nothing else is ever raised.
    """
    if not isinstance(text, str):
        raise CommandError(t.USAGE)
    text, mentions = _read_back(text)
    text, mentions = _lstrip(text.rstrip(), mentions)
    if not text:
        return HelpCommand()
    verb, _, rest = _split_word(text)
    verb = verb.lower()
    rest, mentions = _lstrip(rest, _shift(mentions, len(text) - len(rest)))
    rest = rest.rstrip()
    if verb == "run":
        return _parse_run(rest, mentions)
    if verb == "help":
        return HelpCommand()
    if verb in ("list", "pending", "back"):
        if rest:
            usages = {"list": t.USAGE_LIST, "pending": t.USAGE_PENDING, "back": t.USAGE_BACK}
            raise CommandError(t.no_arguments(verb, usages[verb]))
        simple: dict[str, Command] = {
            "list": ListCommand(),
            "pending": PendingCommand(),
            "back": BackCommand(),
        }
        return simple[verb]
    if verb == "away":
        return _parse_away(rest, mentions)
    if verb in ("status", "cancel"):
        usage = t.USAGE_STATUS if verb == "status" else t.USAGE_CANCEL
        run_id = _run_id(rest, usage)
        return StatusCommand(run_id) if verb == "status" else CancelCommand(run_id)
    raise CommandError(t.unknown_verb(verb))


def format_run(command: RunCommand) -> str:
    """The text that parses back to ``command``: every value double-quoted and escaped.

    Used to show a person the command to run again, and by the round-trip tests.
    """
    parts = ["run", command.crew]
    for key, value in command.inputs.items():
        quoted = "".join("\\" + c if c == "\\" or c in _DOUBLE else c for c in value)
        parts.append(f'{key}="{quoted}"')
    return " ".join(parts)


def _read_back(escaped: str) -> tuple[str, Mentions]:
    """The text as the person typed it, from what Slack sent, and where its user mentions
    are."""
    out: list[str] = []
    mentions: Mentions = {}
    size, pos = 0, 0
    for markup in _MARKUP.finditer(escaped):
        before = unescape(escaped[pos : markup.start()])
        target, label = markup[1], markup[2]
        if label:
            shown = unescape(label)
        elif target.startswith("!"):
            shown = "@" + target[1:].split("^")[-1]
        else:
            shown = unescape(target)
        sigil = target[:1]
        if label and sigil in "@#" and not shown.startswith(sigil):
            shown = sigil + shown  # Slack's label is the bare handle or channel name
        user = _MENTION.fullmatch(target)
        start = size + len(before)
        if user is not None:
            mentions[start] = (start + len(shown), user[1])
        out += [before, shown]
        size = start + len(shown)
        pos = markup.end()
    out.append(unescape(escaped[pos:]))
    return "".join(out), mentions


def _shift(mentions: Mentions, by: int) -> Mentions:
    """The mentions of a text's suffix that starts ``by`` characters in."""
    return {start - by: (end - by, user) for start, (end, user) in mentions.items() if start >= by}


def _lstrip(text: str, mentions: Mentions) -> tuple[str, Mentions]:
    stripped = text.lstrip()
    return stripped, _shift(mentions, len(text) - len(stripped))


def _split_word(text: str) -> tuple[str, str, str]:
    """``(first word, separator, rest)``, splitting on any whitespace (Slack sends NBSPs)."""
    for i, char in enumerate(text):
        if char.isspace():
            return text[:i], char, text[i + 1 :]
    return text, "", ""


def _run_id(rest: str, usage: str) -> str:
    if not rest:
        raise CommandError(t.missing_run_id(usage))
    word, _, extra = _split_word(rest)
    # Ids are shown in inline code; a copy from some clients keeps the backticks.
    run_id = word.strip("`")
    if extra.strip() or not _RUN_ID.fullmatch(run_id):
        raise CommandError(t.bad_run_id(rest, usage))
    return run_id


def _parse_run(rest: str, mentions: Mentions) -> RunCommand:
    if not rest:
        raise CommandError(t.MISSING_CREW)
    name, _, after = _split_word(rest)
    crew = name.lower()
    if not _CREW.fullmatch(crew):
        raise CommandError(t.bad_crew_name(name))
    inputs, mentioned = _parse_inputs(after, _shift(mentions, len(rest) - len(after)))
    return RunCommand(crew, inputs, mentioned)


def _parse_away(rest: str, mentions: Mentions) -> AwayCommand:
    """``--until DATE`` and ``--to @person``, in either order; the person must be a mention
    (Slack's ``<@U…>``, which a typed id cannot forge)."""
    words = [(m.start(), m.end(), m.group()) for m in re.finditer(r"\S+", rest)]
    until: str | None = None
    delegate: str | None = None
    pos = 0
    while pos < len(words):
        _, _, option = words[pos]
        value = words[pos + 1] if pos + 1 < len(words) else None
        if option == "--until" and value is not None:
            until = value[2]
        elif option == "--to" and value is not None:
            mention = mentions.get(value[0])
            if mention is None or mention[0] != value[1]:
                raise CommandError(t.AWAY_NEEDS_MENTION)
            delegate = mention[1]
        elif option not in ("--until", "--to"):
            raise CommandError(t.away_extra(option))
        pos += 2
    if until is None:
        raise CommandError(t.AWAY_NEEDS_UNTIL)
    if delegate is None:
        raise CommandError(t.AWAY_NEEDS_MENTION)
    return AwayCommand(until, delegate)


def _parse_inputs(text: str, mentions: Mentions) -> tuple[dict[str, str], dict[str, str]]:
    inputs: dict[str, str] = {}
    mentioned: dict[str, str] = {}
    pos, end = 0, len(text)
    while True:
        while pos < end and text[pos].isspace():
            pos += 1
        if pos == end:
            return inputs, mentioned
        start = pos
        while pos < end and text[pos] != "=" and not text[pos].isspace():
            pos += 1
        key = text[start:pos]
        if pos == end or text[pos] != "=":
            raise CommandError(t.not_key_value(key))
        if not _KEY.fullmatch(key):
            raise CommandError(t.bad_key(key))
        if key in inputs:
            raise CommandError(t.duplicate_key(key))
        pos += 1
        if pos < end and text[pos] in _QUOTE_FAMILY:
            start = pos + 1
            inputs[key], pos = _quoted(text, pos, key)
            stop = pos - 1
        else:
            start = pos
            while pos < end and not text[pos].isspace():
                pos += 1
            inputs[key], stop = text[start:pos], pos
        found = mentions.get(start)
        if found is not None and found[0] == stop:
            mentioned[key] = found[1]


def _quoted(text: str, pos: int, key: str) -> tuple[str, int]:
    """The value of a quoted string that opens at ``pos``, and the position after it."""
    closers = _QUOTE_FAMILY[text[pos]]
    out: list[str] = []
    pos += 1
    end = len(text)
    while pos < end:
        char = text[pos]
        if char == "\\" and pos + 1 < end and (text[pos + 1] == "\\" or text[pos + 1] in closers):
            out.append(text[pos + 1])
            pos += 2
            continue
        if char in closers and (pos + 1 == end or text[pos + 1].isspace()):
            return "".join(out), pos + 1
        out.append(char)
        pos += 1
    raise CommandError(t.unterminated_quote(key))
