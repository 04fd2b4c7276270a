"""The review policy: who is asked, who may decide now, who may cancel, revise, claim,
reassign, revoke or see, as one pure function of the configuration, the run, the review and
the facts already known. No I/O here: every door (Slack's clicks, modals, replies and
``/crew``, the Home tab, reminders, the HTTP API, the command line) fetches the facts it
needs (``needs``) and asks; the service asks again inside the transaction that records a
decision.

The table it implements (``docs/architecture.md`` draws it):

* **Asked now** for a review: what a rule raised for it (``Review.raised``: its chain, or
  its reviewers) in place of the configuration's, whatever the file says since; with an
  approval chain, its current stage's ``reviewers``; else the run's reviewers (the crew's
  ``reviewers``, or the person its ``reviewers_from_input`` names); where neither names
  anyone, the members of the run's channel (of the app's DM: who started the run there).
  Someone away is replaced by their delegate, who may do whatever the person away could.
* **Decide** (approve, edit, reject, request changes, answer): one of those asked now; not
  an approval of one's own run where the crew sets ``forbid_self_approval``; not a second
  approval by whoever counts already. A claim is a note, never a lock.
* **Claim**: one of those asked now. **Reassign**: ``by`` asked now, to a person (not a
  bot nor a deactivated account, not ``by``: Claim is for oneself) who could approve it
  now (asked now, not its starter where self-approval is forbidden, not counted already).
* **Cancel**, **revoke a standing approval**: who started the run, or one of its deciders
  (the run's reviewers, every stage's and those its crew's rules name, else its channel).
  **Revise an earlier task**: one of its deciders. **See** a run's status: the above, or
  anyone in its channel.
* **Start**: refused when a review of the run that follows no chain would have nobody to
  decide it (no reviewers and no channel; or the app's DM, whose one person started the
  run, where the crew forbids self-approval) — see :func:`start_refusal`.

A fact that could not be checked (Slack did not answer) is never a yes or a no: the
answer is :attr:`Reason.COULD_NOT_CHECK` and the person is asked to try again. The
operator's door (the command line) vouches for memberships it cannot see
(``Facts.vouched``): names in the configuration still bind it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from crew_runtime.errors import (
    CouldNotCheck,
    NobodyDecides,
    NotAReviewer,
    NotYourStage,
    SelfApproval,
)
from crew_runtime.reviewers import (
    approvals_required,
    covered,
    named_of,
    stage_at,
    stage_people,
    stages_of,
    still_expected,
)
from crew_runtime.specs import NOBODY, CrewSpec
from storage import (
    ALLOWED_DECISIONS,
    AlreadyApproved,
    CountersignError,
    DecisionKind,
    Review,
    Run,
)

__all__ = [
    "Asked",
    "Facts",
    "Reason",
    "Refusal",
    "claim",
    "decide",
    "deciders",
    "error",
    "may_cancel",
    "may_revise",
    "may_revoke",
    "may_see",
    "needs",
    "one_of",
    "reassign",
    "reminded",
    "start_refusal",
    "waiting_for",
]

APPROVING = frozenset({DecisionKind.APPROVE, DecisionKind.EDIT})


class Reason(StrEnum):
    """Why the policy says no."""

    NOT_A_REVIEWER = "not_a_reviewer"  # not among those asked (nor their delegate)
    NOT_YOUR_STAGE = "not_your_stage"  # a chain's review, at another stage than theirs
    OWN_RUN = "self_approval"  # approving one's own run where the crew forbids it
    ALREADY_COUNTED = "already_approved"  # their approval counts already
    COULD_NOT_CHECK = "check_failed"  # Slack did not say: try again
    BOT = "bot"  # a reassignment to a bot (or an app)
    SAME_PERSON = "same_person"  # reassigning to oneself, or to whoever holds it
    NOBODY_DECIDES = "nobody_decides"  # a run started with no possible decider


@dataclass(frozen=True)
class Refusal:
    """The policy's no: its reason and what a person is told around it (the stage a chain
    is at, whose turn it is, the stage the person is asked at later)."""

    reason: Reason
    person: str
    stage: str | None = None
    number: int = 0
    count: int = 0
    reviewers: tuple[str, ...] = ()
    later: str | None = None
    configure: str = ""  # NOBODY_DECIDES: what to set
    given: int = 0  # ALREADY_COUNTED: approvals so far, of ``required``
    required: int = 1


@dataclass(frozen=True)
class Asked:
    """Who is asked: ``named`` users and user groups, else (none named) the members of
    ``channel``; nobody where both are empty."""

    named: tuple[str, ...] = ()
    channel: str | None = None


@dataclass(frozen=True)
class Facts:
    """What is known of Slack and of absences when the policy is asked.

    ``groups``/``channels``: members of the user groups and channels looked up; ``failed``:
    the groups and channels whose lookup failed (a no answer, never cached); ``away``: each
    person away now and their delegate; ``bots``: ids known to be bots or apps; ``vouched``:
    the operator's door, for which a membership it cannot see counts as yes."""

    groups: Mapping[str, frozenset[str]] = field(default_factory=dict)
    channels: Mapping[str, frozenset[str]] = field(default_factory=dict)
    failed: frozenset[str] = frozenset()
    away: Mapping[str, str] = field(default_factory=dict)
    bots: frozenset[str] = frozenset()
    vouched: bool = False

    def acting(self, person: str) -> tuple[str, ...]:
        """``person`` and everyone away whose reviews they hold."""
        return (person, *sorted(p for p, d in self.away.items() if d == person))


