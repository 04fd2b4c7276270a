"""``countersign prune`` and ``countersign audit export`` against real databases; the
workspace's address for the permalinks from the Slack stand-in's ``auth.test``; serve's prune."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from crew_runtime.config import load_config
from sandbox import SlackStandIn, StandInThread
from storage import RunNotFound, Store
from tests.support.cli import Cli, assert_refused, configured_cli
from tests.support.runs import APPROVED, PROPOSED, finished_run, waiting_run
from tests.support.slack_harness import slack_and_bot, wait_until
from tests.support.timing import FakeClock

CONFIG = """\
[retention]
keep_runs = "30d"

[crews.outreach]
factory = "tests.support.crews:payments"

[crews.blog]
factory = "tests.support.crews:writer"
keep_runs = "1y"
"""


@pytest.fixture
def cli(db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Cli:
    return configured_cli(db_url, tmp_path, capsys, CONFIG)


@pytest.fixture
def runs(db_url: str) -> dict[str, str]:
    """Runs of 2026-01-01, months before the tests' "now": outreach's and blog's, finished,
    and one waiting; and a finished run of today."""
    old = Store.open(db_url, clock=FakeClock())
    made = {
        "old": finished_run(old),
        "old blog": finished_run(old, "blog"),
        "old waiting": waiting_run(old)[0],
    }
    old.close()
    today = Store.open(db_url)
    made["recent"] = finished_run(today)
    today.close()
    return made


def exists(db_url: str, run_id: str) -> bool:
    store = Store.open(db_url)
    try:
        store.get_run(run_id)
        return True
    except RunNotFound:
        return False
    finally:
        store.close()


def test_prune_dry_run_says_what_and_changes_nothing_then_prunes(
    cli: Cli, db_url: str, runs: dict[str, str]
) -> None:
    before = cli.snapshot()

    dry = cli.ok("prune", "--dry-run").out

    assert dry.startswith("outreach: would delete ")
    assert "1 runs" in dry and "1 decisions" in dry and "blog" not in dry
    assert cli.snapshot() == before
    assert cli.ok("prune", "--json").json()["outreach"]["runs"] == 1
    assert [exists(db_url, runs[k]) for k in ("old", "old blog", "old waiting", "recent")] == [
        False,
        True,
        True,
        True,
    ]
    assert cli.ok("prune").out == "nothing to prune (deleted nothing)\n"


def test_audit_export_lists_a_pruned_runs_decisions_with_permalinks(
    cli: Cli, runs: dict[str, str]
) -> None:
    cli.ok("prune")
    since = ("--since", "2025-12-31", "--until", "2100-01-01")

    lines = cli.ok("audit", "export", *since, "--workspace", "https://acme.slack.com/").out

    records = {r["run_id"]: r for r in map(json.loads, lines.splitlines())}
    assert list(records)[-1] == runs["recent"], "oldest first"
    assert set(records) == {runs["old"], runs["old blog"], runs["recent"]}
    first = records[runs["old"]]
    assert first["crew"] == "outreach" and first["decided_by"] == "U0ANA"
    assert (first["review_kind"], first["decision"]) == ("tool_approval", "edit")
    assert first["decided_at"] == "2026-01-01T12:00:00Z"
    assert (first["proposed_args"], first["approved_args"], first["executed_args"]) == (
        PROPOSED,
        APPROVED,
        APPROVED,
    )
    assert first["permalink"] is None, "the stand-in posted nothing: the run has no thread"
    table = cli.ok("audit", "export", *since, "--crew", "blog", "--format", "csv").out
    [row] = list(csv.DictReader(io.StringIO(table)))
    assert row["run_id"] == runs["old blog"]
    assert json.loads(row["approved_args"]) == APPROVED


def test_the_permalink_comes_from_the_workspace_slack_names(
    cli: Cli, db_url: str, runs: dict[str, str]
) -> None:
    store = Store.open(db_url)
    with store.engine.begin() as conn:  # where the dispatcher would have posted the root
        conn.exec_driver_sql(
            "UPDATE runs SET channel = 'C0REVIEWS', thread_ts = '1700000000.000100'"
        )
    store.close()
    standin = SlackStandIn(signing_secret="test")
    with StandInThread(standin) as slack:
        environ = {"SLACK_BOT_TOKEN": standin.bot_token, "SLACK_API_URL": slack.api_url}
        out = cli(
            "audit", "export", "--since", "2026-01-01", "--until", "2026-01-02", environ=environ
        )

    assert out.code == 0, out.err
    link = json.loads(out.out.splitlines()[0])["permalink"]
    assert link == "https://sandbox.slack.com/archives/C0REVIEWS/p1700000000000100"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (("--since", "last week", "--until", "2026-01-02"), "--since 'last week' is not an ISO"),
        (("--since", "2026-01-02", "--until", "2026-01-01"), "must be before --until"),
    ],
)
def test_bad_dates_are_refused(cli: Cli, argv: tuple[str, ...], expected: str) -> None:
    assert_refused(cli("audit", "export", *argv), expected)


@pytest.mark.slow
@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_serve_prunes_as_it_starts(db_url: str, tmp_path: Path, runs: dict[str, str]) -> None:
    """The daily sweep runs once at start too: a deployment restarted daily still prunes."""
    config = tmp_path / "countersign.toml"
    config.write_text(CONFIG)
    store = Store.open(db_url)
    try:
        with slack_and_bot(load_config(config), store):
            wait_until(lambda: not exists(db_url, runs["old"]) or None, what="the prune")
        assert exists(db_url, runs["old waiting"]) and exists(db_url, runs["recent"])
    finally:
        store.close()
