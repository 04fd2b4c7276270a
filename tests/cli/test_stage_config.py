"""Approval chains in the configuration: where ``stages`` applies, and every mistake named by its
key."""

from __future__ import annotations

from pathlib import Path

import pytest

from crew_runtime.config import ConfigError, CrewSpec, load_config
from storage import StageSpec
from tests.support import docs

LEGAL = '{ name = "legal", reviewers = ["S0LEGAL"] }'
MANAGER = '{ name = "manager", reviewers = ["U0MAX", "U0MIA"] }'


def _load(tmp_path: Path, text: str) -> CrewSpec:
    path = tmp_path / "countersign.toml"
    path.write_text(text)
    return load_config(path).get("deal")


def test_a_gate_or_a_task_has_its_own_chain_else_the_crews(tmp_path: Path) -> None:
    spec = _load(
        tmp_path,
        f"""
[crews.deal]
factory = "a:b"
stages = [{LEGAL}, {MANAGER}]

[crews.deal.gates.send_contract]
stages = [{{ name = "cfo", reviewers = ["U0CFO"] }}]

[crews.deal.gates.send_email]      # a quorum of its own: no chain
approvals_required = 2

[crews.deal.tasks.2]               # deadlines only: the crew's chain
remind_after = "1h"
""",
    )
    legal = StageSpec("legal", ("S0LEGAL",), 1)
    manager = StageSpec("manager", ("U0MAX", "U0MIA"), 1)
    assert spec.stages_for(task=1) == (legal, manager) == spec.stages_for(task=2)
    assert spec.stages_for(tool="send_contract") == (StageSpec("cfo", ("U0CFO",), 1),)
    assert spec.stages_for(tool="send_email") == ()
    assert spec.stages_for(tool="other") == (legal, manager)
    plain = _load(tmp_path, '[crews.deal]\nfactory = "a:b"\n')
    assert plain.stages_for(tool="x", task=1) == ()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "stages = []",
            'crews.deal.stages: empty; list the stages in order, like [{ name = "legal", '
            'reviewers = ["S0LEGAL"] }]',
        ),
        (
            'stages = "legal"',
            'crews.deal.stages: expected a list of tables like [{ name = "legal", reviewers = '
            '["S0LEGAL"] }], got "legal"',
        ),
        (
            'stages = ["legal"]',
            'crews.deal.stages[0]: expected a table like { name = "legal", reviewers = '
            '["S0LEGAL"] }, got "legal"',
        ),
        (
            'stages = [{ name = "legal", reviewers = ["S0L"], approval_required = 2 }]',
            "crews.deal.stages[0].approval_required: unknown key (did you mean "
            '"approvals_required"?); known keys: name, reviewers, approvals_required',
        ),
        (
            f'stages = [{LEGAL}, {{ reviewers = ["U0MAX"] }}]',
            'crews.deal.stages[1].name: missing; each stage needs a name, e.g. name = "legal"',
        ),
        (
            'stages = [{ name = "legal" }]',
            "crews.deal.stages[0].reviewers: missing or empty; each stage names who approves at it",
        ),
        (
            'stages = [{ name = "legal", reviewers = ["legal team"] }]',
            'crews.deal.stages[0].reviewers[0]: expected a Slack user id ("U…", "W…") or '
            'user-group id ("S…"), got "legal team"',
        ),
        (
            f"stages = [{LEGAL}, {LEGAL}]",
            'crews.deal.stages[1].name: "legal" names an earlier stage already',
        ),
        (
            f'stages = [{MANAGER}, {{ name = "board", reviewers = ["U0MIA", "U0BOB"] }}]',
            'crews.deal.stages[1].reviewers: "U0MIA" is in the "manager" stage already: a '
            "person approves at one stage of a chain",
        ),
        (
            'stages = [{ name = "manager", reviewers = ["U0MAX"], approvals_required = 2 }]',
            "crews.deal.stages[0].approvals_required: 2 approvals can never be given: the "
            "stage lists 1 person",
        ),
        (
            f"approvals_required = 2\nstages = [{LEGAL}]",
            "crews.deal.stages: cannot be combined with approvals_required in the same table: "
            "each stage sets its own approvals_required",
        ),
        (
            f"[crews.deal.gates.pay]\napprovals_required = 2\nstages = [{LEGAL}]",
            "crews.deal.gates.pay.stages: cannot be combined with approvals_required in the "
            "same table: each stage sets its own approvals_required",
        ),
        (
            f'inputs = ["approver"]\nreviewers_from_input = "approver"\n'
            f"[crews.deal.tasks.1]\nstages = [{LEGAL}]",
            "crews.deal.reviewers_from_input: names one reviewer, so it cannot be combined "
            "with stages (each stage names its own reviewers)",
        ),
        (
            f"[crews.deal.gates.pay]\nallow_standing = true\nstages = [{LEGAL}]",
            "crews.deal.gates.pay.allow_standing: a call of pay goes through an approval "
            "chain (stages), so one reviewer cannot approve its later calls: allow_standing "
            "needs approvals_required = 1",
        ),
        (
            f"stages = [{LEGAL}]\n[crews.deal.gates.pay]\nallow_standing = true",
            "crews.deal.gates.pay.allow_standing: a call of pay goes through an approval "
            "chain (stages), so one reviewer cannot approve its later calls: allow_standing "
            "needs approvals_required = 1",
        ),
    ],
)
def test_a_chain_is_validated_with_the_key_named(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "countersign.toml"
    path.write_text(f'[crews.deal]\nfactory = "a:b"\n{text}\n')
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value) == f"{path}: {expected}"


def test_a_gate_with_a_quorum_of_one_beside_a_crews_chain_may_allow_standing(
    tmp_path: Path,
) -> None:
    spec = _load(
        tmp_path,
        f'[crews.deal]\nfactory = "a:b"\nstages = [{LEGAL}]\n'
        "[crews.deal.gates.pay]\napprovals_required = 1\nallow_standing = true\n",
    )
    assert spec.standing_match("pay") == () and spec.stages_for(tool="pay") == ()


def test_the_readme_example_of_a_chain_is_valid_and_means_what_it_says(tmp_path: Path) -> None:
    (example,) = docs.blocks(docs.section("docs/guide/approvals.md", "Approval chains"), "toml")
    spec = _load(tmp_path, example)
    legal, manager = spec.stages_for(tool="send_contract")
    assert (legal.name, legal.reviewers, legal.approvals_required) == ("legal", ("S0LEGAL",), 1)
    assert (manager.name, manager.approvals_required) == ("manager", 1)
    assert spec.stages_for(task=1) == () and spec.approvals_for(task=1) == 1
