"""``countersign reviews decide`` on several reviews: named (each with the digest its decider
was shown, ``REVIEW_ID@DIGEST``) or ``--all-pending [--crew NAME]``, approved or rejected,
each its own decision by the one path (the review policy, the digest, the quorum), one line
each in order; exit 2 if any was refused, with the others recorded. On SQLite and
PostgreSQL, runs paused at a review as a worker pauses them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from storage import DecisionKind, ReviewStatus, RunStatus, Store
from tests.support.batch import CONFIG, paused
from tests.support.cli import Cli, assert_refused, configured_cli
from tests.support.slack_harness import ALICE, BOB


@pytest.fixture
def cli(db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Cli:
    return configured_cli(db_url, tmp_path, capsys, CONFIG)


@pytest.fixture
def store(cli: Cli) -> Iterator[Store]:
    store = Store.open(cli.db_url)
    yield store
    store.close()


def test_several_named_reviews_are_each_decided_and_each_answered(cli: Cli, store: Store) -> None:
    plain, shown, stale, bobs, deal = paused(store, "writer", "writer", "writer", "bobs", "deal")
    digest = store.get_review(shown).digest
    assert digest is not None
    result = cli(
        "reviews",
        "decide",
        plain,
        f"{shown}@{digest[:8]}",
        f"{stale}@{'0' * 16}",  # not what it has: what a changed review's card showed
        bobs,  # not Alice's
        deal,  # needs two approvals: hers counts
        "approve",
        "--by",
        ALICE,
    )
    assert result.code == 2, result
    lines = result.out.splitlines()
    assert [line.split(":")[0] for line in lines] == [plain, shown, stale, bobs, deal]
    assert lines[0].startswith(f"{plain}: approve by {ALICE}; run ") and "is queued" in lines[0]
    assert lines[1].startswith(f"{shown}: approve by {ALICE}")
    assert lines[2].startswith(f"{stale}: error: ") and "the decision was for action" in lines[2]
    assert lines[3].startswith(f"{bobs}: error: ")
    assert lines[4].startswith(f"{deal}: approval counted, 1 of 2 ({ALICE})")
    for review_id in (plain, shown):
        review = store.get_review(review_id)
        assert review.decision is not None and review.decision.kind is DecisionKind.APPROVE
        assert store.get_run(review.run_id).status == RunStatus.QUEUED
    assert store.get_review(stale).status == ReviewStatus.PENDING
    assert store.get_review(bobs).status == ReviewStatus.PENDING
    # Sent again: the decided ones are refused as decided, nothing recorded twice.
    again = cli("reviews", "decide", plain, deal, "approve", "--by", ALICE)
    assert again.code == 2 and [line.split(": ")[1] for line in again.out.splitlines()] == [
        "error",
        "error",
    ]
    assert len(store.get_review(deal).approvals) == 1


def test_all_pending_decides_what_the_policy_lets_the_person_decide(cli: Cli, store: Store) -> None:
    writer, bobs, deal = paused(store, "writer", "bobs", "deal")
    rejected = cli.ok(
        "reviews", "decide", "--all-pending", "--crew", "writer", "reject", "off topic", "--by", BOB
    )
    assert rejected.out.splitlines() == [
        f"{writer}: reject by {BOB}; run {store.get_review(writer).run_id} is queued"
    ]
    decision = store.get_review(writer).decision
    assert decision is not None and decision.text == "off topic"
    # Alice may decide only the deal of those left; Bob, both.
    alice = cli.ok("reviews", "decide", "approve", "--all-pending", "--by", ALICE).out
    assert [line.split(":")[0] for line in alice.splitlines()] == [deal]
    bob = cli.ok("reviews", "decide", "approve", "--all-pending", "--by", BOB).out
    assert [line.split(":")[0] for line in bob.splitlines()] == [bobs, deal]
    assert store.get_review(deal).status == ReviewStatus.DECIDED
    assert cli.ok("reviews", "decide", "approve", "--all-pending", "--by", BOB).out == (
        f"no pending reviews {BOB} may approve\n"
    )


def test_a_batch_that_cannot_be_one_changes_nothing(cli: Cli, store: Store) -> None:
    first, second = paused(store, "writer", "writer")
    before = cli.snapshot()
    for argv in (
        (first, second, "edit", "new text"),  # edits are one review's
        (first, second, "approve", "--digest", "abcdef12"),  # whose digest?
        (first, second, "approve", "--standing"),
        (first, "approve", "--crew", "writer"),  # --crew chooses among --all-pending
        ("approve", "--all-pending", "--crew", "nope"),
        (first, "approve", "reason", "extra"),
        (first, f"{second}@", "approve"),
        (first, second),  # no decision
    ):
        assert_refused(cli("reviews", "decide", *argv, "--by", ALICE))
    assert cli.snapshot() == before
