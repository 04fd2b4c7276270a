"""Batch review through the real doors: *Decide several…* (and *Approve/Reject all N
shown*) on the Home tab and in ``/crew pending``'s answer, on the real bot with the Slack
stand-in (its strict Block Kit checks), on SQLite and PostgreSQL. The reviews a person
chose are each their own decision, held to the review policy, recorded once, resuming
their own run; one decided, changed or no longer theirs meanwhile is skipped and listed;
the confirmation clicked twice, or handled again, records nothing twice.

Runs are paused through the store, as a worker pauses them (no workers: a resumed run is
queued, and stays so); ``bench/batch.py`` has workers claim them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from bot.slack import block_text, home_text, text
from bot.slack.batch_payloads import BATCH, CONFIRM, SHOWN, pick_block_id
from bot.slack.payloads import action_id, callback_id
from bot.tokens import Scope, Tokens
from sandbox import StandInThread
from storage import DecisionKind, ReviewStatus, RunStatus, Store
from tests.support.api_harness import ApiClient
from tests.support.batch import (
    CONFIG,
    LEA,
    answered,
    choose,
    forged_confirmation,
    from_home,
    from_pending,
    listed,
    modal,
    paused,
)
from tests.support.slack_harness import (
    ALICE,
    BOB,
    configured,
    home_says,
    slack_and_bot,
    wait_until,
)

Json = dict[str, Any]


@dataclass
class Bench:
    store: Store
    slack: StandInThread
    api: ApiClient

    def paused(self, *crews: str) -> list[str]:
        return paused(self.store, *crews)

    def approve(self, review_id: str, by: str) -> None:
        answer = self.api.post(f"/reviews/{review_id}/decision", {"kind": "approve", "by": by})
        assert answer.status == 200, answer.body


@pytest.fixture
def bench(tmp_path: Path, db_url: str) -> Iterator[Bench]:
    with configured(tmp_path, db_url, CONFIG) as (config, store):
        secret = Tokens(store).create("t", list(Scope), by="test")[1]
        with slack_and_bot(config, store, workers=0) as (slack, bot):
            slack.add_user(LEA, "lea")
            yield Bench(store, slack, ApiClient(f"http://127.0.0.1:{bot.port}", secret))


def test_a_batch_from_home_decides_each_apart_and_skips_what_changed(bench: Bench) -> None:
    """Alice ticks her five; meanwhile Bob decides one, Lea passes the chain's first stage
    of another, and Bob comes back from being away (Alice held his reviews). Her two that
    did not change are recorded (one completes, one counts toward its quorum); the three
    are skipped, each with why; nothing else moves."""
    mine, decided, quorum, chained, bobs = bench.paused("writer", "writer", "deal", "chain", "bobs")
    bench.store.away(BOB, ALICE, datetime(2099, 1, 1), by=BOB)  # Alice holds Bob's reviews
    from_home(bench.slack, ALICE)
    chooser = modal(bench.slack, ALICE, callback_id(BATCH))
    assert sorted(listed(chooser)) == sorted([mine, decided, quorum, chained, bobs])
    # Meanwhile, after she was shown them:
    bench.approve(decided, BOB)
    bench.approve(chained, LEA)  # the chain is at Bob's stage now
    bench.store.back(BOB, by=BOB)
    _, confirm = choose(bench.slack, ALICE)
    assert "approve 5 reviews" in str(confirm["blocks"][0])
    clicked = bench.slack.click_in_view(ALICE, confirm["id"], action_id(CONFIRM))
    assert clicked.ok, clicked.body
    said = answered(bench.slack, ALICE, confirm["id"])
    assert block_text.batch_done(DecisionKind.APPROVE, 2, 1, 3) in said
    # Bob's again, and the chain's: at his stage now, so not hers (her modal said otherwise).
    assert text.NOT_A_REVIEWER in said and "<@UBOB> decide it now" in said
    recorded = bench.store.get_review(mine)
    assert recorded.decision is not None and recorded.decision.decided_by == ALICE
    assert bench.store.get_run(recorded.run_id).status == RunStatus.QUEUED  # resumed
    assert [a.decided_by for a in bench.store.get_review(quorum).approvals] == [ALICE]
    assert bench.store.get_review(decided).decision.decided_by == BOB  # type: ignore[union-attr]
    assert [a.decided_by for a in bench.store.get_review(chained).approvals] == [LEA]
    assert bench.store.get_review(bobs).status == ReviewStatus.PENDING
    # Her Home tab is refreshed: one waits for her now, the quorum's review (listed still, as
    # the policy asks her; her approval counts once); the chain is at Bob's stage, and Bob's
    # own review is his again.
    home_says(bench.slack, ALICE, home_text.home_pending_count(1))
    # The same confirmation clicked again (a duplicate click: a new trigger id), and Slack's
    # retry of the first click: each review answered as the first time, nothing recorded twice.
    again = bench.slack.send_interaction(clicked.payload)
    assert again.ok
    bench.slack.retry(clicked)
    wait_until(
        lambda: (
            len(
                [
                    c
                    for c in bench.slack.calls("views.update")
                    if c.params.get("view_id") == confirm["id"]
                ]
            )
            >= 4
        ),
        what="the second click's answer",
    )
    again_said = answered(bench.slack, ALICE, confirm["id"])
    assert block_text.batch_done(DecisionKind.APPROVE, 2, 1, 3) in again_said
    assert len(bench.store.get_review(quorum).approvals) == 1
    assert bench.store.get_review(mine).decision == recorded.decision


def test_a_batch_from_crew_pending_answers_in_the_channel(bench: Bench) -> None:
    """``/crew pending``'s answer offers *Decide several…*; the answer to the confirmation
    is told privately in the channel too, and a rejection's reason reaches each review."""
    first, second = bench.paused("writer", "writer")
    before = len(bench.slack.ephemerals(BOB))
    from_pending(bench.slack, BOB)
    chooser = modal(bench.slack, BOB, callback_id(BATCH))
    # Nothing ticked: the modal says so and stays.
    empty = bench.slack.submit_view(BOB, chooser["id"], {})
    assert empty.json["errors"] == {pick_block_id(0): block_text.BATCH_CHOOSE_ONE}
    bench.approve(second, ALICE)  # decided meanwhile
    _, confirm = choose(bench.slack, BOB, decision="reject", text="off topic")
    bench.slack.click_in_view(BOB, confirm["id"], action_id(CONFIRM))
    told = wait_until(
        lambda: [e for e in bench.slack.ephemerals(BOB)[before + 1 :] if "Rejected" in e.text],
        what="the batch's answer in the channel",
    )
    assert told[0].text.startswith(block_text.batch_done(DecisionKind.REJECT, 1, 0, 1))
    decision = bench.store.get_review(first).decision
    assert decision is not None and (decision.kind.value, decision.text) == ("reject", "off topic")
    assert bench.store.get_run(bench.store.get_review(first).run_id).status == RunStatus.QUEUED


