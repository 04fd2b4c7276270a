"""Errors of the runtime, the ``CrewRuntimeError`` subtree of ``CountersignError`` (the whole
tree is drawn in ``storage.errors``; the control signals that stop a crew are in ``signals``).

    CrewRuntimeError
    ├── UsageError            bad input from a person (CLI or Slack): say it, change nothing
    │   ├── InputsRefused     inputs a crew lacks, or does not take
    │   ├── ReviewerInputRefused  a run's reviewer input that is not a Slack user id
    │   ├── TextRefused       text that cannot be stored (a NUL, a lone surrogate, too long)
    │   ├── EditRefused       an edit that does not fit the arguments' or output's schema
    │   ├── NothingToReopen   a task with no approved review to send back
    │   ├── SelfApproval      who started a run approving its review (forbid_self_approval)
    │   ├── NotYourStage      deciding a staged review at a stage one is not asked at
    │   ├── NotAReviewer      acting on a review or run the policy does not let one act on
    │   ├── NobodyDecides     starting a run no one could decide (no reviewers, no channel)
    │   └── CouldNotCheck     Slack did not say who is in a group or channel: try again
    ├── CrewBuildError        the crew's factory failed or returned something else
    ├── ConsoleInputRefused   input() where no question can be asked for it
    └── ConfigError           (crew_runtime.config)
        └── UnknownCrewError

This module does not import crewai, so the CLI and the bot can use it cheaply.
"""

from __future__ import annotations

from storage.errors import CountersignError

__all__ = [
    "ConsoleInputRefused",
    "CouldNotCheck",
    "CountersignError",
    "CrewBuildError",
    "CrewRuntimeError",
    "EditRefused",
    "InputsRefused",
    "NobodyDecides",
    "NotAReviewer",
    "NotYourStage",
    "NothingToReopen",
    "ReviewerInputRefused",
    "SelfApproval",
    "TextRefused",
    "UsageError",
]


class CrewRuntimeError(CountersignError):
    """Base class of the runtime's errors."""


class UsageError(CrewRuntimeError):
    """A person asked for something that cannot be done; the message says why."""


class ReviewerInputRefused(UsageError):
    """The input a crew takes its run's reviewer from does not hold a Slack user id."""

    def __init__(self, crew: str, name: str, value: str) -> None:
        super().__init__(
            f"crew {crew!r} takes its reviewer from the input {name!r}: give a Slack user id "
            f"like {name}=U012ABCDEF (in Slack, {name}=@someone), not {value!r}"
        )
        self.crew, self.name, self.value = crew, name, value


class InputsRefused(UsageError):
    """A run's inputs: ``missing`` names those the crew needs, ``unknown`` those it does not
    take (``taken`` says which it takes)."""

    def __init__(
        self,
        crew: str,
        *,
        missing: list[str] | None = None,
        unknown: list[str] | None = None,
        taken: str = "",
    ) -> None:
        self.crew, self.missing, self.unknown, self.taken = (
            crew,
            missing or [],
            unknown or [],
            taken,
        )
        if self.unknown:
            said = (
                f"crew {crew!r} does not take the input(s) {', '.join(self.unknown)}; "
                f"it takes {taken}"
            )
        else:
            said = (
                f"crew {crew!r} needs the input(s) {', '.join(self.missing)} "
                f"(give them as {self.missing[0]}=value)"
            )
        super().__init__(said)


class TextRefused(UsageError):
    """Text Countersign cannot store: ``what`` says whose, ``reason`` why."""

    def __init__(self, what: str, reason: str) -> None:
        super().__init__(f"{what} {reason}")
        self.what, self.reason = what, reason


class EditRefused(UsageError):
    """An edit that does not fit: ``what`` it changes, ``problem`` where it does not fit."""

    def __init__(self, what: str, problem: str) -> None:
        super().__init__(f"the edited {what}: {problem}")
        self.what, self.problem = what, problem


class NothingToReopen(UsageError):
    """Task ``task`` (from 1) of a run has no approved review; ``approved`` lists those that do."""

    def __init__(self, run_id: str, task: int, approved: list[int]) -> None:
        choices = ", ".join(map(str, approved)) or "none yet"
        super().__init__(
            f"task {task} of run {run_id} has no approved review to reopen "
            f"(approved tasks: {choices})"
        )
        self.run_id, self.task, self.approved = run_id, task, approved


class SelfApproval(UsageError):
    """``by`` started run ``run_id``, whose crew forbids its starter to approve its reviews."""

    def __init__(self, run_id: str, by: str) -> None:
        super().__init__(
            f"{by} started run {run_id}, and its crew forbids approving your own run's reviews "
            "(forbid_self_approval): another reviewer must approve"
        )
        self.run_id, self.by = run_id, by


class NotYourStage(UsageError):
    """``by`` may not decide review ``review_id`` at the stage of its approval chain it is at
    (``stage``, named, number ``number`` of ``count``): that stage's ``reviewers`` may;
    ``later`` names the stage ``by`` is asked at, if any."""

    def __init__(
        self,
        review_id: str,
        by: str,
        stage: str,
        number: int,
        count: int,
        reviewers: tuple[str, ...],
        later: str | None,
    ) -> None:
        turn = f"{by} is asked at the {later} stage, after it" if later else f"{by} is not"
        super().__init__(
            f"review {review_id} is at its {stage} stage ({number} of {count}): only "
            f"{' or '.join(reviewers)} may decide it now; {turn}"
        )
        self.review_id, self.by, self.stage = review_id, by, stage
        self.number, self.count, self.reviewers, self.later = number, count, reviewers, later


class CrewBuildError(CrewRuntimeError):
    """The crew factory raised or did not return a ``crewai.Crew``."""


class ConsoleInputRefused(CrewRuntimeError):
    """A crew called ``input()`` where Countersign cannot turn it into a question (outside a
    step or a tool of its run: its factory, say); the message names where and the fix."""


class NotAReviewer(UsageError):
    """``person`` may not do ``action`` to review ``review_id`` of run ``run_id`` (the review
    policy says so: not among those asked; ``why`` says more where there is more to say)."""

    def __init__(
        self, review_id: str, run_id: str, person: str, action: str = "claim", why: str = ""
    ) -> None:
        if action in ("claim", "reassign"):
            said = (
                f"{person} is not one of the reviewers of run {run_id}, so review {review_id} "
                "cannot be claimed by or reassigned to them"
            )
        else:
            said = f"{person} may not {action} run {run_id}: not one of its reviewers"
        super().__init__(f"{said}{f' ({why})' if why else ''}")
        self.review_id, self.run_id, self.person = review_id, run_id, person
        self.action, self.why = action, why


class NobodyDecides(UsageError):
    """A run of ``crew`` would have reviews nobody could decide; ``configure`` says what
    to set."""

    def __init__(self, crew: str, configure: str) -> None:
        super().__init__(f"nobody could decide this run's reviews: {configure}")
        self.crew, self.configure = crew, configure


class CouldNotCheck(UsageError):
    """Slack did not say who is in ``what`` (user groups, a channel): nobody was told yes or
    no, nothing changed; asking again asks Slack again."""

    def __init__(self, person: str, what: str = "") -> None:
        super().__init__(
            f"could not check whether {person} may do that (Slack did not answer"
            f"{f' about {what}' if what else ''}): try again"
        )
        self.person, self.what = person, what
