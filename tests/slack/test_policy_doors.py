"""Every door gives the review policy's answer: the same person's same action sent through
each door offering it (a click, a thread reply, the HTTP API, the command line, batch
review from the Home tab, from ``/crew pending`` and through the API), on a real
bot with its workers and the Slack stand-in, and only what the policy allows changes
anything. Then the issue's items through the real doors: an outsider's API decision on a
group stage (1), ``/crew cancel`` and Revise on a chain-only crew (2), a run nobody could
decide (3), a stage race through the API (4), and Reassign to a bot, to oneself, to someone
who may not decide (issue 24's second wall)."""

from __future__ import annotations

import io
import random
from collections.abc import Callable, Iterator
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bot.cli.main import main as cli_main
from bot.hosting.api_errors import refusal as api_refusal
from bot.slack import block_text, text
from bot.slack.batch_payloads import BATCH, CONFIRM, SHOWN
from bot.slack.handlers import said
from bot.slack.payloads import action_id, callback_id
from bot.tokens import Scope, Tokens
from crew_runtime import policy
from crew_runtime.config import Config
from crew_runtime.policy import Facts
from crew_runtime.service import review_digest
from sandbox import StandInThread
from storage import DecisionKind, Review, ReviewStatus, Store
from tests.support.api_harness import ApiClient
from tests.support.batch import (
    answered,
    choose,
    forged_confirmation,
    from_home,
    from_pending,
    modal,
)
from tests.support.harness import ON_SQLITE
from tests.support.slack_harness import (
    ALICE,
    BOB,
    CHANNEL,
    MALLORY,
    answer_to,
    configured,
    modal_for,
    slack_and_bot,
    text_of,
    wait_until,
)
from tests.support.timing import at_once

pytestmark = pytest.mark.slow

LEGAL = "S0LEGAL"
LEA = "ULEA"  # a second member of legal, for the race
CONFIG = f"""
[crews.chain]
factory = "tests.support.crews:writer"
inputs = ["topic"]
stages = [
  {{ name = "legal",   reviewers = ["{LEGAL}"] }},
  {{ name = "manager", reviewers = ["{BOB}"] }},
]

[crews.named]
factory = "tests.support.crews:writer"
inputs = ["topic"]
reviewers = ["{BOB}", "{ALICE}"]
approvals_required = 2
forbid_self_approval = true

[crews.open]
factory = "tests.support.crews:writer"
inputs = ["topic"]

[crews.bigpay]
factory = "tests.support.crews:payments"
reviewers = ["{BOB}"]

[crews.bigpay.gates.pay]
rules = [{{ name = "big", when = "args.amount >= 10000", reviewers = ["{ALICE}"] }}]

[crews.bigchain]
factory = "tests.support.crews:payments"
reviewers = ["{BOB}"]

[crews.bigchain.gates.pay]
rules = [{{ name = "big", when = "args.amount >= 10000", stages = [\
{{ name = "finance", reviewers = ["{LEGAL}"] }}, {{ name = "cfo", reviewers = ["{MALLORY}"] }}] }}]
""".replace("\\\n", "")
PEOPLE = (ALICE, BOB, MALLORY)
FACTS = Facts(
    groups={LEGAL: frozenset({ALICE, LEA})},
    channels={CHANNEL: frozenset({ALICE, BOB, MALLORY, LEA})},
)
# "home" and "pending": batch review (Decide several…) from the Home tab and from /crew
# pending; "batch-api": POST /decisions. A batch lists only what the policy lets the person
# decide (the listing's test is the last one here), so a refused person's item is a forged
# confirmation: the door that records is the confirmation's click, whatever listed it.
# "home-all" and "pending-all": their Approve all N shown (the person's others too, if any).
DOORS = ("click", "reply", "api", "cli", "home", "pending", "home-all", "pending-all", "batch-api")
BATCH_DOORS = ("home", "pending", "home-all", "pending-all")

Json = dict[str, Any]