def _confirm_lines(confirm: Json) -> str:
    return " ".join(str(b.get("text", {}).get("text", "")) for b in confirm["blocks"])


def test_approve_all_shown_on_home_confirms_them_and_skips_what_moved(bench: Bench) -> None:
    """*Approve all 4 shown* on Alice's Home: one confirmation lists the four it was shown
    with; meanwhile Bob decides one and comes back from being away (Alice held his). Her two
    are recorded (one counts toward its quorum), the two skipped each with why; the
    confirmation clicked again, and Slack's retry of the click, record nothing twice."""
    mine, decided, quorum, bobs = bench.paused("writer", "writer", "deal", "bobs")
    bench.store.away(BOB, ALICE, datetime(2099, 1, 1), by=BOB)
    from_home(bench.slack, ALICE, SHOWN[DecisionKind.APPROVE])
    home = bench.slack.home_view(ALICE)
    assert home is not None
    (buttons,) = [b["elements"] for b in home["blocks"] if b.get("block_id") == BATCH]
    words = [e["text"]["text"] for e in buttons]
    assert words == [block_text.BATCH_BUTTON, "Approve all 4 shown", "Reject all 4 shown"]
    confirm = modal(bench.slack, ALICE, callback_id(CONFIRM))
    assert "approve 4 reviews" in _confirm_lines(confirm)
    assert _confirm_lines(confirm).count("• *") == 4  # each listed
    bench.approve(decided, BOB)
    bench.store.back(BOB, by=BOB)
    clicked = bench.slack.click_in_view(ALICE, confirm["id"], action_id(CONFIRM))
    assert clicked.ok, clicked.body
    said = answered(bench.slack, ALICE, confirm["id"])
    assert block_text.batch_done(DecisionKind.APPROVE, 2, 1, 2) in said
    assert text.NOT_A_REVIEWER in said
    recorded = bench.store.get_review(mine)
    assert recorded.decision is not None and recorded.decision.decided_by == ALICE
    assert bench.store.get_run(recorded.run_id).status == RunStatus.QUEUED
    assert [a.decided_by for a in bench.store.get_review(quorum).approvals] == [ALICE]
    assert bench.store.get_review(bobs).status == ReviewStatus.PENDING
    assert bench.store.get_review(decided).decision.decided_by == BOB  # type: ignore[union-attr]

    def updates() -> int:
        calls = bench.slack.calls("views.update")
        return len([c for c in calls if c.params.get("view_id") == confirm["id"]])

    before = updates()
    assert bench.slack.send_interaction(clicked.payload).ok  # a second click
    bench.slack.retry(clicked)  # the same request: taken once
    wait_until(lambda: updates() >= before + 2, what="the second click's answer")
    assert block_text.batch_done(DecisionKind.APPROVE, 2, 1, 2) in answered(
        bench.slack, ALICE, confirm["id"]
    )
    assert len(bench.store.get_review(quorum).approvals) == 1
    assert bench.store.get_review(mine).decision == recorded.decision


