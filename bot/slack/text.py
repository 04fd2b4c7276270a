"""What the bot answers a person in Slack: slash-command replies, ephemeral messages, a
modal's errors and notices, and every refusal.

Why words apart from code: wording is reviewed, translated and kept consistent in one
sitting, and the parsers and listeners stay about structure. The words of the messages and
modals the bot posts are in ``bot.slack.block_text``. Everything here returns mrkdwn that is
safe to post (``bot.slack.mrkdwn``), except what :func:`refusal_in_form` and the modal's
field errors say, which Slack shows as plain text. Use it as a vocabulary:
``from bot.slack import text`` then ``text.NOT_A_REVIEWER``, ``text.wrong_channel(...)``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime

from bot.slack.block_text import REPLY_HINT, RUN_STATUS, arg_types
from bot.slack.mrkdwn import (
    channel_ref,
    code,
    escape,
    mention,
    slack_date,
    truncate,
    unescape,
    user_ref,
)
from bot.slack.payloads import PayloadError
from crew_runtime.config import ConfigError
from crew_runtime.errors import (
    CouldNotCheck,
    EditRefused,
    InputsRefused,
    NobodyDecides,
    NotAReviewer,
    NothingToReopen,
    NotYourStage,
    SelfApproval,
    TextRefused,
    UsageError,
)
from crew_runtime.policy import Reason
from storage.errors import (
    AlreadyApproved,
    AlreadyDecided,
    AlreadyFinal,
    AlreadyRevoked,
    CountersignError,
    DecisionNotAllowed,
    DelegationRefused,
    DigestMismatch,
    NotFound,
    NotWaiting,
    ReviewNotFound,
    RunNotFound,
    StageMoved,
    StandingNotFound,
    UnstorableValue,
)
from storage.records import Decision, Review
from storage.status import DEADLINE, DecisionKind, ReviewKind, ReviewStatus, RunStatus

# --- /crew usage --------------------------------------------------------------------------

USAGE_RUN = '`/crew run NAME key=value key="a quoted value" …`'
USAGE_LIST = "`/crew list`"
USAGE_STATUS = "`/crew status RUN_ID`"
USAGE_CANCEL = "`/crew cancel RUN_ID`"
USAGE_PENDING = "`/crew pending`"
USAGE_HELP = "`/crew help`"
USAGE_AWAY = "`/crew away --until YYYY-MM-DD --to @person`"
USAGE_BACK = "`/crew back`"

USAGE = "\n".join(
    [
        "*Countersign* runs crews that ask a person before they go on.",
        f"• {USAGE_RUN}: start a run; its thread shows every review",
        f"• {USAGE_LIST}: the crews you can run",
        f"• {USAGE_STATUS}: where a run is",
        f"• {USAGE_CANCEL}: stop a run",
        f"• {USAGE_PENDING}: reviews waiting for you",
        f"• {USAGE_AWAY}: while you are away (through that day, UTC), they review for you",
        f"• {USAGE_BACK}: you are back, and review again",
        f"• {USAGE_HELP}: this text",
        'Quote values with spaces: `topic="durable agents"`. '
        "In a review's thread, reply `approve`, `reject: reason`, or write your feedback.",
    ]
)


def command_error(problem: str, usage: str) -> str:
    """A slash-command mistake, with the usage line that shows how to do it."""
    return f"{problem}\nUsage: {usage}"


def unknown_verb(verb: str) -> str:
    return f"I don't know the command {code(verb)}.\n{USAGE}"


def bad_crew_name(name: str) -> str:
    return command_error(
        f"The crew name {code(name)} is not valid: use lowercase letters, digits, `-` and `_`.",
        USAGE_RUN,
    )


MISSING_CREW = command_error("Which crew? Give its name after `run`.", USAGE_RUN)


def not_key_value(token: str) -> str:
    return command_error(f"Give each input as `key=value`: {code(token)} is not one.", USAGE_RUN)


def bad_key(key: str) -> str:
    return command_error(
        f"The input name {code(key)} is not valid: use letters, digits and `_`, and begin "
        "with a letter or `_`.",
        USAGE_RUN,
    )


def duplicate_key(key: str) -> str:
    return command_error(f"The input {code(key)} is given twice.", USAGE_RUN)


def unterminated_quote(key: str) -> str:
    return command_error(f"The quoted value of {code(key)} has no closing quote.", USAGE_RUN)


def missing_run_id(usage: str) -> str:
    return command_error("Which run? Give its id (it is in the run's thread).", usage)


def bad_run_id(run_id: str, usage: str) -> str:
    return command_error(f"That is not a run id: {code(run_id)}.", usage)


def away_options(problem: str) -> str:
    """A ``/crew away`` without its date or its delegate, or with something else."""
    return command_error(problem, USAGE_AWAY)


AWAY_NEEDS_UNTIL = away_options("Until when? Give the last day you are away after `--until`.")
AWAY_NEEDS_MENTION = away_options(
    "Who reviews for you? Mention them after `--to`, e.g. `--to @ben`."
)


def away_extra(token: str) -> str:
    return away_options(f"I don't know what {code(token)} means here.")


def no_arguments(verb: str, usage: str) -> str:
    return command_error(f"The command {code('/crew ' + verb)} takes no arguments.", usage)


# --- ephemeral answers to people ----------------------------------------------------------

NOT_A_REVIEWER = "You are not a reviewer of this run."
CHECK_FAILED = (
    "I couldn't ask Slack whether you are a reviewer of this run, so I did nothing. "
    "Please try again in a moment."
)

REVIEWER_CHECK_FAILED = (
    "I couldn't ask Slack about the reviewer you named, so nothing was started. "
    "Please try again in a moment."
)


def reviewer_not_mentioned(crew: str, name: str) -> str:
    return (
        f"Crew {code(crew)} takes its reviewer from {code(name)}: mention one person there, "
        f"as in {code(name + '=@dana')}. Nothing was started."
    )


_NOT_A_PERSON = {
    "unknown": "Slack does not know them",
    "deleted": "their account is deactivated",
    "bot": "that is a bot",
}


def not_a_person(user: str, why: str, name: str) -> str:
    return (
        f"{user_ref(user)} cannot review this run: {_NOT_A_PERSON[why]}. Mention someone else "
        f"as {code(name)}. Nothing was started."
    )


def not_a_delegate(user: str, why: str) -> str:
    return f"{user_ref(user)} cannot review for you: {_NOT_A_PERSON[why]}. Nothing changed."


DELEGATE_CHECK_FAILED = (
    "I couldn't ask Slack about the person you named, so nothing changed. "
    "Please try again in a moment."
)

REVIEW_GONE = "This review no longer exists."


def reassign_refused(reason: Reason) -> str:
    """Why the person chosen in the Reassign form cannot be given the review (plain text: a
    modal's field error)."""
    match reason:
        case Reason.BOT:
            return "That is a bot, an app or a deactivated account; choose a person."
        case Reason.SAME_PERSON:
            return "That is you: use Claim to take this review yourself, or choose someone else."
        case Reason.OWN_RUN:
            return "They started this run and may not approve it; choose another reviewer."
        case Reason.ALREADY_COUNTED:
            return "They approved this review already; choose a reviewer who has not."
        case _:
            return REASSIGN_NOT_A_REVIEWER


def nobody_decides(configure: str) -> str:
    """Told to whoever starts a run no one could decide: what to configure."""
    return f"Nobody could decide this run's reviews, so nothing was started: {escape(configure)}."


REASSIGN_NOT_A_REVIEWER = (
    "That person may not decide this review now (not a reviewer of this run, or not asked at "
    "the stage of its approval chain it is at); choose another."
)
NOT_THE_REVIEW_MESSAGE = (
    "This button does not belong to the message it was clicked on, so nothing was decided. "
    "Use the buttons of the review's own message, in its run's thread."
)
RUN_GONE = "This run no longer exists."
MODAL_FAILED = "I couldn't open the form. Please try again, or reply in the review's thread."
NOT_RECORDED = (
    "Countersign could not record that just now (its database did not answer), so nothing "
    "was done. Please try again in a moment."
)

TOOL_REPLY_HINT = (
    "To decide on this tool call, reply `approve` or `reject: reason`, or use the buttons."
)


def already_decided(decided: Review | Decision) -> str:
    """Someone clicked after the first decision won (double click, racing reviewers).

    Given a review that is no longer pending but has no decision (cancelled, superseded),
    says that instead.
    """
    if isinstance(decided, Review):
        if decided.decision is None:
            return review_closed(decided.status)
        decided = decided.decision
    decision = decided
    return _decided_by(decision.decided_by, decision.kind.value, decision.created_at)


# Why a review that is not pending has no decision.
_CLOSED = {
    ReviewStatus.CANCELLED.value: "its run was cancelled",
    ReviewStatus.SUPERSEDED.value: "the crew changed since it was asked",
}


def review_closed(status: ReviewStatus | str) -> str:
    why = _CLOSED.get(status.value if isinstance(status, ReviewStatus) else status)
    return f"This review is no longer open: {why}." if why else "This review is no longer open."


def too_late(exc: AlreadyDecided) -> str:
    """:func:`already_decided` from storage's ``AlreadyDecided`` (a lost compare-and-set)."""
    if exc.by is None:
        return review_closed(exc.status)
    return _decided_by(exc.by, exc.kind, exc.at)


# What a decision did to its review, after "This review was already …".
_DECIDED = {
    DecisionKind.APPROVE.value: "approved",
    DecisionKind.EDIT.value: "approved with edits",
    DecisionKind.CHANGES.value: "sent back for changes",
    DecisionKind.REJECT.value: "rejected",
    DecisionKind.ANSWER.value: "answered",
}


def _decided_by(by: str, kind: str | None, at: datetime | None) -> str:
    when = f" at {slack_date(at)}" if at else ""
    if kind == DecisionKind.EXPIRE.value:
        return f"This review already expired{when}: nobody answered in time."
    if by == DEADLINE:
        return f"This review was already approved by its deadline{when}: nobody answered in time."
    what = _DECIDED.get(kind or "", "decided")
    return f"This review was already {what} by {user_ref(by)}{when}."


def approval_counted(given: int, required: int) -> str:
    """Told to a reviewer whose approval counted but did not settle the review."""
    more = required - given
    who = "reviewer approves" if more == 1 else "reviewers approve"
    return (
        f"Your approval is counted ({given} of {required}). The run goes on once {more} more {who}."
    )


def approval_counted_at_stage(stage: str, given: int, required: int, next_stage: str | None) -> str:
    """Told to a reviewer whose approval counted at a stage of an approval chain: it passed
    the stage (``next_stage`` is asked now) or the stage needs more."""
    if next_stage is not None:
        return (
            f"Your approval passed the {escape(stage)} stage: the {escape(next_stage)} stage "
            "is asked now."
        )
    more = required - given
    who = "reviewer approves" if more == 1 else "reviewers approve"
    return (
        f"Your approval is counted at the {escape(stage)} stage ({given} of {required}). "
        f"It passes once {more} more {who}."
    )


def not_your_stage(
    stage: str, number: int, count: int, reviewers: Iterable[str], later: str | None
) -> str:
    """Told to someone who may not decide a review at the stage of its approval chain it is
    at: whose turn it is, and theirs if they are asked later."""
    who = " or ".join(mention(r) for r in reviewers)
    said = (
        f"This review is at its {escape(stage)} stage ({number} of {count}): {who} decide it now."
    )
    if later is not None:
        said += f" You are asked at the {escape(later)} stage, after it."
    return said + " Nothing was recorded."


def starting(crew: str) -> str:
    """The ``/crew run`` ack: sent before Slack has been asked to post the thread, so it
    promises no thread, and says what happens if Slack refuses one."""
    return (
        f"Starting {code(crew)}… I'll post its thread in this channel. If Slack refuses it "
        "(Countersign is not in this channel, say), I'll DM you what to do instead."
    )


def away(delegate: str, until: datetime) -> str:
    return (
        f"While you are away, until {slack_date(until)}, {user_ref(delegate)} reviews for "
        "you: your reviews, reminders and pending list go to them. `/crew back` ends it sooner."
    )


def back(delegate: str | None) -> str:
    if delegate is None:
        return "You were not away, so nothing changed."
    return f"Welcome back: your reviews no longer go to {user_ref(delegate)}."


def cancelled(run_id: str, user: str | None) -> str:
    return f"Run {code(run_id)} was cancelled by {user_ref(user)}."


def not_found(exc: NotFound) -> str:
    """Storage's ``NotFound``: the run or review asked for, by the id the person gave."""
    if isinstance(exc, RunNotFound):
        return f"I can't find the run {code(exc.run_id)}. Its id is in the run's thread."
    if isinstance(exc, ReviewNotFound):
        return f"I can't find the review {code(exc.review_id)}."
    if isinstance(exc, StandingNotFound):
        return f"I can't find the standing approval {code(exc.standing_id)}."
    return "I can't find that."


def already_final(run_id: str, status: str) -> str:
    known = {s.value: word for s, word in RUN_STATUS.items()}
    word = known.get(status, status)
    return f"Run {code(run_id)} is already over ({escape(word)})."


def reply_hint(kind: ReviewKind) -> str:
    """Said to a person whose thread reply is not a decision for this kind of review."""
    return TOOL_REPLY_HINT if kind is ReviewKind.TOOL_APPROVAL else REPLY_HINT[kind]


# What a run is doing while nothing of it waits for a person.
_RUN_DOING = {
    RunStatus.QUEUED: "it is queued and goes on shortly",
    RunStatus.RUNNING: "its crew is working",
    RunStatus.WAITING: "it is waiting",
    RunStatus.SUCCEEDED: "it has finished",
    RunStatus.FAILED: "it failed",
    RunStatus.CANCELLED: "it was cancelled",
    RunStatus.REJECTED: "it was rejected",
}


def nothing_pending(status: RunStatus) -> str:
    """Said to a person who replied in a run's thread while nothing in it waits for them."""
    return (
        f"Nothing in this run waits for an answer now ({_RUN_DOING[status]}), so your reply "
        "was not passed on. When the crew asks something, its question shows up here."
    )


def unknown_crew(name: str, crews: list[str]) -> str:
    known = ", ".join(code(crew) for crew in sorted(crews)) or "none"
    return f"There is no crew named {code(name)}. Crews: {known}."


def wrong_channel(crew: str, channel: str) -> str:
    return f"Runs of {code(crew)} can only be started in {channel_ref(channel)}."


# --- in a modal: notices and field errors (plain text) ------------------------------------

LOADING = "Loading the review…"

LOADING_RUN = "Loading the run…"

NOTHING_TO_REVISE = (
    "No task of this run can be revised now: only tasks already approved can, and only "
    "while the run waits for a review."
)

EMPTY_TEXT = "Please write something here."

CHOOSE_TASK = "Choose the task to revise."

ARG_REQUIRED = "This is required."


def arg_problem(kinds: tuple[str, ...]) -> str:
    """Why an argument was refused; ``()`` means it is required and was left empty."""
    return f"This must be {arg_types(kinds)}." if kinds else ARG_REQUIRED


# --- refusals -----------------------------------------------------------------------------


def refusal(exc: CountersignError) -> str:
    """What a person is told when Countersign refused what they asked (mrkdwn, escaped).

    Every expected failure has its words here; the exception's own message (written for the
    command line and the logs) reaches Slack only for a plain ``UsageError``, escaped.
    """
    match exc:
        case InputsRefused(unknown=[_, *_]):
            names = _and(code(name) for name in exc.unknown)
            return f"Crew {code(exc.crew)} does not take {names}. It takes {escape(exc.taken)}."
        case InputsRefused():
            names = _and(code(name) for name in exc.missing)
            each = "it" if len(exc.missing) == 1 else "each"
            example = code(f"{exc.missing[0]}=value")
            return f"Crew {code(exc.crew)} needs {names}. Give {each} as {example}."
        case TextRefused():
            return _sentence(f"{exc.what} {exc.reason}") + " Nothing was recorded."
        case EditRefused():
            return f"That edit does not fit the {escape(exc.what)}: {truncate(exc.problem, 500)}."
        case NothingToReopen():
            approved = _and(map(str, exc.approved))
            which = f"Approved so far: {approved}." if approved else "No task is approved yet."
            return f"Task {exc.task} has no approved draft to send back. {which}"
        case AlreadyDecided():
            return too_late(exc)
        case AlreadyApproved():
            return (
                f"You approved this already ({exc.given} of {exc.required} approvals): "
                "each reviewer counts once."
            )
        case NotYourStage():
            return not_your_stage(exc.stage, exc.number, exc.count, exc.reviewers, exc.later)
        case DigestMismatch():
            now = f"`{exc.pending[:12]}`" if exc.pending else "none"
            return (
                f"This card was for action `{escape(exc.expected[:12])}`, but the review's "
                f"action is {now} now: look at it again before you decide. "
                "Nothing was recorded."
            )
        case StageMoved():
            return (
                f"The {escape(exc.at)} stage was passed already: this review is at its "
                f"{escape(exc.now)} stage now. Nothing was recorded."
            )
        case SelfApproval():
            return (
                "You started this run, and its crew needs someone else to approve its reviews. "
                "Nothing was recorded."
            )
        case NobodyDecides():
            return nobody_decides(exc.configure)
        case CouldNotCheck():
            return CHECK_FAILED
        case NotAReviewer(action="claim" | "reassign"):
            return f"{user_ref(exc.person)} is not a reviewer of this run. Nothing was recorded."
        case NotAReviewer():
            return NOT_A_REVIEWER
        case AlreadyFinal():
            return already_final(exc.run_id, exc.status)
        case AlreadyRevoked():
            return (
                f"{user_ref(exc.by)} revoked this standing approval already "
                f"({slack_date(exc.at)}): later calls are reviewed."
            )
        case NotWaiting():
            return f"Run {code(exc.run_id)} is not waiting for a review any more."
        case DecisionNotAllowed():
            return "That decision does not fit this review; use its buttons."
        case NotFound():
            return not_found(exc)
        case DelegationRefused():
            return _sentence(f"Your reviews cannot go to them: {exc.reason}") + " Nothing changed."
        case UnstorableValue():
            return "That text could not be stored: the database refused it. Nothing was recorded."
        case ConfigError():
            return "Countersign's configuration has a problem with that crew (the bot logs it)."
        case PayloadError():
            return "Slack sent this in a form I can't read, so nothing was done."
        case UsageError():
            return _sentence(str(exc))
        case _:
            return "Countersign could not do that, so nothing was done."


# Slack's own markup in our mrkdwn: a mention, a channel, a date with its fallback text.
_SLACK_MARKUP = re.compile(r"<[@#!][^|>]*(?:\|([^>]*))?>")


def refusal_in_form(exc: CountersignError) -> str:
    """:func:`refusal` for a modal's field error, which Slack shows as plain text: no code
    marks, a date by its UTC text, a person as "a reviewer" (a mention would show as its id)."""
    said = _SLACK_MARKUP.sub(lambda ref: ref.group(1) or "a reviewer", refusal(exc))
    return unescape(said).replace("`", "")[:150]


def _and(words: Iterable[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    *rest, last = [*words] or [""]
    return f"{', '.join(rest)} and {last}" if rest else last


def _sentence(words: str) -> str:
    """``words`` escaped, as a sentence: a capital first, a full stop last."""
    said = escape(" ".join(words.split()).rstrip("."))
    return said[:1].upper() + said[1:] + "." if said else "That could not be done."


# --- the demo's sandbox ----------------------------------------------------------------------


def demo_welcome(crew: str | None, inputs: Iterable[str]) -> str:
    """The sandbox's first message: how to start the configuration's first crew (names
    from the configuration, escaped in code spans)."""
    head = (
        "*Welcome to the Countersign sandbox.* This page plays Slack: the bot on the other "
        "side is the real one, reached with signed requests.\n"
    )
    tail = "`/crew list` shows every crew, `/crew help` every command."
    if crew is None:
        return f"{head}The configuration has no crew yet. {tail}"
    given = " ".join(f"{name}={'otters' if name == 'topic' else '…'}" for name in inputs)
    start = code(f"/crew run {crew} {given}".strip())
    return f"{head}Try {start}, then review what it drafts in the thread. {tail}"