# Three answers: yes, no, could not tell.
_UNKNOWN = None


def _in(person: str, asked: Asked, facts: Facts) -> bool | None:
    """Whether ``person`` is one of ``asked``; None when a lookup it needs failed or was not
    made (and no other said yes)."""
    unknown = False
    if asked.named:
        if person in asked.named:
            return True
        for group in (r for r in asked.named if r.startswith("S")):
            members = facts.groups.get(group)
            if members is None:
                unknown = True
            elif person in members:
                return True
        if unknown and not facts.vouched:
            return _UNKNOWN
        return unknown  # vouched: the operator says so
    channel = asked.channel
    if channel is None:
        return facts.vouched  # no channel: nobody but the operator
    members = facts.channels.get(channel)
    if members is None:
        return True if facts.vouched else _UNKNOWN
    return person in members


def _any_in(person: str, asked: Iterable[Asked], facts: Facts) -> bool | None:
    """Whether ``person``, or someone away whose reviews they hold, is one of any ``asked``."""
    unknown = False
    for who in facts.acting(person):
        for one in asked:
            found = _in(who, one, facts)
            if found:
                return True
            unknown = unknown or found is None
    return _UNKNOWN if unknown else False


def needs(asked: Iterable[Asked]) -> tuple[set[str], set[str]]:
    """The user groups and channels whose members answering for ``asked`` takes."""
    groups: set[str] = set()
    channels: set[str] = set()
    for one in asked:
        groups.update(r for r in one.named if r.startswith("S"))
        if not one.named and one.channel is not None:
            channels.add(one.channel)
    return groups, channels


def _run_reviewers(spec: CrewSpec, run: Run) -> tuple[str, ...]:
    return tuple(r for r in spec.reviewers_of(run.inputs))


def asked_now(spec: CrewSpec, run: Run, review: Review) -> Asked:
    """Who is asked to decide ``review`` now (delegations aside)."""
    chain = stages_of(spec, review)
    if chain:
        return Asked(chain[stage_at(chain, review)].reviewers)
    named = named_of(spec, run, review)
    return Asked(named) if named else Asked(channel=run.channel)


def deciders(spec: CrewSpec, run: Run) -> Asked:
    """Everyone who may decide some review of ``run``: its reviewers, every stage's of the
    crew's chains and those its rules name; the members of its channel where none are
    named."""
    named = tuple(dict.fromkeys((*_run_reviewers(spec, run), *stage_people(spec))))
    return Asked(named) if named else Asked(channel=run.channel)


def _unknown(person: str) -> Refusal:
    return Refusal(Reason.COULD_NOT_CHECK, person)


