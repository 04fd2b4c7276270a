"""Batch review through the real doors: *Decide several…* on the Home tab and in ``/crew
pending``'s answer, on the real bot with the Slack stand-in (its strict Block Kit checks),
on SQLite and PostgreSQL. The reviews a person chose are each their own decision, held to
the review policy, recorded once, resuming their own run; one decided, changed or no longer
theirs meanwhile is skipped and listed; the confirmation clicked twice, or handled again,
records nothing twice.

Runs are paused through the store, as a worker pauses them (no workers: a resumed run is
queued, and stays so); ``bench/batch.py`` has workers claim them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from bot.slack import block_text, home_text, text
from bot.slack.batch_payloads import BATCH, CONFIRM, pick_block_id
from bot.slack.payloads import action_id, callback_id
from bot.tokens import Scope, Tokens
from sandbox import StandInThread
from storage import DecisionKind, ReviewStatus, RunStatus, Store
from tests.api_harness import ApiClient
from tests.slack_harness import ALICE, BOB, CHANNEL, configured, slack_and_bot, wait_until
from tests.test_api_batch import CONFIG, LEA, paused
from tests.test_slack_home import _home

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


def modal(slack: StandInThread, user: str, callback: str) -> Json:
    """``user``'s open modal of ``callback`` (once the loading one is filled)."""
    return wait_until(
        lambda: next((v for v in slack.open_views(user) if v.get("callback_id") == callback), None),
        what=f"{user}'s {callback} modal",
    )


def listed(chooser: Json) -> list[str]:
    """The ids of the reviews the choosing modal offers."""
    return [
        o["value"].split()[0]
        for b in chooser["blocks"]
        if b["block_id"].startswith("pick:")
        for o in b["element"]["options"]
    ]


def choose(
    slack: StandInThread, user: str, only: str | None = None, **inputs: str
) -> tuple[Json, Json]:
    """Tick every review the choosing modal lists (or ``only`` that one) and submit, with
    ``inputs`` (``decision``, ``text``): (the choosing modal as shown, the confirmation)."""
    chooser = modal(slack, user, callback_id(BATCH))
    assert only is None or only in listed(chooser), (only, listed(chooser))
    ticked = {}
    for block in chooser["blocks"]:
        if block["block_id"].startswith("pick:"):
            values = [o["value"] for o in block["element"]["options"]]
            values = [v for v in values if only is None or v.split()[0] == only]
            if values:
                ticked[block["block_id"]] = values
    answer = slack.submit_view(user, chooser["id"], {**ticked, **inputs})
    assert answer.ok and not answer.problems, (answer.body, answer.problems)
    return chooser, modal(slack, user, callback_id(CONFIRM))


def answered(slack: StandInThread, user: str, view_id: str) -> str:
    """The words of the modal ``view_id`` once it answers what was recorded (neither the
    confirmation nor "Recording…")."""

    def said() -> str | None:
        view = next((v for v in slack.open_views(user) if v["id"] == view_id), None)
        blocks = (view or {}).get("blocks", [])
        words = "".join(str(b.get("text", {}).get("text", "")) for b in blocks)
        done = blocks and CONFIRM not in [b.get("block_id") for b in blocks]
        return words if done and block_text.BATCH_RECORDING not in words else None

    return wait_until(said, what=f"{user}'s batch answer")


def from_home(slack: StandInThread, user: str) -> None:
    """``user`` opens Home and clicks *Decide several…* there."""
    slack.open_home(user)
    home = wait_until(
        lambda: (
            (v := slack.home_view(user))
            and any(b.get("block_id") == BATCH for b in v["blocks"])
            and v
        ),
        what=f"{user}'s Home to offer Decide several",
    )
    click = slack.click_in_view(user, home["id"], action_id(BATCH))
    assert click.ok, click.body


def from_pending(slack: StandInThread, user: str) -> None:
    """``user`` types ``/crew pending`` and clicks *Decide several…* in its answer."""
    before = len(slack.ephemerals(user))
    slack.slash_command(user, CHANNEL, "/crew", "pending")
    listing = wait_until(lambda: slack.ephemerals(user)[before:], what="/crew pending")[0]
    assert any(b.get("block_id") == BATCH for b in listing.blocks), listing.text
    slack.click_button(user, CHANNEL, listing.ts, action_id(BATCH))


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
    _home(bench.slack, ALICE, home_text.home_pending_count(1))
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
