"""Rules that decide the easy gated calls (``crew_runtime.rules``): checked when the file
loads, applied by the worker (journaled, audited, counted, said in the thread), the same on a
replay whatever the rules say since, and tried with ``countersign rules test``."""

from __future__ import annotations

import io
import shlex
from contextlib import redirect_stderr, redirect_stdout
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from bot.cli.main import main
from bot.slack.blocks import rule_message
from crew_runtime import metrics
from crew_runtime.config import ConfigError, load_config
from crew_runtime.digests import call_digest
from crew_runtime.errors import NotAReviewer, NotYourStage
from crew_runtime.offline.drafts import parse_draft
from storage import DecisionKind, OutboxKind, Raised, RunStatus, StageSpec
from tests.support import docs
from tests.support.harness import Bench

# A TOML inline table is one line.
RULE_LIST = """rules = [
  { name = "huge", when = "args.amount >= 100000", decide = "reject", reason = "payments of \
100000 or more go through the treasury crew" },
  { name = "huge-chain", when = "args.amount >= 20000", stages = [\
{ name = "finance", reviewers = ["U0FIN1", "U0FIN2"] }, { name = "cfo", reviewers = ["U0CFO"] }] },
  { name = "big", when = "args.amount >= 5000", approvals = 2 },
  { name = "globex", when = "args.to == 'GLOBEX' && args.amount >= 2000", \
reviewers = ["U0GLOBEX"] },
  { name = "small-payments", when = "args.amount < 2000 && args.to == 'ACME'", \
decide = "approve" },
]""".replace("\\\n", "")
RULES = f"""
[crews.ruled]
factory = "tests.support.crews:payments"

[crews.ruled.gates.pay]
{RULE_LIST}
"""


def _config(tmp_path: Path, rules: str) -> Path:
    path = tmp_path / "countersign.toml"
    path.write_text(f'[crews.pay]\nfactory = "a:b"\napproval_tools = ["pay"]\n{rules}\n')
    return path


