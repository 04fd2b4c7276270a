"""What the configuration says of a run's reviewers, the pieces the review policy
(``crew_runtime.policy``, which every door asks) is built from: how many must approve a
review, where its approval chain (a ``stages`` list) stands and who is asked at that stage,
who is still expected, and whom an away person's reviews go to. A review a rule raised
(``crew_runtime.rules``) keeps its own reviewers, chain and quorum (``Review.raised``): they
answer for it in the configuration's place. Storage counts the approvals and moves a chain's
stage (``storage.approvals``)."""

from __future__ import annotations

from collections.abc import Mapping

from crew_runtime.specs import NOBODY, Chain, CrewSpec, rule_of
from storage import ALLOWED_DECISIONS, DecisionKind, Review, Run, StageSpec, ToolApprovalDetails


def stages_of(spec: CrewSpec, review: Review) -> Chain:
    """The approval chain ``review`` follows: the one a rule raised for it (none where the
    rule named reviewers instead), else its gate's or its task's ``stages``, else the
    crew's; () for a review without one, and for one that cannot be approved (a question is
    answered by one person, as with a quorum)."""
    if DecisionKind.APPROVE not in ALLOWED_DECISIONS[review.kind]:
        return ()
    if review.raised is not None and review.raised.names_people:
        return review.raised.stages
    tool, task = rule_of(review.kind, review.stream, review.details)
    return spec.stages_for(tool=tool, task=task)


def chains_of(spec: CrewSpec) -> tuple[Chain, ...]:
    """Every approval chain of ``spec``: the crew's, its gates', its tasks' and its rules'
    (a rule's ``reviewers`` as a chain of one stage: who is asked differs from review to
    review)."""
    found = (
        spec.stages,
        *spec.gate_stages.values(),
        *spec.task_stages.values(),
        *(rule.stages or _one_stage(rule.reviewers) for rule in spec.rules.rules),
    )
    return tuple(chain for chain in found if chain)


def _one_stage(reviewers: tuple[str, ...]) -> Chain:
    return (StageSpec("reviewers", reviewers),) if reviewers else ()


def stage_people(spec: CrewSpec) -> tuple[str, ...]:
    """Everyone (users and groups) asked at some stage of one of ``spec``'s chains, or named
    by one of its rules."""
    people = (r for chain in chains_of(spec) for stage in chain for r in stage.reviewers)
    return tuple(dict.fromkeys(people))


def named_of(spec: CrewSpec, run: Run, review: Review) -> tuple[str, ...]:
    """Who is asked to decide ``review`` where it follows no approval chain: the reviewers
    a rule raised for it, else the run's (the crew's, or the one its reviewer input names;
    empty: the run's channel)."""
    if review.raised is not None and review.raised.reviewers:
        return review.raised.reviewers
    return spec.reviewers_of(run.inputs)


def stage_at(chain: Chain, review: Review) -> int:
    """The index of the stage ``review`` is at (the last one where the chain is shorter now
    than when it got there)."""
    return min(review.stage, len(chain) - 1)


def current(chain: Chain, review: Review) -> StageSpec:
    """The stage ``review`` is at."""
    return chain[stage_at(chain, review)]


def approvals_required(spec: CrewSpec, review: Review) -> int:
    """How many distinct reviewers must approve ``review``: the ``approvals`` a rule raised
    for it (``crew_runtime.rules``; 1 where the rule names reviewers without), else its
    gated tool's or its task's table (``[crews.NAME.gates.TOOL]``, ``[crews.NAME.tasks.N]``),
    else the crew's."""
    raised = review.raised
    if raised is not None:
        if raised.approvals is not None:
            return raised.approvals
        if raised.names_people:
            return 1
    tool, task = rule_of(review.kind, review.stream, review.details)
    details = review.details
    if raised is None and isinstance(details, ToolApprovalDetails):  # a row from before 0024
        rule = spec.rules.named(details.rule)
        if rule is not None and rule.approvals is not None:
            return rule.approvals
    return spec.approvals_for(tool=tool, task=task)


def still_expected(
    spec: CrewSpec, review: Review, run: Run, away: Mapping[str, str]
) -> tuple[str, ...]:
    """The review's reviewers (users and groups: :func:`named_of`; for a review with an
    approval chain, its current stage's), each away one's delegate in their place
    (``away``: ``Store.delegates``), whose approval ``review`` may still get: not those who
    approved, nor who started the run where the crew forbids it. Empty when nobody is named
    (anyone in the channel may approve)."""
    approved = {a.decided_by for a in review.approvals}
    barred = {run.started_by} if spec.forbid_self_approval else set()
    chain = stages_of(spec, review)
    if chain:  # an approval chain: its current stage's reviewers
        named = covered(current(chain, review).reviewers, away)
    else:
        named = covered(tuple(r for r in named_of(spec, run, review) if r != NOBODY), away)
    return tuple(r for r in named if r not in approved and r not in barred)


def covered(named: tuple[str, ...], delegates: Mapping[str, str]) -> tuple[str, ...]:
    """``named`` (people and groups) with each person who is away replaced by their delegate
    (``Store.delegates``), each once: whom a review mentions, reminds and waits for."""
    people: list[str] = []
    for ref in named:
        person = delegates.get(ref, ref)
        if person not in people:
            people.append(person)
    return tuple(people)