@dataclass
class Bench:
    config: Config
    store: Store
    slack: StandInThread
    api: ApiClient
    argv: list[str]

    def start(
        self, crew: str, by: str, channel: str | None = CHANNEL, inputs: Json | None = None
    ) -> str:
        body: Json = {"crew": crew, "inputs": inputs or {"topic": "otters"}, "by": by}
        if channel is not None:
            body["channel"] = channel
        started = self.api.post("/runs", body)
        assert started.status == 201, started.body
        return str(started.body["id"])

    def pending(self, run_id: str, after: set[str] | None = None) -> Review:
        """The run's pending review once its message is posted (not one of ``after``)."""

        def find() -> Review | None:
            found = self.store.list_reviews(run_id=run_id)
            fresh = [r for r in found if r.id not in (after or set()) and r.message_ts]
            return fresh[0] if fresh else None

        return wait_until(find, what=f"a pending review of {run_id}")

    def cli(self, *args: str) -> tuple[int, str]:
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            code = cli_main([*args, *self.argv], {})
        return code, out.getvalue() + err.getvalue()


@pytest.fixture
def bench(tmp_path: Path, db_url: str) -> Iterator[Bench]:
    with configured(tmp_path, db_url, CONFIG) as (config, store):
        secret = Tokens(store).create("t", list(Scope), by="test")[1]
        with slack_and_bot(config, store) as (slack, bot):
            slack.add_user(LEA, "lea")
            slack.add_usergroup(LEGAL, [ALICE, LEA])
            api = ApiClient(f"http://127.0.0.1:{bot.port}", secret)
            argv = ["--config", str(config.path), "--database-url", db_url]
            yield Bench(config, store, slack, api, argv)


def _state(review: Review) -> tuple[Any, ...]:
    return (review.status, review.stage, len(review.approvals), review.decision is not None)


def _expected(bench: Bench, review: Review, person: str, door: str) -> policy.Refusal | None:
    run = bench.store.get_run(review.run_id)
    spec = bench.config.crews[run.crew]
    facts = Facts(vouched=True, away=bench.store.delegates()) if door == "cli" else FACTS
    return policy.decide(spec, run, review, person, DecisionKind.APPROVE, facts)


def _send(bench: Bench, review: Review, person: str, door: str) -> Callable[[], Any]:
    """Send ``person``'s approval of ``review`` through ``door``; returns what to wait on
    for its answer (the words they were told, the API's or the CLI's answer)."""
    slack, run = bench.slack, bench.store.get_run(review.run_id)
    before = len(slack.ephemerals(person))
    if door in ("click", "reply"):
        if door == "click":
            assert review.message_ts is not None
            slack.click_button(person, CHANNEL, review.message_ts, "countersign:approve")
        else:
            assert run.thread_ts is not None
            slack.reply_in_thread(person, CHANNEL, run.thread_ts, "approve")
        return lambda: [e.text for e in slack.ephemerals(person)[before:]]
    if door == "api":
        answer = bench.api.post(f"/reviews/{review.id}/decision", {"kind": "approve", "by": person})
        return lambda: answer
    if door == "batch-api":
        item = {"review_id": review.id, "kind": "approve"}
        answer = bench.api.post("/decisions", {"by": person, "decisions": [item]})
        return lambda: answer.body["results"][0]
    if door in BATCH_DOORS:
        if _expected(bench, review, person, door) is None:
            if door == "home":
                from_home(slack, person)
            elif door == "home-all":
                from_home(slack, person, SHOWN[DecisionKind.APPROVE], showing=review.id)
            else:
                from_pending(
                    slack, person, BATCH if door == "pending" else SHOWN[DecisionKind.APPROVE]
                )
            if door in ("home", "pending"):
                _, confirm = choose(slack, person, only=review.id)
            else:
                confirm = modal(slack, person, callback_id(CONFIRM))
            slack.click_in_view(person, confirm["id"], action_id(CONFIRM))
            return lambda: answered(slack, person, confirm["id"])
        forged_confirmation(slack, person, "VFORGED", [f"{review.id} {review_digest(review)}"])
        return lambda: [e.text for e in slack.ephemerals(person)[before:]]
    code, said_ = bench.cli("reviews", "decide", review.id, "approve", "--by", person)
    return lambda: (code, said_)


