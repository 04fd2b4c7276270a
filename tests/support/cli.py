"""The ``countersign`` command run in-process, and what a refusal looks like."""

from __future__ import annotations

import io
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bot.cli.main import main
from storage import Store


class Cli:
    """Runs ``main`` in-process against one database and one configuration file."""

    def __init__(self, db_url: str, config: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.db_url = db_url
        self.config = config
        self.capsys = capsys

    def __call__(
        self, *argv: str, stdin: str | None = None, environ: dict[str, str] | None = None
    ) -> Result:
        self.capsys.readouterr()
        full = ["--config", str(self.config), "--database-url", self.db_url, *argv]
        saved = sys.stdin
        if stdin is not None:
            sys.stdin = io.StringIO(stdin)
        try:
            code = main(full, environ={} if environ is None else environ)
        finally:
            sys.stdin = saved
        out, err = self.capsys.readouterr()
        return Result(code, out, err)

    def ok(self, *argv: str, stdin: str | None = None) -> Result:
        result = self(*argv, stdin=stdin)
        assert result.code == 0, result.err
        return result

    def snapshot(self) -> tuple[object, ...]:
        store = Store.open(self.db_url)
        try:
            return (
                store.list_runs(limit=10_000),
                store.list_reviews(status=None),
                store.due_outbox(limit=10_000),
            )
        finally:
            store.close()

    def worker(self) -> None:
        self.ok("worker", "--until-idle", "--poll", "0.05")


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def assert_refused(result: Result, *expected: str) -> None:
    """One ``error:`` line naming what is wrong, exit code 2, nothing on stdout."""
    assert result.code == 2, result
    assert result.out == ""
    lines = result.err.splitlines()
    assert len(lines) == 1, result.err
    assert lines[0].startswith("error: ")
    for text in expected:
        assert text in lines[0]


@pytest.fixture
def cli(db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Cli:
    return configured_cli(db_url, tmp_path, capsys, GOVERNED)


def configured_cli(
    db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], config: str
) -> Cli:
    """A :class:`Cli` on ``db_url`` with ``config`` as its configuration file."""
    path = tmp_path / "countersign.toml"
    path.write_text(config)
    return Cli(db_url, path, capsys)


GOVERNED = """
[crews.deal]
factory = "tests.support.crews:writer"
approvals_required = 2
forbid_self_approval = true

[crews.deal.tasks.2]
approvals_required = 1

[crews.payout]
factory = "tests.support.crews:payments"

[crews.payout.gates.pay]
approvals_required = 2
"""
