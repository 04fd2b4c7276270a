"""What people do to runs, whatever the door (CLI or Slack): start, decide, cancel.

Validation happens here, before anything is written; a bad request raises
``UsageError`` (or a storage error) and changes nothing. That includes text no database
can store (see :func:`_storable`), refused here for every door at once.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, date, datetime, timedelta
from typing import Any

from crew_runtime import digests, flow_outcomes, metrics, policy, streams
from crew_runtime.arguments import parse_edited_args
from crew_runtime.config import Config, CrewSpec
from crew_runtime.errors import (
    EditRefused,
    InputsRefused,
    NothingToReopen,
    ReviewerInputRefused,
    TextRefused,
    UsageError,
)
from crew_runtime.outputs import parse_edited_output
from crew_runtime.people import BY_NAME
from crew_runtime.policy import Facts
from crew_runtime.reviewers import approvals_required, stages_of
from storage import (
    DIGEST,
    HUMAN_DECISIONS,
    PERSON_LENGTH,
    DecisionKind,
    Delegation,
    DigestMismatch,
    FlowFeedbackDetails,
    NewDecision,
    NotWaiting,
    Review,
    ReviewEventKind,
    ReviewKind,
    ReviewStatus,
    Run,
    RunStatus,
    StandingApproval,
    Store,
    TaskReviewDetails,
    ToolApprovalDetails,
)


class Countersign:
    """The runtime's front door, shared by the CLI and the Slack bot."""

    def __init__(self, store: Store, config: Config) -> None:
        self.store = store
        self.config = config

    def start_run(
        self,
        crew: str,
        inputs: dict[str, str],
        *,
        started_by: str | None = None,
        channel: str | None = None,
        request_key: str | None = None,
    ) -> Run:
        """Queue a run of a configured crew.

        ``request_key`` names the request asking (a Slack request's key): asked again, the
        run it started is returned and no second run is made.

        Raises:
            UnknownCrewError: no crew of that name in the configuration.
            UsageError: a required input is missing, or holds text that cannot be stored;
                (``ReviewerInputRefused``) the crew's reviewer input is not a Slack user id.
        """
        spec = self.config.get(crew)
        unknown = [name for name in inputs if name not in spec.declared_inputs]
        if spec.declared_inputs and unknown:
            raise InputsRefused(crew, unknown=unknown, taken=_inputs_taken(spec))
        missing = [name for name in spec.required_inputs if not inputs.get(name)]
        if missing:
            raise InputsRefused(crew, missing=missing)
        for name, value in inputs.items():
            _storable(f"the input {name!r}", name + value)
        _reviewer_input(spec, inputs)
        _person("who starts the run (--by)", started_by or "")
        return self.store.create_run(
            crew,
            inputs,
            started_by=started_by,
            channel=channel or spec.channel,
            request_key=request_key,
        )

    def decide(
        self,
        review_id: str,
        decision: DecisionKind,
        text: str | None,
        *,
        by: str,
        by_name: str | None = None,
        request_key: str | None = None,
        standing: bool = False,
        facts: Facts | None = None,
        outcome: str | None = None,
        expected_digest: str | None = None,
    ) -> Review:
        """Record a reviewer's decision; the run resumes once no review of it is pending.

        ``expected_digest`` is the action digest the decider saw (the whole SHA-256 in hex,
        or at least its first 8 digits, as the card shows it; ``crew_runtime.digests``): a
        review whose action has another digest is not decided (``DigestMismatch``). The
        decision records the digest it covers (an edit's: that of the edited action), which
        is what the worker runs.

        ``by`` is held to the review policy (``crew_runtime.policy``) here, on the review as
        read for this decision, with the ``facts`` the door fetched (the Slack doors' and the
        API's: group and channel members); without them, the operator's door (the command
        line) is assumed, which vouches for memberships it cannot see and is held to every
        name the configuration gives. Storage then records it only if the approval chain is
        still at the stage read (``StageMoved`` else) and ``by`` has not approved meanwhile.

        ``outcome`` names the outcome a flow's ``@human_feedback(emit=[...])`` takes (one of
        the review's ``outcomes``); kept with the decision, the resumed flow takes exactly it
        (``crew_runtime.flow_outcomes``, which also says how a decision naming none is read).

        ``standing`` (an approval of a gated tool's call whose gate sets ``allow_standing``)
        also approves the tool's later calls in the run with the same values of the gate's
        ``standing_match`` arguments, in the same transaction, until revoked.

        ``by_name`` is the reviewer's name as people know them (Slack's, for a Slack id),
        kept with the decision so the model is told it (``crew_runtime.people``).
        ``request_key`` names the request deciding: replayed, it is answered as the first
        time instead of as a second decision.

        Raises:
            UsageError: a decision no person makes (``expire``), text missing where it is
                needed, text that cannot be stored, an edit of a review that needs several
                approvals, a standing approval the review's gate does not allow, or
                (``SelfApproval``) who started the run approving its review where the crew
                forbids it.
            NotYourStage: ``by`` is not asked at the stage the review's approval chain is at.
            DigestMismatch: ``expected_digest`` is not the review's action's.
            ReviewNotFound, AlreadyDecided, AlreadyApproved, StageMoved, DecisionNotAllowed:
                from storage.

        A review whose crew sets ``approvals_required`` above one stays pending until that
        many distinct reviewers approved; the review returned then lists the approvals so far.
        A review with an approval chain (``stages``) is decided at the stage it is at, by
        that stage's reviewers (``NotYourStage`` for others, where the stage names only
        people), and stays pending until its last stage's quorum approved.
        """
        if decision not in HUMAN_DECISIONS:
            raise _unknown_decision(decision.value)
        text = (text or "").strip() or None
        if decision.needs_text and text is None:
            raise UsageError(f"{decision.value!r} needs text: {_TEXT_HINTS[decision]}")
        if not by.strip():
            raise UsageError("a decision needs the reviewer's name (--by USER)")
        _storable("the decision's text", text or "")
        _person("the reviewer's name (--by)", by)
        review = self.store.get_review(review_id)
        if expected_digest is not None:
            _check_digest(review, expected_digest)
        if isinstance(review.details, FlowFeedbackDetails):
            unroutable = flow_outcomes.refusal(review.details, decision, outcome)
            if unroutable is not None:
                raise UsageError(unroutable)
        elif outcome is not None:
            raise UsageError("only a flow's @human_feedback review has outcomes to choose")
        run = self.store.get_run(review.run_id)
        spec = self.config.crews.get(run.crew)
        required = 1 if spec is None else approvals_required(spec, review)
        chain = () if spec is None else stages_of(spec, review)
        if review.status == ReviewStatus.PENDING and not review.made_by(request_key):
            facts = facts or Facts(away=self.store.delegates(), vouched=True)
            refused = policy.decide(spec, run, review, by.strip(), decision, facts)
            if refused is not None:
                raise policy.error(refused, review, run)
        if decision == DecisionKind.EDIT and (required > 1 or chain):
            needs = f"{len(chain)} stages of approvals" if chain else f"{required} approvals"
            raise UsageError(
                f"this review needs {needs}, so one reviewer's edit cannot "
                "settle it: approve the draft as it is, or send it back with a reason"
            )
        if decision == DecisionKind.EDIT and text is not None:
            text = self._checked_edit(review, text)
        match = _standing_match(spec, review, decision) if standing else None
        name = " ".join((by_name or "").split())[:PERSON_LENGTH]
        _storable("the reviewer's name", name)
        details: dict[str, Any] = {BY_NAME: name} if name else {}
        digest = digests.approved_digest(review, text if decision == DecisionKind.EDIT else None)
        if digest is not None:
            details[DIGEST] = digest
        if outcome is not None:
            details[flow_outcomes.OUTCOME] = outcome
        asked = self.store.clock()
        review = self.store.decide(
            review_id,
            NewDecision(decision, by.strip(), text, details=details, request_key=request_key),
            approvals_required=required,
            stages=[stage.rule for stage in chain],
            stage=review.stage if chain else None,
            standing=match,
        )
        # Decided by this call, not a request replayed (answered with the first decision).
        if review.decided_at is not None and review.decided_at >= asked:
            metrics.observe_decision(self.store.get_run(review.run_id).crew, review)
        return review

    def claim(
        self,
        review_id: str,
        *,
        by: str,
        to: str | None = None,
        request_key: str | None = None,
        facts: Facts | None = None,
    ) -> Review:
        """``by`` claims the pending review (``to`` None or ``by``), or reassigns it to
        ``to``: whoever it names handles it from now on (a later claim moves it; anyone
        allowed may still decide). Recorded for the audit trail, as a claim or a
        reassignment. ``request_key``: replayed, it is answered as the first time.

        Only reviewers of the run may claim or reassign, and only to a reviewer: where the
        crew (or the run's reviewer input) names only people, ``by`` and ``to`` must be
        among them; for a review with an approval chain, among its current stage's
        reviewers (or hold the reviews of one who is away). Membership of a user group or
        of the run's channel is Slack's to say; the Slack door asks it before calling this
        (``crew_runtime.policy``: the facts it fetched are passed as ``facts``).

        Raises:
            UsageError: a name that cannot be stored; (``NotAReviewer``) ``by`` or ``to``
                not among the people the run names; (``NotYourStage``) not asked at the
                stage the review's approval chain is at.
            ReviewNotFound, AlreadyDecided, StageMoved: from storage (the chain moved on
                since the check).
        """
        by = by.strip()
        to = (to or by).strip()
        if not by:
            raise UsageError("a claim needs the reviewer's name (--by USER)")
        _person("who claims (--by)", by)
        _person("who is given the review (--to)", to)
        review = self.store.get_review(review_id)
        run = self.store.get_run(review.run_id)
        spec = self.config.crews.get(run.crew)
        replayed = self.store.claimed_by_request(review_id, request_key)
        if review.status == ReviewStatus.PENDING and not replayed:
            facts = facts or Facts(away=self.store.delegates(), vouched=True)
            if to == by:
                refused = policy.claim(spec, run, review, by, facts)
            else:
                refused = policy.reassign(spec, run, review, by, to, facts)
            if refused is not None:
                action = "claim" if to == by else "reassign"
                raise policy.error(refused, review, run, action=action)
        kind = ReviewEventKind.CLAIM if to == by else ReviewEventKind.REASSIGN
        chain = () if spec is None else stages_of(spec, review)
        return self.store.claim_review(
            review_id,
            kind,
            by=by,
            to=to,
            request_key=request_key,
            stages=[stage.rule for stage in chain],
            stage=review.stage if chain else None,
        )

    def revoke_standing(self, standing_id: str, *, by: str) -> StandingApproval:
        """Revoke a standing approval: the later calls of its tool are reviewed again (a call
        it approved already stays approved, as the run's journal records).

        Raises:
            UsageError: no name for who revokes it.
            StandingNotFound, AlreadyRevoked: from storage.
        """
        if not by.strip():
            raise UsageError("revoking needs the person's name (--by USER)")
        _person("the name of who revokes it (--by)", by)
        return self.store.revoke_standing(standing_id, by=by.strip())

    def approvals_required(self, review: Review) -> int:
        """How many distinct reviewers must approve ``review`` (1 for a crew the
        configuration no longer defines)."""
        spec = self.config.crews.get(self.store.get_run(review.run_id).crew)
        return 1 if spec is None else approvals_required(spec, review)

    def _checked_edit(self, review: Review, text: str) -> str:
        """An edit of a tool call is its new arguments, a JSON object fitting the tool's
        schema; an edit of a typed task's draft is its output, JSON fitting the output
        model's schema. Either is stored as compact JSON."""
        details = review.details
        try:
            if isinstance(details, ToolApprovalDetails):
                value: Any = parse_edited_args(text, details.schema)
            elif isinstance(details, TaskReviewDetails) and details.output_schema is not None:
                value = parse_edited_output(text, details.output_schema)
            else:
                return text
        except ValueError as exc:
            raise EditRefused(_edited(review), str(exc)) from None
        return json.dumps(value, ensure_ascii=False)

    def revisable_tasks(self, run_id: str) -> list[tuple[int, str]]:
        """The tasks of a waiting run that a reviewer approved and may reopen:
        ``(task index from 0, label)``, in task order."""
        if self.store.get_run(run_id).status != RunStatus.WAITING:
            return []
        return [
            (index, _task_label(index, review))
            for index, review in sorted(self._approved_tasks(run_id).items())
        ]

    def revise(
        self, run_id: str, task_index: int, feedback: str, *, by: str, facts: Facts | None = None
    ) -> Review:
        """Reopen an approved task of a waiting run with new feedback.

        The task is revised with the feedback (its agent sees its draft and every
        feedback so far); every later task runs again with the new context and is
        reviewed again. What the tasks did before stays in the audit trail.

        Raises:
            UsageError: no feedback, feedback that cannot be stored, or the task has no
                approved review to reopen; (``NotAReviewer``, ``CouldNotCheck``) the review
                policy's refusal of ``by``.
            RunNotFound, NotWaiting: from storage.
        """
        feedback = feedback.strip()
        if not feedback:
            raise UsageError("revising a task needs feedback for its agent")
        if not by.strip():
            raise UsageError("a decision needs the reviewer's name (--by USER)")
        _storable("the feedback", feedback)
        _person("the reviewer's name (--by)", by)
        run = self.store.get_run(run_id)
        facts = facts or Facts(away=self.store.delegates(), vouched=True)
        refused = policy.may_revise(self.config.crews.get(run.crew), run, by.strip(), facts)
        if refused is not None:
            raise policy.error(refused, None, run, action="revise")
        if run.status != RunStatus.WAITING:
            raise NotWaiting(run.id, run.status)
        approved = self._approved_tasks(run_id)
        if task_index not in approved:
            raise NothingToReopen(run_id, task_index + 1, [i + 1 for i in sorted(approved)])
        decision = NewDecision(DecisionKind.CHANGES, by.strip(), feedback)
        return self.store.reopen_review(approved[task_index].id, decision)

    def _approved_tasks(self, run_id: str) -> dict[int, Review]:
        """The latest live task review of each task, where it approved (or edited) the draft."""
        latest: dict[int, Review] = {}
        for review in self.store.list_reviews(status=None, run_id=run_id):
            index = _task_index(review)
            if index is None or review.status == ReviewStatus.SUPERSEDED:
                continue
            if index not in latest or review.seq > latest[index].seq:
                latest[index] = review
        return {
            index: review
            for index, review in latest.items()
            if review.decision is not None
            and review.decision.kind in (DecisionKind.APPROVE, DecisionKind.EDIT)
        }

    def away(self, person: str, delegate: str, until: str, *, by: str) -> Delegation:
        """While ``person`` is away (through the day ``until``, ``YYYY-MM-DD``, UTC; or up to
        an ISO time), the reviews that would mention or wait for them go to ``delegate``.

        Raises:
            UsageError: a name missing or unstorable, or ``until`` not a date.
            DelegationRefused: from storage: ``until`` is past, ``delegate`` is ``person``,
                or the delegation would close a circle.
        """
        person, delegate, by = person.strip(), delegate.strip(), by.strip()
        for what, name in (("who is away", person), ("the delegate (--to)", delegate)):
            if not name:
                raise UsageError(f"a delegation needs {what}")
            _person(what, name)
        _person("who delegates (--by)", by)
        return self.store.away(person, delegate, _until(until), by=by or person)

    def back(self, person: str, *, by: str) -> Delegation | None:
        """``person`` is back: their delegation ends now (None: they were not away)."""
        _person("who is back", person)
        _person("who says so (--by)", by)
        return self.store.back(person.strip(), by=by.strip() or person.strip())

    def acting_for(self, user: str) -> tuple[str, ...]:
        """``user`` and everyone whose reviews they hold while away: whatever one of them
        may decide, ``user`` may."""
        held = (p for p, d in self.store.delegates().items() if d == user)
        return (user, *sorted(held))

    def cancel(self, run_id: str, *, by: str, facts: Facts | None = None) -> Run:
        """Cancel a run, if the review policy lets ``by`` (who started it, or one of its
        deciders; ``facts`` as for :meth:`decide`).

        Raises:
            NotAReviewer, CouldNotCheck: the policy's refusal.
            RunNotFound, AlreadyFinal: from storage.
        """
        _person("who cancels the run (--by)", by)
        run = self.store.get_run(run_id)
        facts = facts or Facts(away=self.store.delegates(), vouched=True)
        refused = policy.may_cancel(self.config.crews.get(run.crew), run, by.strip(), facts)
        if refused is not None:
            raise policy.error(refused, None, run, action="cancel")
        return self.store.cancel_run(run_id, by)


