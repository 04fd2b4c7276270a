"""The HTTP API on ``serve``'s port: tokens and scopes, bad requests, pages of reviews, and
decisions held to the crew's rules exactly once, on SQLite and PostgreSQL.

The bot is the real ``Deployment`` on a real port (no workers: runs are paused by the test
through the store, as a worker pauses them), Slack is the stand-in (who may decide is asked
of it); every answer is checked against the OpenAPI document (``tests.support.api_harness``).
"""

from __future__ import annotations

import threading
import urllib.request
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from openapi_spec_validator import validate

from bot.hosting.openapi import document
from bot.tokens import Scope, Tokens
from crew_runtime.digests import draft_digest, proposed_digest
from storage import NewReview, ReviewKind, ReviewStatus, RunStatus
from tests.support.api_harness import API_CONFIG, Answer, ApiBench, ApiClient, bench
from tests.support.slack_harness import ALICE, BOB, CHANNEL, MALLORY, configured, slack_and_bot
from tests.support.timing import at_once

__all__ = ["bench"]  # the fixture, used by name


def test_the_openapi_document_is_valid_and_served(bench: ApiBench) -> None:
    validate(document())  # type: ignore[arg-type]
    answer = bench.api.call("GET", "/openapi.json", token="")
    assert answer.status == 200 and answer.body == document()


def test_refused_tokens_change_nothing(bench: ApiBench) -> None:
    review_id = bench.pause()
    revoked = Tokens(bench.store).create("gone", list(Scope), by="test")[1]
    bench.store.revoke_token("gone", by="test")
    start = {"crew": "writer", "inputs": {"topic": "otters"}}
    approve = {"kind": "approve", "by": ALICE}
    decision = f"/reviews/{review_id}/decision"
    for token, status, code in [
        ("", 401, "unauthorized"),
        ("cs_0000000000000000_" + "x" * 43, 401, "invalid_token"),
        (bench.tokens["all"][:-1] + "?", 401, "invalid_token"),
        (revoked, 401, "invalid_token"),
        ("not a token", 401, "invalid_token"),
        (bench.tokens["read"], 403, "insufficient_scope"),
    ]:
        for path, body in (("/runs", start), (decision, approve)):
            answer = bench.api.post(path, body, token=token)
            assert (answer.status, answer.error["code"]) == (status, code), (token, path)
            assert "Bearer" in answer.headers["WWW-Authenticate"]
    basic = bench.api.get("/reviews", headers={"Authorization": "Basic YTpi"}, token="")
    assert basic.status == 401
    assert len(bench.store.list_runs()) == 1
    assert bench.store.get_review(review_id).status == ReviewStatus.PENDING
    assert bench.api.get("/reviews", token=bench.tokens["read"]).status == 200


def test_a_run_started_through_the_api_is_queued_for_its_channel(bench: ApiBench) -> None:
    answer = bench.api.post("/runs", {"crew": "writer", "inputs": {"topic": "otters"}})
    assert answer.status == 201
    run = answer.body
    assert (run["crew"], run["status"], run["inputs"]) == ("writer", "queued", {"topic": "otters"})
    assert run["started_by"] == "api:all" and run["reviews"] == []
    stored = bench.store.get_run(run["id"])
    assert stored.channel == CHANNEL  # the dispatcher posts its thread there
    assert bench.api.get(f"/runs/{run['id']}").body == run

    keyed = {"Idempotency-Key": "k-1"}
    body = {"crew": "writer", "inputs": {"topic": "seals"}, "by": BOB}
    first = bench.api.post("/runs", body, headers=keyed)
    again = bench.api.post("/runs", body, headers=keyed)
    assert first.body["id"] == again.body["id"] and first.body["started_by"] == BOB
    too_long = bench.api.post("/runs", body, headers={"Idempotency-Key": "k" * 101})
    assert (too_long.status, too_long.error["field"]) == (400, "Idempotency-Key")
    assert len(bench.store.list_runs()) == 2


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ({"crew": "nope", "inputs": {}}, "unknown_crew", "crew"),
        ({"inputs": {"topic": "x"}}, "invalid", "crew"),
        ({"crew": "writer", "inputs": {}}, "invalid_inputs", "inputs.topic"),
        (
            {"crew": "writer", "inputs": {"topic": "x", "tone": "y"}},
            "invalid_inputs",
            "inputs.tone",
        ),
        ({"crew": "writer", "inputs": {"topic": 3}}, "invalid", "inputs.topic"),
        ({"crew": "writer", "inputs": ["topic"]}, "invalid", "inputs"),
        ({"crew": "writer", "inputs": {"topic": "x", "1st": "y"}}, "invalid", "inputs.1st"),
        ({"crew": "writer", "inputs": {"topic": "x"}, "extra": 1}, "invalid", "extra"),
        ({"crew": "writer", "inputs": {"topic": "a\x00b"}}, "unstorable", None),
        ([1, 2], "malformed_json", None),
    ],
)
def test_a_bad_run_is_refused_naming_the_field(
    bench: ApiBench, body: object, code: str, field: str | None
) -> None:
    answer = bench.api.post("/runs", body)
    assert (answer.status, answer.error["code"], answer.error["field"]) == (400, code, field)
    assert bench.store.list_runs() == []