@pytest.mark.parametrize(
    ("rules", "expected"),
    [
        (
            'rules = [{ name = "r", tool = "pay", when = "args.amount <", decide = "approve" }]',
            "crews.pay.rules[0] (rule 'r').when: 'args.amount <' does not compile as CEL",
        ),
        (
            'rules = [{ name = "r", tool = "pay", when = "amount < 3", decide = "approve" }]',
            "crews.pay.rules[0] (rule 'r').when: names 'amount': an expression may use only "
            "args, inputs, tool, run",
        ),
        (
            'rules = [{ name = "all", tool = "pay", decide = "approve" },\n'
            '  { name = "later", tool = "pay", when = "args.amount > 1", approvals = 2 }]',
            "crews.pay.rules[1] (rule 'later'): can never apply: rule 'all' before it applies "
            "to every call of pay",
        ),
        (
            'rules = [{ name = "any", when = "true", decide = "approve" },\n'
            '  { name = "mail", tool = "send_email", decide = "reject", reason = "no" }]',
            "crews.pay.rules[1] (rule 'mail'): can never apply: rule 'any' before it applies "
            "to every call",
        ),
        (
            'rules = [{ name = "r", tool = "pay", decide = "reject" }]',
            "crews.pay.rules[0] (rule 'r').reason: a rule that rejects needs a reason",
        ),
        (
            'rules = [{ name = "r", tool = "pay", decide = "approve", approvals = 2 }]',
            "crews.pay.rules[0] (rule 'r').approvals: a rule that decides (approve) raises no",
        ),
        (
            'rules = [{ name = "r", tool = "pay", when = "true", decide = "maybe" }]',
            'crews.pay.rules[0] (rule \'r\').decide: expected "approve" or "reject"',
        ),
        (
            'rules = [{ name = "r", tool = "pay", whenever = "true", decide = "approve" }]',
            "crews.pay.rules[0].whenever: unknown key",
        ),
        (
            'rules = [{ name = "r", tool = "pay", when = "args.a < 1", decide = "approve" },\n'
            '  { name = "r", tool = "pay", when = "args.a > 9", decide = "approve" }]',
            "crews.pay.rules[1] (rule 'r'): another rule of the crew has this name",
        ),
        (
            '[crews.pay.gates.pay]\nrules = [{ name = "r", tool = "pay", decide = "approve" }]',
            "crews.pay.gates.pay.rules[0] (rule 'r').tool: a gate's rule is for the gate's tool",
        ),
        (
            'rules = [{ name = "r", tool = "pay", when = "args.a < 1" }]',
            "crews.pay.rules[0] (rule 'r'): set decide",
        ),
        # A rule's reviewers and stages: the checks (and the words) of a crew's and a gate's.
        (
            'rules = [{ name = "r", tool = "pay", reviewers = ["bob"] }]',
            "crews.pay.rules[0] (rule 'r').reviewers[0]: expected a Slack user id "
            '("U…", "W…") or user-group id ("S…"), got "bob"',
        ),
        (
            'rules = [{ name = "r", tool = "pay", reviewers = [] }]',
            "crews.pay.rules[0] (rule 'r').reviewers: empty; name who reviews",
        ),
        (
            'rules = [{ name = "r", tool = "pay", reviewers = ["U0A"], approvals = 2 }]',
            "crews.pay.rules[0] (rule 'r').approvals: 2 approvals can never be given: "
            "reviewers lists 1 people",
        ),
        (
            'rules = [{ name = "r", tool = "pay", stages = [{ name = "cfo" }] }]',
            "crews.pay.rules[0] (rule 'r').stages[0].reviewers: missing or empty; each stage "
            "names who approves at it",
        ),
        (
            'rules = [{ name = "r", tool = "pay", stages = [{ name = "a", reviewers = ["U0A"] }, '
            '{ name = "b", reviewers = ["U0A"] }] }]',
            'crews.pay.rules[0] (rule \'r\').stages[1].reviewers: "U0A" is in the "a" stage '
            "already",
        ),
        (
            'rules = [{ name = "r", tool = "pay", stages = [] }]',
            "crews.pay.rules[0] (rule 'r').stages: empty; list the stages in order",
        ),
        (
            'rules = [{ name = "r", tool = "pay", approvals = 2, stages = [{ name = "a", '
            'reviewers = ["U0A", "U0B"] }] }]',
            "crews.pay.rules[0] (rule 'r').stages: cannot be combined with approvals in the "
            "same rule: each stage sets its own approvals_required",
        ),
        (
            'rules = [{ name = "r", tool = "pay", reviewers = ["U0B"], stages = [{ name = "a", '
            'reviewers = ["U0A"] }] }]',
            "crews.pay.rules[0] (rule 'r').reviewers: cannot be combined with stages",
        ),
        (
            'rules = [{ name = "r", tool = "pay", decide = "approve", reviewers = ["U0A"] }]',
            "crews.pay.rules[0] (rule 'r').reviewers: a rule that decides (approve) raises no",
        ),
    ],
)
def test_a_bad_rule_is_an_error_line_naming_it(tmp_path: Path, rules: str, expected: str) -> None:
    path = _config(tmp_path, rules)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert expected in str(caught.value)
    err = io.StringIO()
    with redirect_stderr(err):
        assert main(["crews", "list", "--config", str(path)], {}) == 2
    (line,) = err.getvalue().splitlines()
    assert line.startswith("error: ") and expected in line


def test_rules_test_says_which_rule_matches_and_what_it_does(tmp_path: Path) -> None:
    path = _config(tmp_path, RULE_LIST)
    argv = ["rules", "test", "pay", "--config", str(path), "--tool", "pay", "--args"]

    def said(args: str) -> str:
        out = io.StringIO()
        with redirect_stdout(out):
            assert main([*argv, args], {}) == 0
        return out.getvalue()

    assert said('{"amount": 42, "to": "ACME"}') == (
        'rule small-payments (crews.pay.rules[4]) matches: amount 42 < 2000 && to "ACME" '
        "== 'ACME'\napprove: the call runs, nobody is asked\n"
    )
    assert said('{"amount": 250000}').splitlines() == [
        "rule huge (crews.pay.rules[0]) matches: amount 250000 >= 100000",
        "reject: the call does not run; the model is told 'payments of 100000 or more go "
        "through the treasury crew'",
    ]
    assert said('{"amount": 7000}').endswith("a person reviews it, with 2 approvals\n")
    assert said('{"amount": 25000}').splitlines()[1] == (
        "a person reviews it, with stages finance (U0FIN1, U0FIN2; 1 approval) then "
        "cfo (U0CFO; 1 approval) (in the gate's place)"
    )
    assert said('{"amount": 3000, "to": "GLOBEX"}').splitlines()[1] == (
        "a person reviews it, with reviewers U0GLOBEX (in the gate's place)"
    )
    assert said('{"amount": 2500, "to": "ACME"}') == (
        "no rule matches: a person reviews this pay call as its gate says\n"
    )
    assert said('{"to": "ACME"}').startswith("no rule matches")  # no amount: no rule applies
    err = io.StringIO()
    with redirect_stderr(err):
        assert main([*argv, "[1]"], {}) == 2
    assert err.getvalue().startswith("error: --args: expected a JSON object")