_TEXT_HINTS = {
    DecisionKind.EDIT: "the edited text that replaces the draft",
    DecisionKind.CHANGES: "the feedback for the agent",
    DecisionKind.ANSWER: "the answer to the question",
}

_UNSTORABLE = re.compile(r"[\x00\ud800-\udfff]")


def review_digest(review: Review) -> str | None:
    """What a door shows of a pending review for a decision of it to carry back (a batch's
    item) and be held to (``expected_digest``): the first 16 hex digits of its action digest
    (``crew_runtime.digests``), None where it has none (a question). Short, as a Slack modal
    carries a hundred of them in its 3,000 characters of metadata; a changed action is a new
    review with a new digest, so an item shown before it changed is refused."""
    return review.digest[:16] if review.digest else None


def _storable(what: str, text: str) -> None:
    """Refuse ``text`` if it holds a NUL or a lone surrogate; ``what`` says whose text it is.

    PostgreSQL's text columns refuse NUL, and no UTF-8 encoder takes a lone surrogate
    (half of a UTF-16 pair: what a command line makes of bytes that are not UTF-8, or a
    JSON ``\\udXXX`` escape). Accepted, either fails the run later, where nobody can fix it.

    Raises:
        UsageError: ``text`` holds one; the message names the character, never shows it.
    """
    found = _UNSTORABLE.search(text)
    if found is None:
        return
    char = f"U+{ord(found.group()):04X}"
    kind = "a NUL character" if char == "U+0000" else "half of a surrogate pair, not a character"
    raise TextRefused(what, f"contains {char} ({kind}), which cannot be stored: remove it")