def _check(bench: Bench, review: Review, person: str, door: str) -> bool:
    """Send one case; assert the door answered as the policy says. True if it changed the
    review (and the policy allowed it)."""
    expected = _expected(bench, review, person, door)
    run = bench.store.get_run(review.run_id)
    answer = _send(bench, review, person, door)
    if expected is None:
        after = wait_until(
            lambda: (r := bench.store.get_review(review.id)) and _state(r) != _state(review) and r,
            what=f"{person}'s approval through the {door} to count",
        )
        assert after is not None
        if door == "api":
            assert answer().status == 200, answer().body
        if door == "batch-api":
            assert answer()["status"] == 200, answer()
        if door in ("home", "pending"):
            assert block_text.batch_done(DecisionKind.APPROVE, 1, 0, 0).split(".")[0] in answer()
        if door in ("home-all", "pending-all"):  # with the person's others, if any
            assert "*Approved " in answer() and "*Approved 0 " not in answer()
        if door == "cli":
            assert answer()[0] == 0, answer()[1]
        return True
    if door in ("click", "reply", *BATCH_DOORS):
        words = said(expected, review, run)
        told = wait_until(answer, what=f"{person} told why, after a {door}")
        if door in ("click", "reply"):
            assert told[-1] == words, (door, person, expected.reason)
        else:  # the batch's answer lists it, skipped, with the same words
            assert words in told[-1], (door, person, expected.reason, told[-1])
    elif door == "api":
        mapped = api_refusal(policy.error(expected, review, run))
        got = answer()
        assert (got.status, got.error["code"]) == (mapped.status, mapped.code), got.body
    elif door == "batch-api":
        mapped = api_refusal(policy.error(expected, review, run))
        item = answer()
        assert (item["status"], item["error"]["code"]) == (mapped.status, mapped.code), item
    else:
        code, printed = answer()
        assert code == 2 and printed.startswith("error: "), printed
        assert str(policy.error(expected, review, run)) in printed
    assert _state(bench.store.get_review(review.id)) == _state(review), (door, person)
    return False


def _round(bench: Bench, run_id: str, rng: random.Random, seen: set[str]) -> int:
    """Every person through every door on the run's pending review, refusals first and
    then the allowed ones in a random order, until one changes the review; how many cases
    were sent."""
    review = bench.pending(run_id, seen)
    cases = [(p, d) for p in PEOPLE for d in DOORS]
    rng.shuffle(cases)
    cases.sort(key=lambda c: _expected(bench, review, *c) is None)  # refusals first
    sent = 0
    for person, door in cases:
        sent += 1
        if _check(bench, review, person, door):
            break
    if bench.store.get_review(review.id).status != ReviewStatus.PENDING:
        seen.add(review.id)
    return sent


@ON_SQLITE
def test_every_door_gives_the_policys_answer_and_only_allowed_ones_change_anything(
    bench: Bench,
) -> None:
    rng = random.Random(20)
    sent = 0
    for crew, starter, rounds in (
        ("chain", MALLORY, 4),  # legal, manager; then the article: legal, manager
        ("named", BOB, 4),  # two approvals each, Bob may not approve his own run
        ("open", ALICE, 2),
        ("chain", ALICE, 2),  # the starter is in legal
        ("named", ALICE, 2),
    ):
        run_id = bench.start(crew, starter)
        seen: set[str] = set()
        for _ in range(rounds):
            if bench.store.get_run(run_id).status.value in ("succeeded", "rejected"):
                break
            sent += _round(bench, run_id, rng, seen)
    assert sent >= 100


def test_a_review_a_rule_raised_is_the_rules_people_to_decide_through_every_door(
    bench: Bench,
) -> None:
    """A rule's reviewers (or stages) replace the crew's for the review it raised: whom the
    rule names may decide, through every door; whom only the crew names may not; the review
    waits for the rule's people (the chain's card says so). On SQLite and PostgreSQL."""
    rng = random.Random(25)
    big = {"amount": "25000"}
    run_id = bench.start("bigpay", MALLORY, inputs=big)
    review = bench.pending(run_id)
    run, spec = bench.store.get_run(run_id), bench.config.crews["bigpay"]
    assert review.raised is not None and review.raised.reviewers == (ALICE,)
    assert policy.decide(spec, run, review, ALICE, DecisionKind.APPROVE, FACTS) is None
    refused = policy.decide(spec, run, review, BOB, DecisionKind.APPROVE, FACTS)
    assert refused is not None and refused.reason is policy.Reason.NOT_A_REVIEWER
    # Reminders and DMs go to whom the review waits for: the rule's reviewer.
    assert policy.waiting_for(spec, run, review, {}) == (ALICE,)
    sent = _round(bench, run_id, rng, set())
    assert bench.store.get_review(review.id).status == ReviewStatus.DECIDED
    # A rule's approval chain: legal's group, then Mallory; Bob (the crew's) never.
    chain_run = bench.start("bigchain", BOB, inputs=big)
    seen: set[str] = set()
    first = bench.pending(chain_run)
    card = text_of(bench.slack.standin.workspace.message(CHANNEL, first.message_ts))
    assert f"<!subteam^{LEGAL}>" in card and f"<@{BOB}>" not in card, card
    for _ in range(2):
        sent += _round(bench, chain_run, rng, seen)
    decided = bench.store.get_review(first.id)
    assert decided.status == ReviewStatus.DECIDED
    assert [a.stage for a in decided.approvals] == ["finance", "cfo"]
    assert BOB not in {a.decided_by for a in decided.approvals}
    wait_until(
        lambda: bench.store.get_run(chain_run).status.value == "succeeded",
        what="the chained payment to run",
    )
    assert sent >= 2 * len(DOORS)


