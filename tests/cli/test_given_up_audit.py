"""A Slack step given up on is on its run's audit trail: written by the give-up's own
compare-and-set (none when the claim was lost), exported in JSONL and CSV, and pruned with
the run's other audit records when ``keep_audit`` ends. The real bot's scenarios, through
the dispatcher and the stand-in, are in ``tests/slack/test_slack_refused.py``."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from storage import OutboxKind, Store
from storage.outbox import GIVEN_UP, SlackRefusal
from storage.retention import Retention, RetentionPolicy
from storage.schema import outbox
from tests.support.cli import Cli
from tests.support.runs import deliver
from tests.support.timing import FakeClock

HOLD = timedelta(minutes=1)
EVER = ("--since", "2000-01-01", "--until", "2100-01-01")
REFUSED = SlackRefusal("invalid_blocks", "=HYPERLINK(1) must be a block", "countersign", False)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(db_url: str, clock: FakeClock) -> Iterator[Store]:
    opened = Store.open(db_url, clock=clock)
    yield opened
    opened.close()


@pytest.fixture
def cli(db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Cli:
    config = tmp_path / "countersign.toml"
    config.write_text('[crews.blog]\nfactory = "tests.support.crews:writer"\n')
    return Cli(db_url, config, capsys)


def exported(cli: Cli) -> list[dict[str, Any]]:
    """``countersign audit export``'s JSONL, record by record."""
    return [json.loads(line) for line in cli.ok("audit", "export", *EVER).out.splitlines()]


def root_row(store: Store) -> tuple[str, int]:
    """A run started by Alice in a channel, and its root message's outbox row."""
    run = store.create_run("blog", {"topic": "otters"}, started_by="U0ALICE", channel="C0NOBOT")
    with store.engine.connect() as conn:
        found = conn.execute(
            outbox.select().where(
                outbox.c.run_id == run.id, outbox.c.kind == OutboxKind.RUN_STARTED
            )
        ).one()
    return run.id, found.id


def test_a_given_up_step_is_recorded_once_and_only_by_the_claim_that_holds_it(
    store: Store, cli: Cli
) -> None:
    run_id, row = root_row(store)
    assert store.claim_outbox(row, "mine", HOLD) is not None
    assert not store.give_up_outbox(row, "theirs", "slack: invalid_blocks", REFUSED)
    assert exported(cli) == []  # the give-up lost its claim: nothing recorded

    assert store.give_up_outbox(row, "mine", "slack: invalid_blocks", REFUSED)
    assert not store.give_up_outbox(row, "mine", "slack: invalid_blocks", REFUSED)  # settled

    (record,) = exported(cli)
    assert record["run_id"] == run_id and record["crew"] == "blog"
    assert record["decision"] == "slack_refused" and record["decided_by"] == "countersign"
    assert record["review_id"] is None and record["assigned_to"] is None
    assert record["details"] == {
        "outbox_id": row,
        "kind": "run_started",
        "error": "invalid_blocks",
        "said": "=HYPERLINK(1) must be a block",
        "cancelled": False,
    }
    with store.engine.connect() as conn:
        kept = conn.execute(outbox.select().where(outbox.c.id == row)).one()
    assert kept.last_error == GIVEN_UP + "slack: invalid_blocks"
    assert record["decided_at"] == kept.sent_at.isoformat() + "Z"  # one transaction

    table = list(
        csv.DictReader(io.StringIO(cli.ok("audit", "export", *EVER, "--format", "csv").out))
    )
    (row_of_csv,) = table
    assert row_of_csv["decision"] == "slack_refused"
    assert json.loads(row_of_csv["details"]) == record["details"]  # a JSON cell, no formula


def test_a_give_up_without_a_refusal_records_nothing(store: Store, cli: Cli) -> None:
    _run_id, row = root_row(store)
    assert store.claim_outbox(row, "mine", HOLD) is not None
    assert store.give_up_outbox(row, "mine", "slack: invalid_blocks")
    assert exported(cli) == []


def test_keep_audit_prunes_a_given_up_step_with_the_runs_other_records(
    store: Store, clock: FakeClock
) -> None:
    run_id, row = root_row(store)
    assert store.claim_outbox(row, "mine", HOLD) is not None
    assert store.give_up_outbox(row, "mine", "slack: not_in_channel", REFUSED)
    store.cancel_run(run_id, "countersign", why="Slack refused its thread")
    deliver(store)  # the rest of the run (its end) reached Slack and the webhooks
    policy = RetentionPolicy(Retention(keep_runs=timedelta(days=1), keep_audit=timedelta(days=30)))

    clock.advance(days=2)
    assert store.prune(policy)["blog"]["runs"] == 1
    since, until = datetime(2000, 1, 1), datetime(2100, 1, 1)
    (kept,) = store.audit_records(since=since, until=until)
    assert kept.run_id == run_id and kept.decision == "slack_refused"  # outlives its run

    clock.advance(days=30)
    assert (
        store.prune(policy, dry_run=True) == store.prune(policy) == {"blog": {"review_events": 1}}
    )
    assert list(store.audit_records(since=since, until=until)) == []
