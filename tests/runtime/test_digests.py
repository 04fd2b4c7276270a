"""Action digests: a decision covers exactly the action it was shown, and the worker runs
nothing else: through a kill between the approval and the call, an edit, a replay whose call
changed, and the doors (the CLI here; the API in ``tests/api/test_api.py``)."""

from __future__ import annotations

import io
from contextlib import redirect_stderr
from datetime import datetime, timedelta

import pytest
from sqlalchemy import update

from bot.cli.main import main
from bot.hosting.api_errors import refusal as api_refusal
from bot.slack.text import refusal as slack_refusal
from crew_runtime.digests import call_digest, draft_digest
from storage import DecisionKind, DigestMismatch, Review, ReviewStatus, RunStatus
from storage.audit import AuditRecord
from storage.schema import decisions
from tests.support.harness import Bench


def _paused(bench: Bench, amount: int = 1500) -> tuple[str, str]:
    run = bench.start("payments", amount=str(amount))
    bench.work_here()
    review = bench.pending(run.id)
    assert review.digest == call_digest(
        run.id, review.stream, review.seq, "pay", {"amount": amount, "to": "ACME"}
    )
    return run.id, review.id


def _executed_digest(bench: Bench, run_id: str) -> str:
    (entry,) = [e for e in bench.store.load_journal(run_id) if e.kind == "tool"]
    return call_digest(
        run_id, entry.stream, entry.seq, entry.payload["tool"], entry.payload["args"]
    )


def _audit(bench: Bench) -> list[AuditRecord]:
    now = datetime.now()
    return list(bench.store.audit_records(since=now - timedelta(days=1), until=now + timedelta(1)))


