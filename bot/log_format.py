"""How a long-lived command (``serve``, ``worker``, ``demo``) writes its log lines.

``LOG_FORMAT=text`` (the default): one line of text per record. ``LOG_FORMAT=json``: one
JSON object per line, for a log pipeline: ``time`` (UTC, ISO 8601), ``level``, ``logger``,
``message``, ``run_id`` and ``review_id`` where the line is about a run or a review (given
with the record, or set in the context by ``crew_runtime.log_fields``), and ``exception``
(the traceback) when there is one. The fields are what the text line says, no more: a line
that would not show a token in text does not show it in JSON.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

from crew_runtime import log_fields

__all__ = ["JsonFormatter", "formatter"]

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


def formatter(log_format: str) -> logging.Formatter:
    """The formatter of a ``LOG_FORMAT`` value (``bot.settings.LOG_FORMATS``)."""
    return JsonFormatter() if log_format == "json" else logging.Formatter(TEXT)
