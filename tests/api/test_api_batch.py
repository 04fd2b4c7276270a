"""``POST /api/v1/decisions``: several decisions by one person, each its own decision held
to the review policy and recorded once, each answered with its own result, on SQLite and
PostgreSQL; a batch sent again (with or without its Idempotency-Key) records nothing twice.

The bot is the real ``Deployment`` (no workers: runs are paused through the store, as
``tests/api/test_api.py`` pauses them); every answer is checked against the OpenAPI document.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bot.slack.batch_payloads import MAX_BATCH
from bot.tokens import Scope, Tokens
from storage import ReviewStatus, RunStatus, Store
from tests.support.api_harness import Answer, ApiClient
from tests.support.batch import CONFIG, LEA, paused
from tests.support.slack_harness import ALICE, BOB, configured, slack_and_bot

Json = dict[str, Any]


@dataclass
class Bench:
    store: Store
    api: ApiClient
    reader: str  # a token with the read scope alone

    def paused(self, *crews: str) -> list[str]:
        return paused(self.store, *crews)

    def batch(self, by: str, *items: Json, key: str | None = None) -> Answer:
        headers = {"Idempotency-Key": key} if key else None
        return self.api.post("/decisions", {"by": by, "decisions": list(items)}, headers=headers)

    def shown(self, review_id: str) -> str:
        """The review's digest as a client reads it."""
        page = self.api.get("/reviews?status=all&limit=200").body["reviews"]
        return str(next(r for r in page if r["id"] == review_id)["digest"])


@pytest.fixture
def bench(tmp_path: Path, db_url: str) -> Iterator[Bench]:
    with configured(tmp_path, db_url, CONFIG) as (config, store):
        made = Tokens(store)
        secret = made.create("all", list(Scope), by="test")[1]
        reader = made.create("reader", [Scope.READ], by="test")[1]
        with slack_and_bot(config, store, workers=0) as (slack, bot):
            slack.add_user(LEA, "lea")
            yield Bench(store, ApiClient(f"http://127.0.0.1:{bot.port}", secret), reader)


def _codes(answer: Answer) -> list[tuple[int, str | None]]:
    assert answer.status == 200, answer.body
    return [(r["status"], (r["error"] or {}).get("code")) for r in answer.body["results"]]


def test_each_item_is_its_own_decision_with_its_own_result(bench: Bench) -> None:
    """Alice's batch: hers, one Bob decided, one not hers, one whose chain moved on since she
    read it (Lea passed its stage), one sent with another action's digest (a stale client),
    two that are not there; each answered apart, only hers recorded and its run resumed."""
    mine, decided, bobs, chained, stale = bench.paused(
        "writer", "writer", "bobs", "chain", "writer"
    )
    read = bench.shown(chained)  # at the first stage, Alice's and Lea's
    for review_id, by in ((decided, BOB), (chained, LEA)):
        answer = bench.api.post(f"/reviews/{review_id}/decision", {"kind": "approve", "by": by})
        assert answer.status == 200, answer.body
    assert bench.store.get_review(chained).stage == 1  # Bob's now: not as Alice read it
    answer = bench.batch(
        ALICE,
        {"review_id": mine, "kind": "approve", "digest": bench.shown(mine)},
        {"review_id": decided, "kind": "approve"},
        {"review_id": bobs, "kind": "reject", "text": "no"},
        {"review_id": chained, "kind": "approve", "digest": read},
        {"review_id": stale, "kind": "approve", "digest": read},
        {"review_id": "rev_000000000000", "kind": "approve"},
        {"review_id": "not\u00a0ours", "kind": "approve"},
    )
    assert _codes(answer) == [
        (200, None),
        (409, "already_decided"),
        (403, "not_a_reviewer"),
        (403, "not_your_stage"),
        (409, "digest_mismatch"),
        (404, "not_found"),
        (404, "not_found"),
    ]
    first = answer.body["results"][0]["review"]
    assert first["status"] == "decided" and first["decision"]["by"] == ALICE
    assert answer.body["results"][1]["error"]["decided_by"] == BOB
    assert bench.store.get_review(mine).decision is not None
    assert bench.store.get_run(bench.store.get_review(mine).run_id).status == RunStatus.QUEUED
    assert bench.store.get_review(decided).decision.decided_by == BOB  # type: ignore[union-attr]
    for untouched in (bobs, chained, stale):
        assert bench.store.get_review(untouched).status == ReviewStatus.PENDING
    assert bench.store.get_review(chained).approvals[-1].decided_by == LEA
    # Read again, the chained review is Bob's to approve; Alice's fresh read is not hers.
    fresh = {"review_id": chained, "kind": "approve", "digest": bench.shown(chained)}
    assert _codes(bench.batch(ALICE, fresh)) == [(403, "not_your_stage")]
    assert _codes(bench.batch(BOB, fresh)) == [(200, None)]


def test_a_batch_sent_again_records_nothing_twice(bench: Bench) -> None:
    """The same key is answered as the first time (the quorum's approval counted once);
    the key with another body is refused; sent again without a key, each item is told it
    came late."""
    single, quorum = bench.paused("writer", "deal")
    items = ({"review_id": single, "kind": "approve"}, {"review_id": quorum, "kind": "approve"})
    first = bench.batch(ALICE, *items, key="batch-1")
    assert _codes(first) == [(200, None), (200, None)]
    replay = bench.batch(ALICE, *items, key="batch-1")
    assert replay.body == first.body
    other = bench.batch(ALICE, items[0], key="batch-1")
    assert (other.status, other.error["code"]) == (422, "idempotency_key_reused")
    again = bench.batch(ALICE, *items)
    assert _codes(again) == [(409, "already_decided"), (409, "already_approved")]
    assert len(bench.store.get_review(quorum).approvals) == 1
    assert bench.store.get_review(quorum).status == ReviewStatus.PENDING
    decision = bench.store.get_review(single).decision
    assert decision is not None and decision.decided_by == ALICE


def test_a_batch_is_bounded_and_well_formed(bench: Bench) -> None:
    (review,) = bench.paused("writer")
    one = {"review_id": review, "kind": "approve"}
    for decisions, field in (
        ([], "decisions"),
        ([one] * (MAX_BATCH + 1), "decisions"),
        ([one, one], "decisions[1].review_id"),
        ([{**one, "kind": "expire"}], "decisions[0].kind"),
        ([{**one, "kind": "changes"}], "decisions[0].text"),
        ([{**one, "extra": 1}], "decisions[0].extra"),
        (["approve"], "decisions[0]"),
    ):
        answer = bench.api.post("/decisions", {"by": ALICE, "decisions": decisions})
        assert (answer.status, answer.error["field"]) == (400, field), answer.body
    too_many = bench.api.post("/decisions", {"by": ALICE, "decisions": [one] * (MAX_BATCH + 1)})
    assert f"1 to {MAX_BATCH}" in too_many.error["message"]
    refused = bench.api.post("/decisions", {"by": ALICE, "decisions": [one]}, token=bench.reader)
    assert (refused.status, refused.error["code"]) == (403, "insufficient_scope")
    assert bench.store.get_review(review).status == ReviewStatus.PENDING