@pytest.mark.slow
def test_a_worker_killed_between_approval_and_call_runs_the_approved_digest_once(
    bench: Bench,
) -> None:
    run_id, review_id = _paused(bench)
    approved = bench.service.decide(review_id, DecisionKind.APPROVE, None, by="U1")
    assert approved.decision is not None and approved.decision.digest == approved.digest
    doomed = bench.spawn(COUNTERSIGN_TEST_HOLD="pay 1500 ACME")
    bench.kill_when_holding(doomed, "pay 1500 ACME")  # approved, about to pay: killed
    assert bench.effects("paid") == []
    bench.work()
    done = bench.run(run_id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    assert [(e["amount"], e["to"]) for e in bench.effects("paid")] == [(1500, "ACME")]
    assert _executed_digest(bench, run_id) == approved.decision.digest


@pytest.mark.slow
def test_an_edit_makes_the_digest_that_is_approved_and_executed(bench: Bench) -> None:
    run_id, review_id = _paused(bench)
    edited = bench.service.decide(
        review_id, DecisionKind.EDIT, '{"amount": 900, "to": "ACME"}', by="U_CFO"
    )
    review = bench.store.get_review(review_id)
    covers = call_digest(run_id, review.stream, review.seq, "pay", {"amount": 900, "to": "ACME"})
    assert edited.decision is not None and edited.decision.digest == covers != review.digest
    doomed = bench.spawn(COUNTERSIGN_TEST_HOLD="pay 900 ACME")
    bench.kill_when_holding(doomed, "pay 900 ACME")
    bench.work()
    assert bench.run(run_id).status == RunStatus.SUCCEEDED
    assert [e["amount"] for e in bench.effects("paid")] == [900]
    assert _executed_digest(bench, run_id) == covers
    (record,) = [r for r in _audit(bench) if r.review_id == review_id]
    assert record.digest == covers


def test_a_replay_whose_call_changed_does_not_run_and_asks_again(bench: Bench) -> None:
    run_id, review_id = _paused(bench)
    approved = bench.service.decide(review_id, DecisionKind.APPROVE, None, by="U1")
    # What the model proposed changes under the approval (a journal edited, code changed
    # between pause and resume): the replayed turn now pays 1600.
    bench.rewrite_model_turns(run_id, "1500", "1600")
    bench.work_here()
    assert bench.effects("paid") == []  # not run
    assert bench.store.get_review(review_id).status == ReviewStatus.SUPERSEDED
    again = bench.pending(run_id)
    assert again.id != review_id and again.details.args == {"amount": 1600, "to": "ACME"}
    assert again.digest != approved.digest
    (refused,) = [r for r in _audit(bench) if r.decision == "digest_mismatch"]
    assert refused.review_id == review_id
    assert refused.details["approved"] == approved.digest
    assert refused.details["found"] == again.digest

    bench.service.decide(again.id, DecisionKind.APPROVE, None, by="U1")
    bench.work_here()
    assert bench.run(run_id).status == RunStatus.SUCCEEDED
    assert [e["amount"] for e in bench.effects("paid")] == [1600]


def test_the_cli_refuses_a_decision_for_another_digest(bench: Bench) -> None:
    _, review_id = _paused(bench)
    review = bench.store.get_review(review_id)
    assert review.digest is not None
    argv = ["--config", str(bench.config_path), "--database-url", bench.db_url, "reviews"]
    err = io.StringIO()
    with redirect_stderr(err):
        code = main([*argv, "decide", review_id, "approve", "--by", "U1", "--digest", "ab" * 6])
    assert code == 2
    (line,) = err.getvalue().splitlines()
    assert line.startswith("error: ") and "abababababab" in line and review.digest[:12] in line
    assert bench.store.get_review(review_id).status == ReviewStatus.PENDING
    short = review.digest[:12]
    assert main([*argv, "decide", review_id, "approve", "--by", "U1", "--digest", short]) == 0
    decided = bench.store.get_review(review_id)
    assert decided.decision is not None and decided.decision.digest == review.digest


def test_each_door_says_a_digest_mismatch_once_in_its_own_words() -> None:
    stale = DigestMismatch("rev_1", "ab" * 32, "cd" * 32)
    words = slack_refusal(stale)
    assert "`abababababab`" in words and "`cdcdcdcdcdcd`" in words
    assert words.endswith("Nothing was recorded.")
    answer = api_refusal(stale)
    assert (answer.status, answer.code, answer.field) == (409, "digest_mismatch", "digest")
    assert answer.extra == {"expected": "ab" * 32, "digest": "cd" * 32}


def test_a_lone_surrogate_has_a_digest_of_its_own() -> None:
    """RFC 8785 refuses half of a UTF-16 pair; the digest writes it as its escape (the run
    then fails where the database refuses it, ``tests/runtime/test_unstorable.py``)."""
    odd = call_digest("run_1", "task0:writer", 0, "pay", {"to": "x\udc80", "\ud800": ["\udfff"]})
    assert odd != call_digest("run_1", "task0:writer", 0, "pay", {"to": "x"})
    assert odd != call_digest("run_1", "task0:writer", 0, "pay", {"to": "x\udc81", "\ud800": []})


# -- reviewed drafts: what a resumed run goes on with has the approved digest


def _outline(bench: Bench) -> tuple[str, Review]:
    run = bench.start("writer", topic="otters")
    bench.work_here()
    review = bench.pending(run.id)
    assert review.digest == draft_digest(run.id, review.stream, review.seq, review.prompt, False)
    return run.id, review


def _draft_refusals(bench: Bench) -> list[AuditRecord]:
    return [r for r in _audit(bench) if r.decision == "digest_mismatch"]


def test_a_resume_whose_approved_draft_changed_does_not_pass_it_on_and_asks_again(
    bench: Bench,
) -> None:
    run_id, review = _outline(bench)
    assert "otters" in review.prompt
    approved = bench.service.decide(review.id, DecisionKind.APPROVE, None, by="U1")
    assert approved.decision is not None and approved.decision.digest == review.digest
    # What the model wrote changes under the approval (a journal edited, a replay that
    # differs): the replayed outline is about beavers now.
    bench.rewrite_model_turns(run_id, "otters", "beavers")
    bench.work_here()
    assert bench.store.get_review(review.id).status == ReviewStatus.SUPERSEDED
    again = bench.pending(run_id)  # the outline again, not the article
    assert (again.stream, again.seq) == (review.stream, review.seq)
    assert "beavers" in again.prompt and again.digest != review.digest
    assert bench.run(run_id).status == RunStatus.WAITING
    (refused,) = _draft_refusals(bench)
    assert refused.review_id == review.id
    assert refused.details["approved"] == review.digest
    assert refused.details["found"] == again.digest
    # Approved as it is now, the run goes on with it: the article is reviewed next.
    bench.service.decide(again.id, DecisionKind.APPROVE, None, by="U1")
    bench.work_here()
    article = bench.pending(run_id)
    assert article.stream != review.stream and "beavers" in article.prompt
    assert len(_draft_refusals(bench)) == 1


def test_an_edit_lost_before_the_resume_is_not_passed_on(bench: Bench) -> None:
    run_id, review = _outline(bench)
    edited = bench.service.decide(review.id, DecisionKind.EDIT, "A better outline", by="U1")
    assert edited.decision is not None
    covers = draft_digest(run_id, review.stream, review.seq, "A better outline", False)
    assert edited.decision.digest == covers != review.digest
    with bench.store.engine.begin() as conn:  # the edit's text is not what was approved now
        conn.execute(
            update(decisions).where(decisions.c.review_id == review.id).values(text="Other")
        )
    bench.work_here()
    assert bench.store.get_review(review.id).status == ReviewStatus.SUPERSEDED
    again = bench.pending(run_id)
    assert (again.stream, again.prompt) == (review.stream, review.prompt)
    (refused,) = _draft_refusals(bench)
    assert (refused.details["approved"], refused.details["task"]) == (covers, review.stream)


def test_an_approved_and_an_edited_draft_resume_as_before(bench: Bench) -> None:
    run_id, review = _outline(bench)
    bench.service.decide(review.id, DecisionKind.EDIT, "A better outline", by="U1")
    bench.work_here()
    article = bench.pending(run_id)
    assert article.stream != review.stream
    bench.service.decide(article.id, DecisionKind.APPROVE, None, by="U1")
    bench.work_here()
    done = bench.run(run_id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    assert _draft_refusals(bench) == []