def _turn(
    spec: CrewSpec | None, run: Run, review: Review, person: str, facts: Facts
) -> Refusal | None:
    """Whether ``person`` is asked now (their stage's turn, for a chain's review)."""
    if spec is None:  # a crew no longer configured: the operator's alone
        return None if facts.vouched else Refusal(Reason.NOT_A_REVIEWER, person)
    found = _any_in(person, [asked_now(spec, run, review)], facts)
    if found:
        return None
    if found is None:
        return _unknown(person)
    chain = stages_of(spec, review)
    if not chain:
        return Refusal(Reason.NOT_A_REVIEWER, person)
    index = stage_at(chain, review)
    stage = chain[index]
    later = next(
        (s.name for s in chain[index + 1 :] if _in(person, Asked(s.reviewers), facts)), None
    )
    return Refusal(
        Reason.NOT_YOUR_STAGE, person, stage.name, index + 1, len(chain), stage.reviewers, later
    )


def decide(
    spec: CrewSpec | None,
    run: Run,
    review: Review,
    person: str,
    kind: DecisionKind | None,
    facts: Facts,
) -> Refusal | None:
    """Why ``person`` may not make decision ``kind`` (None: any decision; asked before the
    person chose, as when a modal opens) on the pending ``review`` of ``run`` now; None when
    they may."""
    refused = _turn(spec, run, review, person, facts)
    if refused is not None or spec is None:
        return refused
    approving = kind in APPROVING and kind in ALLOWED_DECISIONS[review.kind]
    if approving and spec.forbid_self_approval and run.started_by == person:
        return Refusal(Reason.OWN_RUN, person)
    if approving and any(a.decided_by == person for a in review.approvals):
        chain = stages_of(spec, review)
        if chain:
            stage = chain[stage_at(chain, review)]
            given, required = len(review.approvals_at(stage.name)), stage.approvals_required
        else:
            given, required = len(review.approvals), approvals_required(spec, review)
        return Refusal(Reason.ALREADY_COUNTED, person, given=given, required=required)
    return None


def claim(
    spec: CrewSpec | None, run: Run, review: Review, person: str, facts: Facts
) -> Refusal | None:
    """Why ``person`` may not claim ``review`` now; None when they may."""
    return _turn(spec, run, review, person, facts)


def reassign(
    spec: CrewSpec | None, run: Run, review: Review, by: str, to: str, facts: Facts
) -> Refusal | None:
    """Why ``by`` may not give ``review`` to ``to`` now; None when they may. The refusal's
    ``person`` is whoever is refused (``by``, or ``to``)."""
    refused = _turn(spec, run, review, by, facts)
    if refused is not None:
        return refused
    if to in facts.bots:
        return Refusal(Reason.BOT, to)
    if to in facts.failed:  # Slack did not say whether they are a bot
        return _unknown(to)
    refused = decide(spec, run, review, to, DecisionKind.APPROVE, facts)
    if refused is None and to == by:  # Claim is for oneself
        return Refusal(Reason.SAME_PERSON, to)
    return refused


def _run_action(spec: CrewSpec | None, run: Run, person: str, facts: Facts) -> Refusal | None:
    if spec is None:
        return None if facts.vouched else Refusal(Reason.NOT_A_REVIEWER, person)
    found = _any_in(person, [deciders(spec, run)], facts)
    if found:
        return None
    return _unknown(person) if found is None else Refusal(Reason.NOT_A_REVIEWER, person)


def may_cancel(spec: CrewSpec | None, run: Run, person: str, facts: Facts) -> Refusal | None:
    """Why ``person`` may not cancel ``run``; None when they may (who started it, or one of
    its deciders)."""
    if person == run.started_by:
        return None
    return _run_action(spec, run, person, facts)


def may_revoke(spec: CrewSpec | None, run: Run, person: str, facts: Facts) -> Refusal | None:
    """Why ``person`` may not revoke a standing approval of ``run``; as :func:`may_cancel`."""
    return may_cancel(spec, run, person, facts)


def may_revise(spec: CrewSpec | None, run: Run, person: str, facts: Facts) -> Refusal | None:
    """Why ``person`` may not reopen an approved task of ``run``; None for its deciders."""
    return _run_action(spec, run, person, facts)


def may_see(
    spec: CrewSpec | None, run: Run, person: str, where: str | None, facts: Facts
) -> Refusal | None:
    """Why ``person``, asking in channel ``where``, may not see ``run``'s inputs and reviews;
    None in its channel, for who started it, and for its deciders."""
    if (where is not None and where == run.channel) or person == run.started_by:
        return None
    return _run_action(spec, run, person, facts)