def _person(what: str, name: str) -> None:
    """Refuse a person's name or id that cannot be stored (see :func:`_storable`), or that is
    longer than its column (PostgreSQL would refuse it; SQLite would keep it whole)."""
    _storable(what, name)
    if len(name.strip()) > PERSON_LENGTH:
        raise TextRefused(what, f"is longer than {PERSON_LENGTH} characters")


def _check_digest(review: Review, expected: str) -> None:
    """Refuse a decision bound to another action than ``review``'s.

    Raises:
        UsageError: ``expected`` is not 8 to 64 hex digits.
        DigestMismatch: it does not name the review's digest.
    """
    if not digests.DIGEST_RE.fullmatch(expected.strip()):
        raise UsageError(
            f"{expected!r} is not an action digest: give its hex digits (at least the first 8)"
        )
    if not digests.matches(review.digest, expected):
        raise DigestMismatch(review.id, expected.strip().lower(), review.digest)


def _reviewer_input(spec: CrewSpec, inputs: dict[str, str]) -> None:
    """The input naming a run's reviewer holds one Slack user id (``U…``/``W…``)."""
    name = spec.reviewers_from_input
    if name is not None and spec.reviewers_of(inputs) != (inputs.get(name),):
        raise ReviewerInputRefused(spec.name, name, inputs.get(name, ""))


