"""A migrated database for a test without running the migrations for each test.

Running the 22 migrations costs a test ~65 ms of CPU on SQLite and ~0.45 s (client and
server) on PostgreSQL, and most tests only need the schema they make. Each test process runs
them once, on a template, and each test's database is a copy of it: on SQLite the file,
copied; on PostgreSQL the template schema as ``pg_dump`` writes it (tables, indexes,
constraints, sequences and the ``alembic_version`` row), replayed in the test's own schema.
What a test gets is what the migrations made, in this session. A test whose subject is the
migrations themselves (a first start, an upgrade) opens ``Store.open`` on an empty
``db_url`` instead, which runs them.
"""

from __future__ import annotations

import atexit
import functools
import re
import secrets
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy import create_engine, make_url, text

from storage import Store
from tests.support.spawning import support_process

_SCHEMA = re.compile(r"search_path%3D(\w+)")


def open_store(db_url: str, **options: Any) -> Store:
    """``Store.open`` on ``db_url``, an empty database given a copy of the template first (one
    already at the migrations' head is opened as it is)."""
    if db_url.startswith("sqlite:///"):
        path = Path(db_url.removeprefix("sqlite:///"))
        if not path.exists():
            shutil.copyfile(_sqlite_template(), path)
    else:
        found = _SCHEMA.search(db_url)
        assert found, f"not a test schema's URL: {db_url}"
        _fill(db_url.split("?")[0], found.group(1))
    return Store.open(db_url, **options)


@functools.cache
def _sqlite_template() -> Path:
    folder = tempfile.mkdtemp(prefix="countersign-template-")
    atexit.register(shutil.rmtree, folder, True)
    path = Path(folder) / "template.db"
    Store.open(f"sqlite:///{path}").close()  # closing the last connection folds the WAL in
    return path


@functools.cache
def _pg_template(base: str) -> str:
    """The SQL that makes a migrated schema, with ``{schema}`` where the schema's name goes."""
    schema = f"t_template_{secrets.token_hex(6)}"
    admin = create_engine(base)
    try:
        with admin.begin() as conn:
            conn.execute(text(f"CREATE SCHEMA {schema}"))
        Store.open(f"{base}?options=-csearch_path%3D{schema}").close()
        command = ["pg_dump", "--no-owner", "--no-privileges", "--inserts", "--schema", schema]
        with support_process():  # once a pytest process, for every test after
            dumped = subprocess.run(
                [*command, "--dbname", _libpq(base)],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
    finally:
        with admin.begin() as conn:
            conn.execute(text(f"DROP SCHEMA IF EXISTS {schema} CASCADE"))
        admin.dispose()
    kept = [
        line
        for line in dumped.splitlines()
        # psql's meta-commands (\restrict) and the schema itself (the test's exists already)
        if not line.startswith("\\") and line != f"CREATE SCHEMA {schema};"
    ]
    return "\n".join(kept).replace("{", "{{").replace("}", "}}").replace(schema, "{schema}")


def _fill(base: str, schema: str) -> None:
    """Make the template's tables in ``schema`` unless they are there already."""
    with psycopg.connect(_libpq(base), autocommit=False) as conn:
        made = conn.execute("SELECT to_regclass(%s)", (f"{schema}.alembic_version",)).fetchone()
        if made is not None and made[0] is None:
            conn.execute(_pg_template(base).format(schema=schema).encode())


def _libpq(url: str) -> str:
    """A SQLAlchemy PostgreSQL URL as libpq takes it."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
