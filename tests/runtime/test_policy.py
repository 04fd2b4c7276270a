"""The review policy (crew_runtime.policy), pure: a table of cases, and a property test over
random crews, people and states (no outsider decides, no stage is skipped, nobody counts
twice, nobody approves their own run where that is refused, a failed lookup is never an
answer)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crew_runtime import policy
from crew_runtime.policy import Asked, Facts, Reason
from crew_runtime.specs import CrewSpec
from storage import Approval, DecisionKind, ReviewKind, RunStatus, StageSpec
from tests.support.records import NOW, make_review, make_run

CHANNEL = "C0WRITING"
STARTER, ANA, BEN, LEA, MAX, OUT, DEL, BOT = (
    "USTART",
    "UANA",
    "UBEN",
    "ULEA",
    "UMAX",
    "UOUT",
    "UDEL",
    "UBOT",
)
LEGAL = "S0LEGAL"
GROUPS = {LEGAL: frozenset({LEA})}
CHANNELS = {CHANNEL: frozenset({ANA, BEN, LEA, MAX, OUT, STARTER, DEL})}
FACTS = Facts(groups=GROUPS, channels=CHANNELS, bots=frozenset({BOT}))
# The app's DM with who started the run (the bot lists it with im:read).
FACTS_DM = Facts(groups=GROUPS, channels={**CHANNELS, "D0DM": frozenset({STARTER})})

OPEN = CrewSpec(name="w", factory="x:y")
SELF_FORBIDDEN = CrewSpec(name="w", factory="x:y", forbid_self_approval=True)
NAMED = CrewSpec(name="w", factory="x:y", reviewers=(ANA, BEN), forbid_self_approval=True)
CHAIN = CrewSpec(
    name="w",
    factory="x:y",
    stages=(StageSpec("legal", (LEGAL,)), StageSpec("manager", (MAX,))),
)
FROM_INPUT = CrewSpec(
    name="w", factory="x:y", reviewers_from_input="approver", required_inputs=("approver",)
)


def run(**fields: Any) -> Any:
    base = {"crew": "w", "started_by": STARTER, "channel": CHANNEL, "status": RunStatus.WAITING}
    return make_run(**(base | fields))


def review(**fields: Any) -> Any:
    return make_review(stream="task0:Writer", **fields)


def approval(by: str, stage: str | None = None) -> Approval:
    return Approval("rev_0a1b2c3d4e5f", by, {}, NOW, stage=stage)


DECIDE_CASES = [
    # crew, run fields, review fields, person, kind, facts, reason (None: allowed)
    (OPEN, {}, {}, OUT, DecisionKind.APPROVE, FACTS, None),
    (OPEN, {}, {}, "UNOBODY", DecisionKind.APPROVE, FACTS, Reason.NOT_A_REVIEWER),
    (OPEN, {"channel": None}, {}, ANA, DecisionKind.APPROVE, FACTS, Reason.NOT_A_REVIEWER),
    (OPEN, {"channel": "D0DM"}, {}, ANA, DecisionKind.APPROVE, FACTS_DM, Reason.NOT_A_REVIEWER),
    (OPEN, {"channel": "D0DM"}, {}, STARTER, DecisionKind.APPROVE, FACTS_DM, None),
    (OPEN, {"channel": "D0DM"}, {}, STARTER, DecisionKind.APPROVE, FACTS, Reason.COULD_NOT_CHECK),
    (OPEN, {}, {}, ANA, DecisionKind.APPROVE, Facts(), Reason.COULD_NOT_CHECK),
    (OPEN, {}, {}, ANA, DecisionKind.APPROVE, Facts(vouched=True), None),
    (NAMED, {}, {}, ANA, DecisionKind.APPROVE, FACTS, None),
    (NAMED, {}, {}, OUT, DecisionKind.REJECT, FACTS, Reason.NOT_A_REVIEWER),
    (NAMED, {"started_by": ANA}, {}, ANA, DecisionKind.APPROVE, FACTS, Reason.OWN_RUN),
    (NAMED, {"started_by": ANA}, {}, ANA, DecisionKind.REJECT, FACTS, None),
    (
        NAMED,
        {},
        {"approvals": (approval(ANA),)},
        ANA,
        DecisionKind.APPROVE,
        FACTS,
        Reason.ALREADY_COUNTED,
    ),
    (NAMED, {}, {}, DEL, DecisionKind.APPROVE, replace(FACTS, away={ANA: DEL}), None),
    (NAMED, {}, {}, DEL, DecisionKind.APPROVE, replace(FACTS, vouched=True), Reason.NOT_A_REVIEWER),
    # item 1: a chain's group stage is decided by the group, not the channel
    (CHAIN, {}, {}, OUT, DecisionKind.APPROVE, FACTS, Reason.NOT_YOUR_STAGE),
    (CHAIN, {}, {}, LEA, DecisionKind.APPROVE, FACTS, None),
    (CHAIN, {}, {}, MAX, DecisionKind.APPROVE, FACTS, Reason.NOT_YOUR_STAGE),
    (CHAIN, {}, {"stage": 1}, MAX, DecisionKind.APPROVE, FACTS, None),
    (CHAIN, {}, {"stage": 1}, LEA, DecisionKind.APPROVE, FACTS, Reason.NOT_YOUR_STAGE),
    (CHAIN, {}, {}, LEA, DecisionKind.APPROVE, Facts(channels=CHANNELS), Reason.COULD_NOT_CHECK),
    (
        CHAIN,
        {},
        {},
        LEA,
        DecisionKind.APPROVE,
        Facts(channels=CHANNELS, failed=frozenset({LEGAL})),
        Reason.COULD_NOT_CHECK,
    ),
    (FROM_INPUT, {"inputs": {"approver": BEN}}, {}, BEN, DecisionKind.APPROVE, FACTS, None),
    (
        FROM_INPUT,
        {"inputs": {"approver": BEN}},
        {},
        ANA,
        DecisionKind.APPROVE,
        FACTS,
        Reason.NOT_A_REVIEWER,
    ),
    (FROM_INPUT, {"inputs": {}}, {}, ANA, DecisionKind.APPROVE, FACTS, Reason.NOT_A_REVIEWER),
    (None, {}, {}, ANA, DecisionKind.APPROVE, FACTS, Reason.NOT_A_REVIEWER),
]


@pytest.mark.parametrize(
    ("spec", "run_", "review_", "person", "kind", "facts", "reason"), DECIDE_CASES
)
def test_who_may_decide(
    spec: CrewSpec | None,
    run_: dict[str, Any],
    review_: dict[str, Any],
    person: str,
    kind: DecisionKind,
    facts: Facts,
    reason: Reason | None,
) -> None:
    refused = policy.decide(spec, run(**run_), review(**review_), person, kind, facts)
    assert (refused and refused.reason) == reason


def test_not_your_stage_says_whose_turn_it_is_and_when_theirs_comes() -> None:
    refused = policy.decide(CHAIN, run(), review(), MAX, DecisionKind.APPROVE, FACTS)
    assert refused is not None
    assert (refused.stage, refused.number, refused.count, refused.reviewers, refused.later) == (
        "legal",
        1,
        2,
        (LEGAL,),
        "manager",
    )


RUN_CASES = [
    # item 2: a chain-only crew is not open to its channel
    (policy.may_cancel, CHAIN, OUT, Reason.NOT_A_REVIEWER),
    (policy.may_cancel, CHAIN, LEA, None),
    (policy.may_cancel, CHAIN, MAX, None),
    (policy.may_cancel, CHAIN, STARTER, None),
    (policy.may_revise, CHAIN, OUT, Reason.NOT_A_REVIEWER),
    (policy.may_revise, CHAIN, STARTER, Reason.NOT_A_REVIEWER),
    (policy.may_revise, CHAIN, MAX, None),
    (policy.may_revoke, NAMED, OUT, Reason.NOT_A_REVIEWER),
    (policy.may_revoke, NAMED, STARTER, None),
    (policy.may_cancel, OPEN, OUT, None),
    (policy.may_cancel, OPEN, "UNOBODY", Reason.NOT_A_REVIEWER),
    (policy.may_revise, NAMED, BEN, None),
]


@pytest.mark.parametrize(("action", "spec", "person", "reason"), RUN_CASES)
def test_who_may_act_on_a_run(
    action: Any, spec: CrewSpec, person: str, reason: Reason | None
) -> None:
    refused = action(spec, run(), person, FACTS)
    assert (refused and refused.reason) == reason


def test_who_may_see_a_run() -> None:
    assert policy.may_see(CHAIN, run(), OUT, CHANNEL, FACTS) is None  # in its channel
    assert policy.may_see(CHAIN, run(), OUT, "D0DM", FACTS) is not None
    assert policy.may_see(CHAIN, run(), STARTER, "D0DM", FACTS) is None
    assert policy.may_see(CHAIN, run(), LEA, "D0DM", FACTS) is None


REASSIGN_CASES = [
    (NAMED, {}, ANA, BEN, None),
    (NAMED, {}, ANA, BOT, Reason.BOT),
    (NAMED, {}, ANA, ANA, Reason.SAME_PERSON),
    (NAMED, {"claimed_by": BEN}, ANA, BEN, None),  # changes nothing
    (NAMED, {}, ANA, OUT, Reason.NOT_A_REVIEWER),
    (NAMED, {}, OUT, ANA, Reason.NOT_A_REVIEWER),
    (NAMED, {"approvals": (approval(BEN),)}, ANA, BEN, Reason.ALREADY_COUNTED),
    (CHAIN, {}, LEA, MAX, Reason.NOT_YOUR_STAGE),
    (OPEN, {}, ANA, BOT, Reason.BOT),
]


@pytest.mark.parametrize(("spec", "review_", "by", "to", "reason"), REASSIGN_CASES)
def test_who_may_reassign_to_whom(
    spec: CrewSpec, review_: dict[str, Any], by: str, to: str, reason: Reason | None
) -> None:
    refused = policy.reassign(spec, run(), review(**review_), by, to, FACTS)
    assert (refused and refused.reason) == reason


def test_reassigning_to_the_starter_of_a_self_approval_crew_is_refused() -> None:
    refused = policy.reassign(NAMED, run(started_by=BEN), review(), ANA, BEN, FACTS)
    assert refused is not None and refused.reason == Reason.OWN_RUN


START_CASES = [
    (OPEN, {}, CHANNEL, False),
    (OPEN, {}, None, True),  # item 3
    (OPEN, {}, "D0DM", False),  # /crew run in the app's DM: who started it decides there
    (SELF_FORBIDDEN, {}, "D0DM", True),  # ... unless the crew forbids self-approval
    (NAMED, {}, None, False),
    (CHAIN, {}, None, False),
    (FROM_INPUT, {"approver": BEN}, None, False),
]


@pytest.mark.parametrize(("spec", "inputs", "channel", "refused"), START_CASES)
def test_a_run_no_one_could_decide_is_refused_at_the_start(
    spec: CrewSpec, inputs: dict[str, str], channel: str | None, refused: bool
) -> None:
    found = policy.start_refusal(spec, inputs, channel)
    assert (found is not None) == refused
    if found is not None:
        assert "reviewers" in found.configure and "[crews.w]" in found.configure


def test_needs_names_the_groups_and_channels_to_look_up() -> None:
    asked = [Asked((ANA, LEGAL)), Asked(channel=CHANNEL), Asked(channel="D0DM")]
    assert policy.needs(asked) == ({LEGAL}, {CHANNEL, "D0DM"})


# The property test: random crews, people and states.

PEOPLE = [STARTER, ANA, BEN, LEA, MAX, OUT, DEL]
_refs = st.lists(st.sampled_from([ANA, BEN, LEGAL, MAX]), max_size=3, unique=True)


@st.composite
def crews(draw: st.DrawFn) -> CrewSpec:
    stage_count = draw(st.integers(0, 3))
    pool = [[LEGAL], [MAX], [BEN], [ANA]]
    stages = tuple(
        StageSpec(f"s{i}", tuple(pool[i]), draw(st.integers(1, 2))) for i in range(stage_count)
    )
    from_input = not stages and draw(st.booleans())
    return CrewSpec(
        name="w",
        factory="x:y",
        reviewers=() if from_input else tuple(draw(_refs)),
        reviewers_from_input="approver" if from_input else None,
        approvals_required=1 if stages or from_input else draw(st.integers(1, 3)),
        forbid_self_approval=draw(st.booleans()),
        stages=stages,
    )


@given(
    spec=crews(),
    person=st.sampled_from(PEOPLE),
    starter=st.sampled_from(PEOPLE),
    channel=st.sampled_from([CHANNEL, None, "D0DM"]),
    approver=st.sampled_from([ANA, BEN, MAX]),
    stage=st.integers(0, 2),
    approved=st.lists(st.sampled_from(PEOPLE), max_size=3, unique=True),
    away=st.sampled_from([{}, {ANA: DEL}, {LEA: DEL}, {MAX: DEL}]),
    failed=st.booleans(),
    kind=st.sampled_from(
        [DecisionKind.APPROVE, DecisionKind.REJECT, DecisionKind.CHANGES, DecisionKind.EDIT]
    ),
    claimed=st.sampled_from([None, ANA, OUT]),
)
@settings(max_examples=400, deadline=None)
def test_no_outsider_decides_no_stage_is_skipped_nobody_counts_twice(
    spec: CrewSpec,
    person: str,
    starter: str,
    channel: str | None,
    approver: str,
    stage: int,
    approved: list[str],
    away: dict[str, str],
    failed: bool,
    kind: DecisionKind,
    claimed: str | None,
) -> None:
    stage = min(stage, max(len(spec.stages) - 1, 0))
    the_run = run(started_by=starter, channel=channel, inputs={"approver": approver})
    the_review = review(
        stage=stage,
        approvals=tuple(approval(p) for p in approved),
        claimed_by=claimed,
        kind=ReviewKind.TASK_REVIEW,
    )
    facts = Facts(
        groups={} if failed else GROUPS,
        channels={} if failed else CHANNELS,
        failed=frozenset({LEGAL, CHANNEL}) if failed else frozenset(),
        away=away,
    )
    refused = policy.decide(spec, the_run, the_review, person, kind, facts)
    if refused is not None:
        return
    # Allowed: then the person, or someone away they stand in for, is asked now.
    acting = facts.acting(person)
    if spec.stages:
        asked = spec.stages[stage].reviewers
        members = {p for r in asked for p in ([r] if not r.startswith("S") else GROUPS[r])}
        assert members & set(acting), "decided at a stage they are not asked at"
    else:
        named = spec.reviewers_of(the_run.inputs)
        if named:
            members = {p for r in named for p in ([r] if not r.startswith("S") else GROUPS[r])}
            assert members & set(acting), "an outsider decided"
        else:
            assert channel == CHANNEL and person in CHANNELS[CHANNEL]
    if failed:  # allowed only where no failed lookup was needed: a person named
        named = spec.stages[stage].reviewers if spec.stages else spec.reviewers_of(the_run.inputs)
        assert set(acting) & set(named)
    if kind in policy.APPROVING:
        assert person not in approved, "counted twice"
        assert not (spec.forbid_self_approval and person == starter), "approved their own run"


@given(spec=crews(), person=st.sampled_from(PEOPLE), channel=st.sampled_from([CHANNEL, None]))
@settings(max_examples=200, deadline=None)
def test_whoever_may_decide_a_review_may_cancel_and_see_its_run(
    spec: CrewSpec, person: str, channel: str | None
) -> None:
    the_run = run(channel=channel, inputs={"approver": ANA})
    if policy.decide(spec, the_run, review(), person, DecisionKind.REJECT, FACTS) is None:
        assert policy.may_cancel(spec, the_run, person, FACTS) is None
        assert policy.may_see(spec, the_run, person, None, FACTS) is None


def test_reminders_mention_those_asked_now_their_delegates_or_whoever_has_it() -> None:
    """``policy.reminded``: a chain's current stage (per stage), a delegate in the place of
    the person away, a claimed review's holder, an escalation's ``escalate_to``."""
    gated = replace(CHAIN, stages=(StageSpec("legal", (LEA,)), StageSpec("manager", (MAX,))))
    at = {0: (LEA,), 1: (MAX,)}
    for stage, named in at.items():
        assert policy.reminded(gated, run(), review(stage=stage), {}, escalated=False) == named
    assert policy.reminded(gated, run(), review(stage=1), {MAX: DEL}, escalated=False) == (DEL,)
    assert policy.reminded(NAMED, run(), review(claimed_by=BEN), {}, escalated=False) == (BEN,)
    assert policy.reminded(NAMED, run(), review(), {ANA: DEL}, escalated=False) == (DEL, BEN)
    escalating = replace(NAMED, escalate_to=(MAX,))
    assert policy.reminded(escalating, run(), review(), {}, escalated=True) == (MAX,)
    assert policy.reminded(OPEN, run(), review(), {}, escalated=False) == ()  # the channel


def test_waiting_for_leaves_out_who_approved_and_the_starter_where_self_approval_is_forbidden() -> (
    None
):
    """The quorum's tally and DM reminders: ``policy.waiting_for``."""
    quorum = replace(NAMED, approvals_required=2)
    given = review(approvals=(approval(ANA),))
    assert policy.waiting_for(quorum, run(), given, {}) == (BEN,)
    assert policy.waiting_for(quorum, run(started_by=BEN), review(), {}) == (ANA,)
    assert policy.waiting_for(quorum, run(), review(), {BEN: DEL}) == (ANA, DEL)