def test_a_runs_reviewer_is_someone_slack_knows(bench: ApiBench) -> None:
    nobody = {"crew": "named", "inputs": {"topic": "otters", "approver": "U0NOBODY"}}
    answer = bench.api.post("/runs", nobody)
    assert (answer.status, answer.error["field"]) == (400, "inputs.approver")
    not_an_id = {"crew": "named", "inputs": {"topic": "otters", "approver": "alice"}}
    answer = bench.api.post("/runs", not_an_id)
    assert (answer.status, answer.error["field"]) == (400, "inputs.approver")
    assert bench.store.list_runs() == []
    alice = {"crew": "named", "inputs": {"topic": "otters", "approver": ALICE}}
    assert bench.api.post("/runs", alice).status == 201


def test_malformed_json_unknown_ids_and_endpoints(bench: ApiBench) -> None:
    answer = bench.api.post("/runs", raw=b'{"crew": ')
    assert (answer.status, answer.error["code"]) == (400, "malformed_json")
    huge = bench.api.post("/runs", {"crew": "writer", "inputs": {"topic": "x" * 2_000_000}})
    assert (huge.status, huge.error["code"]) == (413, "too_large")
    unknown = bench.api.call("GET", "/nothing", documented=False)
    assert (unknown.status, unknown.error["code"]) == (404, "not_found")
    for method, path in (("DELETE", "/runs/run_1"), ("GET", "/runs")):
        wrong = bench.api.call(method, path, documented=False)
        assert (wrong.status, wrong.error["code"]) == (405, "method_not_allowed")
        assert wrong.headers["Allow"] in ("GET", "POST")
    assert bench.store.list_runs() == []
    assert bench.api.get("/runs/run_nope").status == 404
    missing = bench.decide("rev_nope", kind="approve", by=ALICE)
    assert (missing.status, missing.error["code"]) == (404, "not_found")