GUIDE = ("docs/guide/rules-and-digests.md", "Rules")


def test_the_guides_rules_load_and_its_tries_answer_as_it_shows(tmp_path: Path) -> None:
    """The guide's configuration loads, and each ``countersign rules test`` line it shows
    prints what the comment lines under it say (``…`` where the guide leaves a part out)."""
    body = docs.section(*GUIDE)
    (config,) = docs.blocks(body, "toml")
    path = tmp_path / "countersign.toml"
    path.write_text(config)
    load_config(path)
    (session,) = docs.blocks(body, "sh")
    tries: list[tuple[str, list[str]]] = []
    for line in session.splitlines():
        if line.startswith("# "):
            tries[-1][1].append(line[2:])
        else:
            tries.append((line, []))
    assert [c for c, _ in tries] == docs.section_commands(*GUIDE)
    for command, shown in tries:
        argv = shlex.split(command)
        assert argv[:3] == ["countersign", "rules", "test"], command
        out = io.StringIO()
        with redirect_stdout(out):
            assert main([*argv[1:], "--config", str(path)], {}) == 0, command
        assert out.getvalue().splitlines() == shown, command


def test_a_rule_approves_a_call_journaled_audited_counted_and_said(bench: Bench) -> None:
    bench.add_crews(RULES)
    counted = metrics.RULE_DECISIONS.labels("ruled", "small-payments", "approve")
    before = counted._value.get()
    run = bench.start("ruled", amount="1500")
    bench.work_here()
    done = bench.run(run.id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    assert [e["amount"] for e in bench.effects("paid")] == [1500]
    assert bench.store.list_reviews(run_id=run.id, status=None) == []  # nobody was asked
    (entry,) = [e for e in bench.store.load_journal(run.id) if e.kind == "rule"]
    digest = call_digest(run.id, entry.stream, entry.seq, "pay", {"amount": 1500, "to": "ACME"})
    assert entry.payload["digest"] == digest
    assert (entry.payload["rule"], entry.payload["decide"]) == ("small-payments", "approve")
    assert counted._value.get() == before + 1

    (said,) = [m for m in bench.store.due_outbox() if m.kind == OutboxKind.RULE_DECIDED]
    words = rule_message(said.payload).text
    assert words.startswith(
        'pay approved by rule `small-payments`: amount 1500 &lt; 2000 &amp;&amp; to "ACME"'
    )
    assert f"action `{digest[:12]}`" in words
    now = datetime.now()
    (record,) = bench.store.audit_records(since=now - timedelta(1), until=now + timedelta(1))
    assert (record.decision, record.decided_by, record.rule) == (
        "rule",
        "rule:small-payments",
        "small-payments",
    )
    assert record.digest == digest and record.approved_args == {"amount": 1500, "to": "ACME"}


def test_a_rule_rejects_a_call_with_the_reason_the_model_reads(bench: Bench) -> None:
    bench.add_crews(RULES)
    run = bench.start("ruled", amount="250000")
    bench.work_here()
    done = bench.run(run.id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    assert bench.effects("paid") == []
    (note,) = parse_draft(done.output or "").notes
    assert "pay was rejected by rule huge: payments of 100000 or more go through the" in note


def test_a_rule_raises_what_the_review_needs(bench: Bench) -> None:
    bench.add_crews(RULES)
    run = bench.start("ruled", amount="7000")
    bench.work_here()
    review = bench.pending(run.id)
    assert review.details.rule == "big"
    assert bench.service.approvals_required(review) == 2
    bench.service.decide(review.id, DecisionKind.APPROVE, None, by="U1")
    assert bench.pending(run.id).approvals  # one approval counted, still pending
    bench.service.decide(review.id, DecisionKind.APPROVE, None, by="U2")
    bench.work_here()
    assert [e["amount"] for e in bench.effects("paid")] == [7000]


@pytest.mark.slow
def test_a_replay_makes_the_rules_choice_even_after_the_rules_changed(bench: Bench) -> None:
    bench.add_crews(RULES)
    run = bench.start("ruled", amount="1500")
    doomed = bench.spawn(COUNTERSIGN_TEST_HOLD="pay 1500 ACME")
    bench.kill_when_holding(doomed, "pay 1500 ACME")  # approved by the rule, about to pay
    # The rules change meanwhile: the call would now be rejected.
    bench.add_crews(RULES.replace('decide = "approve"', 'decide = "reject", reason = "no"'))
    bench.work()
    done = bench.run(run.id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    assert [e["amount"] for e in bench.effects("paid")] == [1500]  # once, as first decided
    assert len([e for e in bench.store.load_journal(run.id) if e.kind == "rule"]) == 1


FINANCE = StageSpec("finance", ("U0FIN1", "U0FIN2"))
CFO = StageSpec("cfo", ("U0CFO",))


def test_a_rules_stages_are_kept_with_the_review_and_decide_it_whatever_the_file_says_since(
    bench: Bench,
) -> None:
    """A rule's ``stages`` replace the gate's reviewers (the crew names none: anyone in the
    channel), are stored with the review and answer for it after the rules changed."""
    bench.add_crews(RULES)
    run = bench.start("ruled", amount="25000")
    bench.work_here()
    review = bench.pending(run.id)
    assert review.details.rule == "huge-chain"
    assert review.raised == Raised(stages=(FINANCE, CFO))
    # The rule changes meanwhile: someone else would be asked now; this review is not.
    bench.add_crews(RULES.replace('reviewers = ["U0CFO"]', 'reviewers = ["U0NEW"]'))
    with pytest.raises(NotYourStage):
        bench.service.decide(review.id, DecisionKind.APPROVE, None, by="U0CFO")
    bench.service.decide(review.id, DecisionKind.APPROVE, None, by="U0FIN2")
    assert bench.store.get_review(review.id).stage == 1
    with pytest.raises(NotYourStage):
        bench.service.decide(review.id, DecisionKind.APPROVE, None, by="U0NEW")
    bench.service.decide(review.id, DecisionKind.APPROVE, None, by="U0CFO")
    bench.work_here()
    assert bench.run(run.id).status == RunStatus.SUCCEEDED
    assert [e["amount"] for e in bench.effects("paid")] == [25000]


def test_a_rules_reviewers_replace_the_crews(bench: Bench) -> None:
    bench.add_crews(
        """
[crews.named_pay]
factory = "tests.support.crews:payments"
reviewers = ["U0BOB"]

[crews.named_pay.gates.pay]
rules = [{ name = "big", when = "args.amount >= 10000", reviewers = ["U0ALI", "U0EVE"] }]
"""
    )
    run = bench.start("named_pay", amount="12000")
    bench.work_here()
    review = bench.pending(run.id)
    assert review.raised == Raised(reviewers=("U0ALI", "U0EVE"))
    assert bench.service.approvals_required(review) == 1
    with pytest.raises(NotAReviewer):  # the crew's reviewer is not asked for this one
        bench.service.decide(review.id, DecisionKind.APPROVE, None, by="U0BOB")
    bench.service.decide(review.id, DecisionKind.APPROVE, None, by="U0EVE")
    bench.work_here()
    assert [e["amount"] for e in bench.effects("paid")] == [12000]
    small = bench.start("named_pay", amount="1500")  # no rule: the crew's reviewers
    bench.work_here()
    review = bench.pending(small.id)
    assert review.raised is None
    with pytest.raises(NotAReviewer):
        bench.service.decide(review.id, DecisionKind.APPROVE, None, by="U0ALI")
    bench.service.decide(review.id, DecisionKind.APPROVE, None, by="U0BOB")


ACME_STAGES = (
    'stages = [{ name = "finance", reviewers = ["U0FIN1", "U0FIN2"] }, '
    '{ name = "cfo", reviewers = ["U0CFO"] }]'
)
SPLIT = """
[crews.split]
factory = "tests.support.crews:parallel_payments"

[crews.split.gates.pay]
rules = [
  { name = "globex", when = "args.to == 'GLOBEX'", decide = "approve" },
  { name = "acme", when = "args.to == 'ACME'", RAISED },
]
"""


@pytest.mark.slow
def test_a_replay_asks_whom_the_rule_named_even_after_the_rules_changed(bench: Bench) -> None:
    """One model turn: ACME's call is raised to the rule's stages (journaled), GLOBEX's is
    approved by a rule and the worker is killed paying it, before ACME's review is opened.
    The rules change; the replay asks ACME's review of the stages first raised."""
    bench.add_crews(SPLIT.replace("RAISED", ACME_STAGES))
    run = bench.start("split", sequential="yes")
    doomed = bench.spawn(COUNTERSIGN_TEST_HOLD="pay 2000 GLOBEX")
    bench.kill_when_holding(doomed, "pay 2000 GLOBEX")
    assert bench.store.list_reviews(run_id=run.id) == []
    (raised,) = [e for e in bench.store.load_journal(run.id) if e.kind == "raised"]
    assert raised.payload["rule"] == "acme"
    bench.add_crews(SPLIT.replace("RAISED", 'reviewers = ["U0NEW"]'))
    assert bench.config.crews["split"].rules.named("acme").reviewers == ("U0NEW",)
    bench.work()
    review = bench.pending(run.id)
    assert (review.details.rule, review.raised) == ("acme", Raised(stages=(FINANCE, CFO)))
    assert [e for e in bench.store.load_journal(run.id) if e.kind == "raised"] == [raised]


def test_no_standing_approval_covers_a_call_a_rule_gives_its_own_reviewers(bench: Bench) -> None:
    """ACME's first payment is approved for the run's later calls too; GLOBEX's, which a
    rule gives to the CFO, is still asked of the CFO."""
    bench.add_crews(
        """
[crews.standing_pay]
factory = "tests.support.crews:payroll"

[crews.standing_pay.gates.pay]
allow_standing = true
rules = [{ name = "globex", when = "args.to == 'GLOBEX'", reviewers = ["U0CFO"] }]
"""
    )
    run = bench.start("standing_pay")
    bench.work_here()
    first = bench.pending(run.id)
    bench.service.decide(first.id, DecisionKind.APPROVE, None, by="U0ANA", standing=True)
    bench.work_here()
    asked = [r for r in bench.store.list_reviews(run_id=run.id) if r.id != first.id]
    assert [(r.details.args, r.raised) for r in asked] == [
        ({"amount": 1200, "to": "GLOBEX"}, Raised(reviewers=("U0CFO",)))
    ]
    assert [(e["amount"], e["to"]) for e in bench.effects("paid")] == [
        (1500, "ACME"),
        (2000, "ACME"),
    ]


def test_a_changed_replay_of_a_raised_call_is_asked_again_as_the_rule_raised_it(
    bench: Bench,
) -> None:
    """The rule's people approved 7000; the replay now pays 7100 (a journal edited, code
    changed since the pause): not run, asked again of the rule's people, with its deadline."""
    bench.add_crews(
        """
[crews.named_pay]
factory = "tests.support.crews:payments"
reviewers = ["U0BOB"]

[crews.named_pay.gates.pay]
rules = [{ name = "big", when = "args.amount >= 5000", reviewers = ["U0ALI"], \
expire_after = "4h" }]
""".replace("\\\n", "")
    )
    run = bench.start("named_pay", amount="7000")
    bench.work_here()
    first = bench.pending(run.id)
    assert first.expires_at is not None
    bench.service.decide(first.id, DecisionKind.APPROVE, None, by="U0ALI")
    bench.rewrite_model_turns(run.id, "7000", "7100")
    asked = datetime.now()
    bench.work_here()
    assert bench.effects("paid") == []
    again = bench.pending(run.id)
    assert again.id != first.id and again.details.args["amount"] == 7100
    assert (again.details.rule, again.raised) == ("big", Raised(reviewers=("U0ALI",)))
    assert again.expires_at is not None  # the rule's deadline (the gate sets none)
    assert asked + timedelta(hours=3) < again.expires_at < asked + timedelta(hours=5)
    with pytest.raises(NotAReviewer):
        bench.service.decide(again.id, DecisionKind.APPROVE, None, by="U0BOB")
    bench.service.decide(again.id, DecisionKind.APPROVE, None, by="U0ALI")
    bench.work_here()
    assert [e["amount"] for e in bench.effects("paid")] == [7100]
