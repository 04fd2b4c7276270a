"""A migrated database for a test without running the migrations for each test.

Running the migrations (24 today) costs a test ~65 ms of CPU on SQLite and ~0.45 s (client and
server) on PostgreSQL, and most tests only need the schema they make. Each test process runs
them once, on a template, and each test's database is a copy of it: on SQLite the file,
copied; on PostgreSQL the template schema as ``pg_dump`` writes it (tables, indexes,
constraints, sequences and the ``alembic_version`` row), replayed in the test's own schema.
What a test gets is what the migrations made, in this session. The ``db_url`` fixture
(tests/conftest.py) fills each test's database so; a test whose subject is the migrations
themselves (a first start, an upgrade) is marked ``empty_database`` and gets an empty one, on
which ``Store.open`` runs them.

On PostgreSQL a test's schema is taken from :class:`Schemas`, the process's pool: one a test
gave back is emptied (its rows deleted, its sequences restarted) and handed to the next test,
instead of being dropped and another made and filled.
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
from psycopg import sql
from sqlalchemy import create_engine, make_url, text

from storage import Store
from storage.schema import metadata
from tests.support.spawning import support_process

_SCHEMA = re.compile(r"search_path%3D(\w+)")


def open_store(db_url: str, **options: Any) -> Store:
    """``Store.open`` on ``db_url``, an empty database given a copy of the template first (one
    already at the migrations' head is opened as it is)."""
    fill(db_url)
    return Store.open(db_url, **options)


def fill(db_url: str) -> None:
    """Give the empty database at ``db_url`` a copy of the template (one already at the
    migrations' head is left as it is)."""
    if db_url.startswith("sqlite:///"):
        path = Path(db_url.removeprefix("sqlite:///"))
        if not path.exists():
            shutil.copyfile(_sqlite_template(), path)
    else:
        found = _SCHEMA.search(db_url)
        assert found, f"not a test schema's URL: {db_url}"
        _fill(db_url.split("?")[0], found.group(1))


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
                [*command, "--dbname", libpq(base)],
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
    with psycopg.connect(libpq(base), autocommit=False) as conn:
        made = conn.execute("SELECT to_regclass(%s)", (f"{schema}.alembic_version",)).fetchone()
        if made is not None and made[0] is None:
            conn.execute(_pg_template(base).format(schema=schema).encode())


def libpq(url: str) -> str:
    """A SQLAlchemy PostgreSQL URL as libpq takes it."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


class Schemas:
    """A pytest process's PostgreSQL schemas for tests, at the migrations' head unless asked
    empty. Emptying one a test gave back costs ~5 ms; dropping it and making and filling
    another, ~85 ms of client and server CPU on a quiet machine (docs/benchmarks.md, "Suite
    time"). A schema that cannot be emptied within ``lock_timeout`` seconds (a lock still held,
    say) is dropped instead, once its holder lets go."""

    def __init__(self, base: str, *, lock_timeout: float = 5.0) -> None:
        self.base = base
        self.lock_timeout = lock_timeout
        self._free: list[str] = []
        self._conn: psycopg.Connection[Any] | None = None
        self._sequences: list[str] | None = None

    def take(self, *, empty: bool = False) -> str:
        """A schema for one test: empty, or at the migrations' head."""
        if self._free and not empty:
            return self._free.pop()
        schema = f"t_{secrets.token_hex(6)}"
        conn = self._connection()
        with conn.transaction():
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
            if not empty:
                conn.execute(_pg_template(self.base).format(schema=schema).encode())
        return schema

    def give_back(self, schema: str, *, empty: bool = False) -> None:
        """The test is done with ``schema`` (taken ``empty`` or not)."""
        conn = self._connection()
        if not empty:
            try:
                with conn.transaction():
                    self._empty(conn, schema)
            except psycopg.Error:
                pass  # dropped below
            else:
                self._free.append(schema)
                return
        with conn.transaction():
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))

    def close(self) -> None:
        """Drop the schemas no test holds."""
        while self._free:
            self.give_back(self._free.pop(), empty=True)
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _empty(self, conn: psycopg.Connection[Any], schema: str) -> None:
        timeout = sql.Literal(f"{round(self.lock_timeout * 1000)}ms")
        conn.execute(sql.SQL("SET LOCAL lock_timeout = {}").format(timeout))
        for table in reversed(metadata.sorted_tables):  # a row before the rows it points at
            conn.execute(sql.SQL("DELETE FROM {}").format(sql.Identifier(schema, table.name)))
        if self._sequences is None:
            found = conn.execute(
                "SELECT sequencename FROM pg_sequences WHERE schemaname = %s", (schema,)
            )
            self._sequences = [str(row[0]) for row in found]
        for sequence in self._sequences:
            name = sql.Identifier(schema, sequence)
            conn.execute(sql.SQL("ALTER SEQUENCE {} RESTART").format(name))

    def _connection(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(libpq(self.base), autocommit=True)
        return self._conn


@functools.cache
def schemas(base: str) -> Schemas:
    """This process's pool of schemas on ``base``, dropped when the process ends."""
    pool = Schemas(base)
    atexit.register(pool.close)
    return pool