@ON_SQLITE
def test_an_outsider_cannot_decide_a_group_stage_through_the_api(bench: Bench) -> None:
    """Item 1: a chain-only crew's legal stage is legal's, through the API too."""
    run_id = bench.start("chain", ALICE)
    review = bench.pending(run_id)
    refused = bench.api.post(f"/reviews/{review.id}/decision", {"kind": "approve", "by": MALLORY})
    assert refused.status == 403 and refused.error["code"] == "not_your_stage"
    assert _state(bench.store.get_review(review.id)) == _state(review)
    passed = bench.api.post(f"/reviews/{review.id}/decision", {"kind": "approve", "by": ALICE})
    assert passed.status == 200 and bench.store.get_review(review.id).stage == 1


@ON_SQLITE
def test_a_chain_only_crew_is_not_open_to_its_channel_for_cancel_and_revise(
    bench: Bench,
) -> None:
    """Item 2: an outsider in no stage may neither cancel the run nor reopen a task."""
    run_id = bench.start("chain", ALICE)
    review = bench.pending(run_id)
    for person in (ALICE, BOB):  # legal then manager approve the outline
        review = bench.store.get_review(review.id)
        assert (
            bench.api.post(
                f"/reviews/{review.id}/decision", {"kind": "approve", "by": person}
            ).status
            == 200
        )
    article = bench.pending(run_id, {review.id})
    assert answer_to(bench.slack, MALLORY, f"cancel {run_id}") == text.NOT_A_REVIEWER
    run = bench.store.get_run(run_id)
    assert run.status.value == "waiting"
    # Revise: the status message offers MALLORY no button; the modal refuses her anyway.
    status = answer_to(bench.slack, MALLORY, f"status {run_id}")
    assert "Revise" not in status
    assert article.message_ts is not None
    bench.slack.click_button(MALLORY, CHANNEL, article.message_ts, "countersign:revise")
    wait_until(
        lambda: text.NOT_A_REVIEWER in str(bench.slack.open_views(MALLORY)),
        what="the Revise modal to refuse her",
    )
    assert bench.store.get_review(article.id).status == ReviewStatus.PENDING
    # The starter may cancel.
    assert "cancelled" in answer_to(bench.slack, ALICE, f"cancel {run_id}").lower()


@ON_SQLITE
def test_a_run_nobody_could_decide_is_refused_where_it_is_started(bench: Bench) -> None:
    """Item 3: no reviewers and no channel through the API. (A run started in the app's DM
    is decided there by who started it: tests/slack/test_slack_scopes.py; where the crew forbids
    self-approval it is refused: tests/runtime/test_policy.py.)"""
    refused = bench.api.post("/runs", {"crew": "open", "inputs": {"topic": "otters"}})
    assert refused.status == 422 and refused.error["code"] == "nobody_decides"
    assert "[crews.open]" in refused.error["message"]
    assert bench.store.list_runs() == []
    # A crew naming its reviewers needs no channel.
    assert bench.api.post("/runs", {"crew": "named", "inputs": {"topic": "x"}}).status == 201


@ON_SQLITE
def test_reassign_refuses_a_bot_oneself_and_someone_who_may_not_decide(bench: Bench) -> None:
    """Issue 24's second wall: the Reassign form refuses the bot, its user, and whoever
    the policy would not let decide the review now."""
    run_id = bench.start("named", ALICE)
    review = bench.pending(run_id)
    assert review.message_ts is not None
    bot_user = "UBOT"  # the stand-in's bot user
    for to, words in (
        (bot_user, text.reassign_refused(policy.Reason.BOT)),
        (BOB, text.reassign_refused(policy.Reason.SAME_PERSON)),
        (MALLORY, text.REASSIGN_NOT_A_REVIEWER),
        (ALICE, text.reassign_refused(policy.Reason.OWN_RUN)),
    ):
        bench.slack.click_button(BOB, CHANNEL, review.message_ts, "countersign:reassign")
        view = modal_for(bench.slack, BOB, "to")
        answer = bench.slack.submit_view(BOB, view["id"], {"to": to})
        assert answer.json["errors"]["to"] == words, to
    assert bench.store.get_review(review.id).claimed_by is None


