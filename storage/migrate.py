"""Bring a database's schema up to date with the Alembic migrations shipped in this package."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine

from storage.engine import write_transaction

_SCRIPTS = Path(__file__).parent / "migrations"


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Apply every migration up to ``revision``; a no-op on an up-to-date database."""
    config = Config()
    config.set_main_option("script_location", str(_SCRIPTS))
    with write_transaction(engine) as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, revision)


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at, or None for an empty database."""
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()