def start_refusal(spec: CrewSpec, inputs: Mapping[str, str], channel: str | None) -> Refusal | None:
    """Why a run of ``spec`` with ``inputs``, its thread in ``channel``, may not start: a
    review of it that follows no approval chain would be open to its channel's members
    (no reviewers named), and there is no channel, or only the app's DM, whose one person
    may not approve the run they start (``forbid_self_approval``). A crew with a crew-wide
    chain has its stages' people to decide."""
    named = spec.reviewers_of(inputs)
    if named and named != (NOBODY,):
        return None
    if named == (NOBODY,):
        return None  # the reviewer input is checked apart (ReviewerInputRefused)
    if spec.stages:
        return None  # a crew-wide chain: its task reviews and gated calls have deciders
    if channel is not None and not (channel.startswith("D") and spec.forbid_self_approval):
        return None
    where = (
        "a direct message, where only who started it could decide and the crew forbids "
        "self-approval"
        if channel
        else "no channel"
    )
    return Refusal(
        Reason.NOBODY_DECIDES,
        "",
        configure=(
            f"crew {spec.name} names no reviewers and its run would have {where}: set "
            f"reviewers (or channel) in its [crews.{spec.name}] table, or start it in a channel"
        ),
    )


def error(
    refusal: Refusal, review: Review | None, run: Run, *, action: str = "decide"
) -> CountersignError:
    """The exception a door maps to its words (Slack's text, the CLI's ``error:`` line, the
    API's problem body): one per reason, so every door says the same thing."""
    review_id = "" if review is None else review.id
    match refusal.reason:
        case Reason.NOT_YOUR_STAGE:
            assert refusal.stage is not None
            return NotYourStage(
                review_id,
                refusal.person,
                refusal.stage,
                refusal.number,
                refusal.count,
                refusal.reviewers,
                refusal.later,
            )
        case Reason.OWN_RUN:
            return SelfApproval(run.id, refusal.person)
        case Reason.ALREADY_COUNTED:
            return AlreadyApproved(review_id, refusal.person, refusal.given, refusal.required)
        case Reason.COULD_NOT_CHECK:
            return CouldNotCheck(refusal.person)
        case Reason.NOBODY_DECIDES:
            return NobodyDecides(run.crew, refusal.configure)
        case Reason.BOT:
            return NotAReviewer(review_id, run.id, refusal.person, action, "a bot")
        case Reason.SAME_PERSON:
            return NotAReviewer(review_id, run.id, refusal.person, action, "has it already")
        case _:
            return NotAReviewer(review_id, run.id, refusal.person, action)


def one_of(person: str, asked: Iterable[Asked], facts: Facts) -> bool | None:
    """Whether ``person``, or someone away whose reviews they hold, is one of any of
    ``asked``; None when a lookup that would answer failed (and none said yes)."""
    return _any_in(person, asked, facts)


def reminded(
    spec: CrewSpec, run: Run, review: Review, away: Mapping[str, str], *, escalated: bool
) -> tuple[str, ...]:
    """Whom a reminder (or, ``escalated``, an escalation) of ``review`` mentions: those asked
    now (a chain's current stage, else the run's reviewers; nobody named: nobody, the
    channel's members are not mentioned), an escalation ``escalate_to`` where set, a
    reminder of a claimed review whoever has it; each person away replaced by their
    delegate."""
    asked = asked_now(spec, run, review).named
    named = tuple(r for r in asked if r != NOBODY)
    if escalated:
        return covered(spec.escalate_to or named, away)
    if review.claimed_by is not None:
        return covered((review.claimed_by,), away)
    return covered(named, away)


def waiting_for(
    spec: CrewSpec, run: Run, review: Review, away: Mapping[str, str]
) -> tuple[str, ...]:
    """Whose approval ``review`` may still get, as a review message lists and a DM reminder
    writes to: those asked now, each away one's delegate in their place, not who approved
    already nor (``forbid_self_approval``) who started the run; empty where the channel is
    asked."""
    return still_expected(spec, review, run, away)
