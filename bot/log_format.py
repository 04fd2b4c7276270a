"""How a long-lived command (``serve``, ``worker``, ``demo``) writes its log lines.

``LOG_FORMAT=text`` (the default): one line of text per record, every field of it (the
arguments of the message: a ``by``, a crew's name, an error's text, all of which can come from
outside) with its control characters escaped (a newline as a backslash and an ``n``), so
that no field can start a line of its own, forged. ``LOG_FORMAT=json``: one
JSON object per line, for a log pipeline: ``time`` (UTC, ISO 8601), ``level``, ``logger``,
``message``, ``run_id`` and ``review_id`` where the line is about a run or a review (given
with the record, or set in the context by ``crew_runtime.log_fields``), and ``exception``
(the traceback) when there is one. The fields are what the text line says, no more: a line
that would not show a token in text does not show it in JSON.

aiohttp logs a request it cannot parse (a header with a stray carriage return or control
byte, as a token file saved with Windows line ends gives) at ERROR with a traceback whose
message holds the raw header line, token included. :func:`quiet_unparsable_requests` turns
each such record into one warning that names the client and what was wrong, and nothing of
what it sent.
"""

from __future__ import annotations

import json
import logging
import re
from datetime import UTC, datetime

from aiohttp.http_exceptions import HttpProcessingError

from crew_runtime import log_fields

__all__ = ["JsonFormatter", "TextFormatter", "escaped", "formatter", "quiet_unparsable_requests"]

TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

_FIELDS = ("run_id", "review_id")


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line (a newline in a message is escaped)."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, str] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        line.update(log_fields.current())
        for name in _FIELDS:  # given with the record (``extra=``): it says best
            value = record.__dict__.get(name)
            if isinstance(value, str):
                line[name] = value
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exception"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, ensure_ascii=False)


# C0 and C1 controls, DEL, and the Unicode line and paragraph separators.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def escaped(text: str) -> str:
    """``text`` with every control character written as an escape (a newline as the two
    characters backslash and ``n``, an escape character as backslash, ``x1b``)."""
    return _CONTROL.sub(_escape, text)


def _escape(found: re.Match[str]) -> str:
    char = found[0]
    if char in _NAMED:
        return _NAMED[char]
    return f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}"


class _Escaped:
    """A field of a message, shown (``%s``, ``%r``) escaped."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value

    def __str__(self) -> str:
        return escaped(str(self.value))

    def __repr__(self) -> str:
        return escaped(repr(self.value))


def _field(value: object) -> object:
    return value if isinstance(value, int | float) else _Escaped(value)


class TextFormatter(logging.Formatter):
    """One line of text per record (a traceback, when there is one, after it), its fields
    escaped."""

    def __init__(self) -> None:
        super().__init__(TEXT)

    def format(self, record: logging.LogRecord) -> str:
        args = record.args
        if isinstance(args, tuple):
            record.args = tuple(_field(a) for a in args)
        elif isinstance(args, dict):  # log.info("%(who)s", {"who": ...})
            record.args = {k: _field(v) for k, v in args.items()}
        msg = record.msg
        if not args and isinstance(msg, str):
            record.msg = escaped(msg)  # a message made whole by its caller
        try:
            return super().format(record)
        finally:
            record.args, record.msg = args, msg


def formatter(log_format: str) -> logging.Formatter:
    """The formatter of a ``LOG_FORMAT`` value (``bot.settings.LOG_FORMATS``)."""
    return JsonFormatter() if log_format == "json" else TextFormatter()


class _UnparsableRequest(logging.Filter):
    """Rewrites aiohttp's record of a request it could not parse (its exception's message
    quotes what the client sent): one warning, no traceback, no bytes of the request."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError):
            remote = record.args[0] if isinstance(record.args, tuple) and record.args else "?"
            record.msg = "refused a request from %s that is not valid HTTP (%s, answered %s)"
            record.args = (remote, type(exc).__name__, exc.code)
            record.exc_info = record.exc_text = None
            record.levelno = min(record.levelno, logging.WARNING)
            record.levelname = logging.getLevelName(record.levelno)
        return True


_QUIET = _UnparsableRequest()


def quiet_unparsable_requests() -> None:
    """Install the rewrite of aiohttp's unparsable-request records (once; any server of the
    process, and any handler, then logs them without what was sent)."""
    server = logging.getLogger("aiohttp.server")
    if _QUIET not in server.filters:
        server.addFilter(_QUIET)