def test_a_stage_race_through_the_api_answers_409_as_the_document_says(
    tmp_path: Path, db_url: str
) -> None:
    """Item 4: two legal members approving at once; one passes the stage, the other is
    answered 409 stage_moved (or, read after the move, 403 not_your_stage): never 400."""
    with configured(tmp_path, db_url, CONFIG) as (config, store):
        secret = Tokens(store).create("t", list(Scope), by="test")[1]
        with slack_and_bot(config, store) as (slack, bot):
            slack.add_user(LEA, "lea")
            slack.add_usergroup(LEGAL, [ALICE, LEA])
            api = ApiClient(f"http://127.0.0.1:{bot.port}", secret)
            bench = Bench(config, store, slack, api, [])
            for _ in range(3):
                review = bench.pending(bench.start("chain", BOB))
                answers: dict[int, Any] = {}

                def act(n: int, review: Review = review, answers: dict[int, Any] = answers) -> None:
                    by = (ALICE, LEA)[n]
                    answers[n] = api.post(
                        f"/reviews/{review.id}/decision", {"kind": "approve", "by": by}
                    )

                at_once(act, 2)
                codes = sorted(
                    (a.status, a.body.get("error", {}).get("code")) for a in answers.values()
                )
                assert codes[0] == (200, None), codes
                assert codes[1] in ((403, "not_your_stage"), (409, "stage_moved")), codes
                assert store.get_review(review.id).stage == 1


@ON_SQLITE
def test_pending_and_home_list_exactly_whom_the_policy_asks_now(bench: Bench) -> None:
    """/crew pending and the Home tab list, for each person, the reviews the review policy
    says they are asked now for: per chain stage, with a delegation, with a quorum."""
    from datetime import datetime

    from bot.slack import home_text
    from tests.support.slack_harness import home_says

    bench.store.away(BOB, LEA, datetime(2099, 1, 1), by=BOB)  # Lea holds Bob's reviews
    chain_at_legal = bench.pending(bench.start("chain", MALLORY))
    chain_run = bench.start("chain", MALLORY)
    moved = bench.pending(chain_run)
    assert (
        bench.api.post(f"/reviews/{moved.id}/decision", {"kind": "approve", "by": ALICE}).status
        == 200
    )  # at the manager stage now
    quorum = bench.pending(bench.start("named", MALLORY))
    assert (
        bench.api.post(f"/reviews/{quorum.id}/decision", {"kind": "approve", "by": ALICE}).status
        == 200
    )  # 1 of 2: Bob's (so Lea's) approval still wanted
    reviews = [bench.store.get_review(r.id) for r in (chain_at_legal, moved, quorum)]
    facts = replace_away(FACTS, bench.store.delegates())
    counts = {}
    for person in (ALICE, BOB, MALLORY, LEA):
        asked = [
            r
            for r in reviews
            if policy.decide(
                bench.config.crews[bench.store.get_run(r.run_id).crew],
                bench.store.get_run(r.run_id),
                r,
                person,
                None,
                facts,
            )
            is None
        ]
        counts[person] = len(asked)
        said_ = answer_to(bench.slack, person, "pending")
        if asked:
            assert said_.startswith(f"{len(asked)} review"), (person, said_)
        else:
            assert said_.startswith("Nothing is waiting"), (person, said_)
        bench.slack.open_home(person)
        if asked:
            home_says(bench.slack, person, home_text.home_pending_count(len(asked)))
        else:
            home_says(bench.slack, person, home_text.HOME_NOTHING_PENDING)
    # What the policy says, spelled out: legal's review for Alice and Lea (both in legal),
    # the manager stage's for Bob and Lea (standing in for him), the quorum's for Alice
    # (asked still; her approval counts once), Bob and Lea; nothing for Mallory.
    assert counts == {ALICE: 2, BOB: 2, MALLORY: 0, LEA: 3}


def replace_away(facts: Facts, away: dict[str, str]) -> Facts:
    from dataclasses import replace

    return replace(facts, away=away)
