"""What every ``countersign`` command gets: its :class:`Context`, and :class:`CliError`.

Its own module so that the command modules (``bot.cli.admin``, ``demo``, ``serve``,
``worker``) and ``bot.cli.main``, which wires them into the parser, import it and not
each other.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from bot.errors import BotError
from bot.log_format import formatter
from bot.settings import Settings, mask_url
from crew_runtime.config import Config, load_config
from crew_runtime.service import Countersign
from storage import Store

__all__ = ["CliError", "Context", "stderr_logging", "where"]


class CliError(BotError):
    """The request cannot be done as asked; the message is the whole explanation."""


@dataclass
class Context:
    """What a command gets: its arguments, the settings, and lazily opened resources."""

    args: argparse.Namespace
    settings: Settings
    _store: Store | None = field(default=None, init=False)

    @property
    def database_url(self) -> str:
        url: str | None = getattr(self.args, "database_url", None)
        return url or self.settings.database_url

    def store(self, *, upgrade: bool = True) -> Store:
        """Open the database once, bringing its schema up to date unless told not to."""
        if self._store is None:
            url = self.database_url
            try:
                self._store = Store.open(url, upgrade=upgrade)
            except Exception as exc:  # any driver error: say which database, not the password
                raise self.unavailable(exc) from exc
        return self._store

    def unavailable(self, exc: Exception) -> CliError:
        """The database failed: which one, and why in a line, never with its password."""
        url = self.database_url
        return CliError(f"cannot open the database {mask_url(url)}: {_scrub(exc, url)}")

    def config(self) -> Config:
        """Load the configuration (``--config``, else ``$COUNTERSIGN_CONFIG``, else ./).

        The environment was read into the settings already, hence ``environ={}``.
        """
        path: Path | None = getattr(self.args, "config", None) or self.settings.config_path
        return load_config(path, environ={})

    def service(self, config: Config | None = None) -> Countersign:
        """The runtime's front door. Cancelling and reopening need no crew specs, so by
        default it gets an empty configuration instead of requiring the file (deciding
        needs it: a crew's review rules are there)."""
        return Countersign(self.store(), config or Config(path=Path("(no configuration)")))

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


def _scrub(exc: BaseException, url: str) -> str:
    """The first line of a driver error, without the URL's password should it be quoted."""
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    try:
        password = urlsplit(url).password
    except ValueError:
        password = None
    return text.replace(password, "***") if password else text


def where(url: str) -> str:
    """The database as an operator finds it: its URL (no password), and for a SQLite file
    the file's absolute path (a relative one is under the directory the command runs in)."""
    shown = mask_url(url)
    if url.startswith("sqlite:///") and not url.startswith("sqlite:////"):
        path = url.removeprefix("sqlite:///").split("?")[0]
        if path and path != ":memory:":
            shown += f" (the file {Path(path).resolve()})"
    return shown


_CHATTY = ("apscheduler", "aiohttp.access")


@contextmanager
def stderr_logging(settings: Settings) -> Iterator[None]:
    """Log to stderr while a command runs (worker, serve, demo), then leave logging as it was found.

    At ``settings.log_level``, as text or as JSON lines (``settings.log_format``).

    A handler of its own rather than ``logging.basicConfig``, which does nothing when
    the root logger already has handlers (as under pytest) and cannot be undone.
    """
    root = logging.getLogger()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter(settings.log_format))
    level = settings.log_level
    previous = root.level
    root.addHandler(handler)
    root.setLevel(level)
    # A line per scheduled job run and per HTTP request drowns what an operator needs.
    chatty = {name: logging.getLogger(name) for name in _CHATTY}
    levels = {name: logger.level for name, logger in chatty.items()}
    if level != "DEBUG":
        for logger in chatty.values():
            logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(previous)
        for name, logger in chatty.items():
            logger.setLevel(levels[name])