def _inputs_taken(spec: CrewSpec) -> str:
    """``topic, to (required) and tone (optional)``: the inputs a crew names."""
    groups = [(spec.required_inputs, "required"), (spec.optional_inputs, "optional")]
    return " and ".join(f"{', '.join(names)} ({kind})" for names, kind in groups if names)


def parse_decision(word: str) -> DecisionKind:
    """A person's decision as typed (``approve``, ``Edit``); the CLI's door to :meth:`decide`.

    Raises:
        UsageError: not a decision a person makes.
    """
    try:
        decision = DecisionKind(word.strip().lower())
    except ValueError:
        raise _unknown_decision(word) from None
    if decision not in HUMAN_DECISIONS:
        raise _unknown_decision(word)
    return decision


def _unknown_decision(word: str) -> UsageError:
    return UsageError(f"unknown decision {word!r}: use one of {'|'.join(HUMAN_DECISIONS)}")


def _edited(review: Review) -> str:
    """What an edit of ``review`` changes, in words for the reviewer."""
    details = review.details
    if isinstance(details, ToolApprovalDetails):
        return f"arguments of {details.tool}"
    model = details.output_model if isinstance(details, TaskReviewDetails) else None
    return f"output ({model or 'JSON'})"


def _standing_match(
    spec: CrewSpec | None, review: Review, decision: DecisionKind
) -> dict[str, Any]:
    """The argument values a standing approval granted with ``decision`` on ``review`` keeps
    to: those the gate's ``standing_match`` names, as this call has them."""
    details = review.details
    if not isinstance(details, ToolApprovalDetails) or decision != DecisionKind.APPROVE:
        raise UsageError("only the approval of a gated tool's call can approve its later calls")
    match = None if spec is None else spec.standing_values(details.tool, details.args or {})
    if match is None:
        raise UsageError(
            f"the gate of {details.tool} does not allow approving its later calls "
            f"(allow_standing = true in its [crews.NAME.gates.{details.tool}] table)"
        )
    return match