def test_reject_all_shown_in_crew_pending_skips_one_whose_action_changed(bench: Bench) -> None:
    """*Reject all 2 shown* in ``/crew pending``'s answer: a review whose digest is not the
    one shown (a forged or stale value) is skipped as changed; the other is rejected and its
    run resumes; the answer is told in the channel too."""
    first, second = bench.paused("writer", "writer")
    before = len(bench.slack.ephemerals(BOB))
    from_pending(bench.slack, BOB, SHOWN[DecisionKind.REJECT])
    confirm = modal(bench.slack, BOB, callback_id(CONFIRM))
    assert "reject 2 reviews" in _confirm_lines(confirm)
    # The confirmation as the click made it, but the second review's digest not the one
    # it has now (what a review changed since shown carries).
    meta = json.loads(confirm["private_metadata"])
    assert [i.split()[0] for i in meta["items"]] == [first, second]
    items = [meta["items"][0], f"{second} {'0' * 16}"]
    forged_confirmation(bench.slack, BOB, confirm["id"], items, "reject")
    told = wait_until(
        lambda: [e for e in bench.slack.ephemerals(BOB)[before + 1 :] if "Rejected" in e.text],
        what="the batch's answer in the channel",
    )
    assert told[0].text.startswith(block_text.batch_done(DecisionKind.REJECT, 1, 0, 1))
    assert bench.store.get_review(second).status == ReviewStatus.PENDING
    decision = bench.store.get_review(first).decision
    assert decision is not None and decision.kind is DecisionKind.REJECT
    assert bench.store.get_run(bench.store.get_review(first).run_id).status == RunStatus.QUEUED