def test_reviews_come_a_page_at_a_time(bench: ApiBench) -> None:
    ids = [bench.pause() for _ in range(5)]
    other = bench.pause("deal")
    seen: list[str] = []
    cursor = None
    while True:
        query = "?crew=writer&limit=2" + (f"&cursor={cursor}" if cursor else "")
        page = bench.api.get("/reviews" + query).body
        seen += [review["id"] for review in page["reviews"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == ids
    assert bench.decide(ids[0], kind="approve", by=ALICE).status == 200
    pending = [r["id"] for r in bench.api.get("/reviews").body["reviews"]]
    assert pending == [*ids[1:], other]
    decided = bench.api.get("/reviews?status=decided").body["reviews"]
    assert [r["id"] for r in decided] == [ids[0]] and decided[0]["decision"]["by"] == ALICE
    assert len(bench.api.get("/reviews?status=all").body["reviews"]) == 6
    for query, field in [
        ("?status=open", "status"),
        ("?crew=nope", "crew"),
        ("?limit=0", "limit"),
        ("?limit=201", "limit"),
        ("?limit=ten", "limit"),
        ("?cursor=%%%", "cursor"),
        ("?cursor=bm9wZQ", "cursor"),
        ("?page=2", "page"),
    ]:
        answer = bench.api.get("/reviews" + query)
        assert (answer.status, answer.error["field"]) == (400, field), query


def test_a_decision_follows_the_crews_rules(bench: ApiBench) -> None:
    review_id = bench.pause()
    for body, status, code, field in [
        ({"kind": "approve", "by": MALLORY}, 403, "not_a_reviewer", "by"),
        ({"kind": "approve"}, 400, "invalid", "by"),
        ({"kind": "bless", "by": ALICE}, 400, "invalid", "kind"),
        ({"kind": "expire", "by": ALICE}, 400, "invalid", "kind"),
        ({"kind": "changes", "by": ALICE}, 400, "invalid", "text"),
        ({"kind": "answer", "text": "42", "by": ALICE}, 422, "decision_not_allowed", "kind"),
        ({"kind": "approve", "by": ALICE, "standing": True}, 422, "refused", None),
        ({"kind": "approve", "by": ALICE, "standing": "yes"}, 400, "invalid", "standing"),
    ]:
        answer = bench.decide(review_id, **body)
        assert (answer.status, answer.error["code"], answer.error["field"]) == (
            status,
            code,
            field,
        ), body
    assert bench.store.get_review(review_id).status == ReviewStatus.PENDING

    edited = bench.decide(review_id, kind="edit", text="a better draft", by=BOB)
    assert edited.status == 200
    assert edited.body["status"] == "decided"
    assert edited.body["decision"] | {"at": None} == {
        "kind": "edit",
        "text": "a better draft",
        "original": "the draft",
        "by": BOB,
        "at": None,
        "digest": None,  # a review the test opened itself, without a digest
    }
    late = bench.decide(review_id, kind="reject", by=ALICE)
    assert late.status == 409
    assert late.error["code"] == "already_decided" and late.error["decided_by"] == BOB
    assert BOB in late.error["message"] and late.error["decision"] == "edit"
    run = bench.api.get(f"/runs/{edited.body['run_id']}").body
    assert run["status"] == RunStatus.QUEUED.value  # resumed by the next worker
    assert run["reviews"][0]["decision"]["kind"] == "edit"


def test_a_quorum_and_self_approval_through_the_api(bench: ApiBench) -> None:
    review_id = bench.pause("deal", by=ALICE)
    own = bench.decide(review_id, kind="approve", by=ALICE)
    assert (own.status, own.error["code"]) == (403, "self_approval")
    first = bench.decide(review_id, kind="approve", by=BOB)
    assert first.status == 200 and first.body["status"] == "pending"
    assert [a["by"] for a in first.body["approvals"]] == [BOB]
    twice = bench.decide(review_id, kind="approve", by=BOB)
    assert (twice.status, twice.error["code"]) == (409, "already_approved")
    edit = bench.decide(review_id, kind="edit", text="x", by=MALLORY)
    assert (edit.status, edit.error["code"]) == (422, "refused")
    second = bench.decide(review_id, kind="approve", by=MALLORY)
    assert second.status == 200 and second.body["status"] == "decided"
    assert second.body["decision"]["by"] == MALLORY


def test_a_question_is_answered(bench: ApiBench) -> None:
    review_id = bench.pause(kind=ReviewKind.QUESTION)
    approve = bench.decide(review_id, kind="approve", by=ALICE)
    assert (approve.status, approve.error["code"]) == (422, "decision_not_allowed")
    answer = bench.decide(review_id, kind="answer", text="Otters hold hands.", by=ALICE)
    assert answer.status == 200 and answer.body["decision"]["text"] == "Otters hold hands."


def test_a_replayed_decision_is_answered_as_the_first(bench: ApiBench) -> None:
    review_id = bench.pause()
    keyed = {"Idempotency-Key": "click-1"}
    body = {"kind": "approve", "by": ALICE}
    first = bench.api.post(f"/reviews/{review_id}/decision", body, headers=keyed)
    again = bench.api.post(f"/reviews/{review_id}/decision", body, headers=keyed)
    assert first.status == again.status == 200
    assert first.body["decision"] == again.body["decision"]


def _decide_at_once(bench: ApiBench, review_id: str) -> dict[str, Answer]:
    """Alice approves and Bob rejects ``review_id`` at the same moment; their answers."""
    barrier = threading.Barrier(2)
    answers: dict[str, Answer] = {}

    def decide(who: str, kind: str) -> None:
        barrier.wait()
        answers[who] = bench.decide(review_id, kind=kind, text="no", by=who)

    at_once(lambda n: decide(*[(ALICE, "approve"), (BOB, "reject")][n]), 2)
    return answers


def test_two_decisions_at_once_one_wins(bench: ApiBench) -> None:
    # Paused first: a decided run is queued again, and the next pause would claim it.
    for review_id in [bench.pause() for _ in range(3)]:
        answers = _decide_at_once(bench, review_id)
        assert sorted(answer.status for answer in answers.values()) == [200, 409]
        winner = next(who for who, answer in answers.items() if answer.status == 200)
        loser = answers[ALICE if winner == BOB else BOB]
        assert loser.error["decided_by"] == winner
        review = bench.store.get_review(review_id)
        assert review.decision is not None and review.decision.decided_by == winner


def test_in_socket_mode_the_api_is_on_the_metrics_port(tmp_path: Path, db_url: str) -> None:
    with configured(tmp_path, db_url, API_CONFIG) as (config, store):
        token = Tokens(store).create("all", list(Scope), by="test")[1]
        with slack_and_bot(config, store, socket_mode=True, workers=0) as (_slack, bot):
            bench = ApiBench(store, ApiClient(f"http://127.0.0.1:{bot.port}", token), {})
            review_id = bench.pause()
            assert bench.decide(review_id, kind="approve", by=ALICE).status == 200
            assert store.get_review(review_id).status == ReviewStatus.DECIDED
            metrics = urllib.request.urlopen(f"http://127.0.0.1:{bot.port}/metrics", timeout=30)
            assert b"countersign_" in metrics.read()


def test_a_decision_for_another_action_digest_is_refused_with_409(bench: ApiBench) -> None:
    bench.store.create_run("writer", {"topic": "otters"}, started_by=ALICE, channel=CHANNEL)
    run = bench.store.claim_run("w1", timedelta(seconds=30))
    assert run is not None and run.lease_token is not None
    ask = NewReview(kind=ReviewKind.TASK_REVIEW, stream="task0:Writer", seq=0, prompt="the draft")
    ask = replace(ask, digest=proposed_digest(run.id, ask))
    (review,) = bench.store.suspend_run(run.id, run.lease_token, [ask])
    assert review.digest is not None and len(review.digest) == 64
    (shown,) = bench.api.get("/reviews").body["reviews"]
    assert shown["digest"] == review.digest

    stale = bench.decide(review.id, kind="approve", by=ALICE, digest="0123abcd" * 2)
    assert (stale.status, stale.error["code"], stale.error["field"]) == (
        409,
        "digest_mismatch",
        "digest",
    )
    assert stale.error["digest"] == review.digest and "0123abcd0123" in stale.error["message"]
    bad = bench.decide(review.id, kind="approve", by=ALICE, digest="not hex")
    assert (bad.status, bad.error["field"]) == (400, "digest")
    assert bench.store.get_review(review.id).status == ReviewStatus.PENDING

    # The short form a card shows is enough; an edit covers the edited draft's digest.
    edited = bench.decide(review.id, kind="edit", text="better", by=BOB, digest=review.digest[:12])
    assert edited.status == 200
    covers = draft_digest(run.id, "task0:Writer", 0, "better", typed=False)
    assert edited.body["decision"]["digest"] == covers != review.digest