LATEST_UNTIL = date(9999, 12, 30)
"""The last day an absence may run through (the day after it is the last a date holds)."""


def _until(word: str) -> datetime:
    """The end of an absence as naive UTC: a date means through that day (UTC).

    Raises:
        UsageError: not a date, or later than :data:`LATEST_UNTIL` (saying so).
    """
    latest = datetime.combine(LATEST_UNTIL, datetime.min.time()) + timedelta(days=1)
    too_late = UsageError(
        f"{word!r} is too far ahead: the latest an absence can end is {LATEST_UNTIL}"
    )
    try:
        if len(word.strip()) == len("YYYY-MM-DD"):
            day = datetime.fromisoformat(word.strip())
            if day.date() > LATEST_UNTIL:
                raise too_late
            return day + timedelta(days=1)
        moment = datetime.fromisoformat(word.strip())
        if moment.tzinfo is not None:
            moment = moment.astimezone(UTC).replace(tzinfo=None)
    except ValueError:
        raise UsageError(f"{word!r} is not a date: use YYYY-MM-DD, e.g. 2026-12-24") from None
    except OverflowError:  # past either end of time once made UTC
        if word.strip().startswith("0001-"):
            raise UsageError(f"{word!r} is already past") from None
        raise too_late from None
    if moment > latest:
        raise too_late
    return moment


def _task_index(review: Review) -> int | None:
    """The task a task review belongs to, from its stream ``task{n}:{role}``."""
    if review.kind != ReviewKind.TASK_REVIEW:
        return None
    return streams.task_index(review.stream)


def _task_label(index: int, review: Review) -> str:
    details = review.details
    if not isinstance(details, TaskReviewDetails | FlowFeedbackDetails):
        return f"Task {index + 1}"
    description = details.description.strip().splitlines()
    summary = description[0][:60] if description else details.agent
    return f"Task {index + 1}: {summary}" if summary else f"Task {index + 1}"
