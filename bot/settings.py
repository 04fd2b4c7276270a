"""The process's settings, read from the environment once, in one place.

Everything else receives a :class:`Settings` (or the values in it) as an argument, so no
module reads ``os.environ`` behind the caller's back and tests pass a plain dict.

==================== ================================================ =========================
variable             meaning                                          default
==================== ================================================ =========================
``DATABASE_URL``     SQLAlchemy URL of the database                   ``sqlite:///countersign.db``
``COUNTERSIGN_CONFIG`` path of ``countersign.toml``                  ``./countersign.toml``
``LOG_LEVEL``        DEBUG, INFO, WARNING, ERROR or CRITICAL          ``INFO``
``LOG_FORMAT``       ``text`` or ``json`` (one JSON object per line)   ``text``
``USER``             who the CLI acts as when ``--by`` is not given   ``cli``
``SLACK_BOT_TOKEN``  the bot token (``xoxb-…``), for ``serve``         —
``SLACK_SIGNING_SECRET`` verifies that requests come from Slack        —
``SLACK_APP_TOKEN``  app-level token (``xapp-…``), for Socket Mode     —
``SLACK_API_URL``    Web API base URL (the offline sandbox sets it)    ``https://slack.com/api/``
(any name)           a webhook's secret, named by its ``secret_env``   —
==================== ================================================ =========================

A database URL may carry a password: it never appears in ``repr(settings)``; show it with
:func:`mask_url`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from bot.errors import BotError
from storage import DEFAULT_URL

__all__ = ["LOG_FORMATS", "LOG_LEVELS", "Settings", "SettingsError", "mask_url"]

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
LOG_FORMATS = ("text", "json")

_SECRET_QUERY_KEYS = frozenset({"password", "passwd", "pass", "sslpassword"})


class SettingsError(BotError):
    """An environment variable has a value Countersign cannot use; the message names it."""


@dataclass(frozen=True, repr=False)
class Settings:
    """What the process was told by its environment.

    Attributes:
        database_url: The database to use; may contain a password (see :func:`mask_url`).
        config_path: An explicit configuration file, or None to look in the working directory.
        log_level: A level name from :data:`LOG_LEVELS`.
        log_format: How log lines are written, from :data:`LOG_FORMATS`.
        default_user: Who CLI actions are recorded as when ``--by`` is not given.
        environ: The whole environment, for the variables the configuration names (a
            webhook's ``secret_env``); never shown.
    """

    database_url: str = DEFAULT_URL
    config_path: Path | None = None
    log_level: str = "INFO"
    default_user: str = "cli"
    slack_bot_token: str | None = None
    slack_signing_secret: str | None = None
    slack_app_token: str | None = None
    slack_api_url: str | None = None
    log_format: str = "text"
    environ: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Settings:
        """Read the settings from ``environ`` (``os.environ`` in production).

        Empty variables count as unset, the way shells make it easy to write ``X= cmd``.

        Raises:
            SettingsError: ``LOG_LEVEL`` is not a level name, or ``LOG_FORMAT`` not a format.
        """
        level = (environ.get("LOG_LEVEL") or "INFO").strip().upper()
        if level not in LOG_LEVELS:
            raise SettingsError(
                f"LOG_LEVEL: expected one of {', '.join(LOG_LEVELS)}, "
                f"got {environ.get('LOG_LEVEL')!r}"
            )
        log_format = (environ.get("LOG_FORMAT") or "text").strip().lower()
        if log_format not in LOG_FORMATS:
            raise SettingsError(
                f"LOG_FORMAT: expected one of {', '.join(LOG_FORMATS)}, "
                f"got {environ.get('LOG_FORMAT')!r}"
            )
        config = environ.get("COUNTERSIGN_CONFIG")
        return cls(
            database_url=environ.get("DATABASE_URL") or DEFAULT_URL,
            config_path=Path(config) if config else None,
            log_level=level,
            log_format=log_format,
            default_user=(environ.get("USER") or "").strip() or "cli",
            slack_bot_token=environ.get("SLACK_BOT_TOKEN") or None,
            slack_signing_secret=environ.get("SLACK_SIGNING_SECRET") or None,
            slack_app_token=environ.get("SLACK_APP_TOKEN") or None,
            slack_api_url=environ.get("SLACK_API_URL") or None,
            environ=dict(environ),
        )

    def __repr__(self) -> str:
        # repr() ends up in logs and tracebacks: never with the password.
        return (
            f"Settings(database_url={mask_url(self.database_url)!r}, "
            f"config_path={self.config_path!r}, log_level={self.log_level!r}, "
            f"log_format={self.log_format!r}, "
            f"default_user={self.default_user!r})"
        )


def mask_url(url: str) -> str:
    """``url`` with any password replaced by ``***``, fit for logs and messages.

    Masks the ``user:password@`` part and password query parameters (psycopg accepts
    ``?password=...``). A URL too broken to parse is masked entirely rather than shown.

    >>> mask_url("postgresql://app:s3cret@db:5432/countersign")
    'postgresql://app:***@db:5432/countersign'
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return "***"
    masked = url
    userinfo, at, host = parts.netloc.rpartition("@")
    if at and ":" in userinfo:
        # Replace in place: urlunsplit would turn "sqlite:///x.db" into "sqlite:/x.db".
        masked = masked.replace(parts.netloc, f"{userinfo.split(':', 1)[0]}:***@{host}", 1)
    if parts.query:
        query = "&".join(_mask_pair(pair) for pair in parts.query.split("&"))
        masked = masked.replace("?" + parts.query, "?" + query, 1)
    return masked


def _mask_pair(pair: str) -> str:
    key, eq, _value = pair.partition("=")
    return f"{key}=***" if eq and key.lower() in _SECRET_QUERY_KEYS else pair
