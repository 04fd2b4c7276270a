"""Bring a database's schema up to date with the Alembic migrations shipped in this package."""

from __future__ import annotations

import functools
import logging
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine

from storage.engine import write_transaction

_SCRIPTS = Path(__file__).parent / "migrations"
log = logging.getLogger(__name__)


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Apply every migration up to ``revision``; a no-op on an up-to-date database.

    Alembic says each migration it runs at INFO (twenty lines on a first start); an
    operator reads one line instead: from which revision to which the schema went."""
    config = _config()
    quiet = logging.getLogger("alembic")
    level = quiet.level
    quiet.setLevel(max(level, logging.WARNING))
    try:
        before = current_revision(engine)
        if revision == "head" and before == _head():
            return  # up to date: no need to lock the database or to load Alembic's scripts
        with write_transaction(engine) as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, revision)
        after = current_revision(engine)
    finally:
        quiet.setLevel(level)
    if after != before:
        said = f"upgraded from {before}" if before else "created"
        log.info("database schema %s: %s", said, after)


def _config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(_SCRIPTS))
    return config


@functools.cache
def _head() -> str | None:
    """The newest revision shipped (read once a process: loading the scripts takes ~15 ms)."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(_config()).get_current_head()


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at, or None for an empty database."""
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()
