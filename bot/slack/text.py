"""Every word the bot says to a person in Slack, in one place.

Why one module: wording is reviewed, translated and kept consistent in one sitting, and
the parsers and Block Kit builders stay about structure. Everything here returns mrkdwn
that is safe to post: text that came from a person, an LLM or the configuration goes
through :func:`escape` before it lands in a string, so ``<!channel>`` in a draft or a
command argument never pings anyone (Slack's "Escaping text"). Mentions, channel
links and dates are built here, by our code, after escaping.

Nothing here does I/O. Times from storage are naive UTC. Use it as a vocabulary:
``from bot.slack import text`` then ``text.NOT_A_REVIEWER``, ``text.wrong_channel(...)``.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from datetime import UTC, datetime

from bot.slack.payloads import REVISE
from crew_runtime import streams
from crew_runtime.config import ConfigError
from crew_runtime.errors import EditRefused, InputsRefused, NothingToReopen, TextRefused
from storage.errors import (
    AlreadyDecided,
    AlreadyFinal,
    CountersignError,
    DecisionNotAllowed,
    NotFound,
    NotWaiting,
    UnstorableValue,
)
from storage.records import Decision, Review, Run
from storage.status import DecisionKind, ReviewKind, ReviewStatus, RunNote, RunStatus

# --- mechanics ----------------------------------------------------------------------------

_USER_ID = re.compile(r"[UW][A-Z0-9]{2,20}")
_CHANNEL_ID = re.compile(r"[CGD][A-Z0-9]{2,20}")
ELLIPSIS = "…"


def escape(text: str) -> str:
    """Neutralise Slack's control characters: ``&``, ``<`` and ``>``, and only those.

    Slack decodes exactly these three entities (api.slack.com formatting reference,
    "Escaping text"); anything more would show up literally. ``&`` goes first so the
    entities we add are not escaped again.

    >>> escape("<!channel> a&b")
    '&lt;!channel&gt; a&amp;b'
    """
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def unescape(text: str) -> str:
    """Undo :func:`escape` (Slack sends typed ``&``, ``<``, ``>`` this way); ``&amp;`` last."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def truncate(text: str, limit: int) -> str:
    """``text`` escaped, cut so the escaped result fits ``limit`` chars, with ``…`` if cut.

    Cuts the raw text, never an entity in the middle, so ``&amp;`` cannot become ``&am``.
    """
    escaped = escape(text)
    if len(escaped) <= limit:
        return escaped
    out: list[str] = []
    used = 0
    for char in text:
        piece = escape(char)
        if used + len(piece) > limit - 1:
            break
        out.append(piece)
        used += len(piece)
    return "".join(out) + ELLIPSIS


def code(value: str) -> str:
    """An id or name in inline code; backticks removed so they cannot end the span early."""
    return "`" + escape(value.replace("`", "'")) + "`"


def user_ref(user: str | None) -> str:
    """``<@U123>`` for a Slack user id; anything else (``cli:alice``, ``clock``) as text."""
    if user is None:
        return "someone"
    if _USER_ID.fullmatch(user):
        return f"<@{user}>"
    return escape(user)


def channel_ref(channel: str) -> str:
    """``<#C123>`` for a channel id, else the name as text."""
    if _CHANNEL_ID.fullmatch(channel):
        return f"<#{channel}>"
    return escape(channel if channel.startswith("#") else f"#{channel}")


def slack_date(moment: datetime) -> str:
    """A date Slack shows in each reader's time zone, with a UTC fallback for old clients."""
    aware = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    fallback = aware.strftime("%Y-%m-%d %H:%M UTC")
    return f"<!date^{int(aware.timestamp())}^{{date_short_pretty}} {{time}}|{fallback}>"


# --- /crew usage ----------------------------------------------------------------------------

USAGE_RUN = '`/crew run NAME key=value key="a quoted value" …`'
USAGE_LIST = "`/crew list`"
USAGE_STATUS = "`/crew status RUN_ID`"
USAGE_CANCEL = "`/crew cancel RUN_ID`"
USAGE_PENDING = "`/crew pending`"
USAGE_HELP = "`/crew help`"

USAGE = "\n".join(
    [
        "*Countersign* runs crews that ask a person before they go on.",
        f"• {USAGE_RUN}: start a run; its thread shows every review",
        f"• {USAGE_LIST}: the crews you can run",
        f"• {USAGE_STATUS}: where a run is",
        f"• {USAGE_CANCEL}: stop a run",
        f"• {USAGE_PENDING}: reviews waiting for you",
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
        f"{code(name)} is not a crew name (lowercase letters, digits, `-` and `_`).", USAGE_RUN
    )


MISSING_CREW = command_error("Which crew? Give its name after `run`.", USAGE_RUN)


def not_key_value(token: str) -> str:
    return command_error(f"Expected `key=value`, got {code(token)}.", USAGE_RUN)


def bad_key(key: str) -> str:
    return command_error(
        f"{code(key)} is not an input name (letters, digits and `_`, not starting with a digit).",
        USAGE_RUN,
    )


def duplicate_key(key: str) -> str:
    return command_error(f"The input {code(key)} is given twice.", USAGE_RUN)


def unterminated_quote(key: str) -> str:
    return command_error(f"The quoted value of {code(key)} has no closing quote.", USAGE_RUN)


def missing_run_id(usage: str) -> str:
    return command_error("Which run? Give its id (it is in the run's thread).", usage)


def bad_run_id(run_id: str, usage: str) -> str:
    return command_error(f"{code(run_id)} is not a run id.", usage)


def no_arguments(verb: str, usage: str) -> str:
    return command_error(f"`{verb}` takes no arguments.", usage)


# --- ephemeral answers to people ----------------------------------------------------------

NOT_A_REVIEWER = "You are not a reviewer of this run."
CHECK_FAILED = (
    "I couldn't ask Slack whether you are a reviewer of this run, so I did nothing. "
    "Please try again in a moment."
)
NOT_ALLOWED_TO_START = "You are not allowed to start this crew."
NOT_ALLOWED_TO_CANCEL = (
    "Only the person who started this run or one of its reviewers can cancel it."
)
TEXT_REQUIRED = "Please write something here."
EMPTY_TEXT = TEXT_REQUIRED
REVIEW_GONE = "This review no longer exists."
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
SOMETHING_WENT_WRONG = "Something went wrong on our side. Please try again in a moment."
NO_PENDING = "Nothing is waiting for a review. :tada:"
NO_CREWS = "No crews are configured yet."
TOOL_REPLY_HINT = (
    "To decide on this tool call, reply `approve` or `deny: reason`, or use the buttons."
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


def review_closed(status: ReviewStatus) -> str:
    return f"This review is no longer open ({status.value})."


def too_late(exc: AlreadyDecided) -> str:
    """:func:`already_decided` from storage's ``AlreadyDecided`` (a lost compare-and-set)."""
    if exc.by is None:
        return f"This review is no longer open ({escape(exc.status)})."
    return _decided_by(exc.by, exc.kind, exc.at)


def _decided_by(by: str, kind: str | None, at: datetime | None) -> str:
    what = f" ({escape(kind)})" if kind else ""
    when = f" at {slack_date(at)}" if at else ""
    return f"This review was already decided by {user_ref(by)}{what}{when}."


def starting(crew: str) -> str:
    return f"Starting {code(crew)}… its thread appears in this channel in a moment."


def cancelled(run_id: str, user: str | None) -> str:
    return f"Run {code(run_id)} was cancelled by {user_ref(user)}."


def not_found(detail: str) -> str:
    """Storage's ``NotFound`` message (``no run with id 'x'``) as a sentence."""
    detail = escape(detail.strip().rstrip("."))
    return (detail[:1].upper() + detail[1:] + ".") if detail else "I can't find that."


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


def review_not_found(review_id: str) -> str:
    return f"I can't find the review {code(review_id)}."


def run_not_found(run_id: str) -> str:
    return f"I can't find the run {code(run_id)}. Its id is in the run's thread."


def unknown_crew(name: str, crews: list[str]) -> str:
    known = ", ".join(code(crew) for crew in sorted(crews)) or "none"
    return f"There is no crew named {code(name)}. Crews: {known}."


def wrong_channel(crew: str, channel: str) -> str:
    return f"{code(crew)} runs can only be started in {channel_ref(channel)}."


def decision_not_allowed(action: DecisionKind, kind: ReviewKind) -> str:
    return f"You can't {action_verb(action)} {REVIEW_NOUN[kind]}."


def run_started(run: Run) -> str:
    return f"Started {code(run.crew)} run {code(run.id)}; follow it in its thread."


def run_cancelled(run: Run) -> str:
    return f"Cancelled run {code(run.id)}."


# --- statuses and decisions -----------------------------------------------------------------

RUN_STATUS = {
    RunStatus.QUEUED: "⏳ Queued",
    RunStatus.RUNNING: "⚙️ Running",
    RunStatus.WAITING: "👀 Waiting for review",
    RunStatus.SUCCEEDED: "✅ Succeeded",
    RunStatus.FAILED: "❌ Failed",
    RunStatus.CANCELLED: "🚫 Cancelled",
    RunStatus.REJECTED: "⛔ Rejected",
}

REVIEW_STATUS = {
    ReviewStatus.PENDING: "👀 Pending",
    ReviewStatus.DECIDED: "Decided",
    ReviewStatus.CANCELLED: "🚫 Cancelled",
    ReviewStatus.SUPERSEDED: "↩️ Superseded (the crew changed since)",
}

REVIEW_NOUN = {
    ReviewKind.QUESTION: "a question",
    ReviewKind.TASK_REVIEW: "a task review",
    ReviewKind.TOOL_APPROVAL: "a tool approval",
}

_DECISION_HEAD = {
    DecisionKind.APPROVE: "✅ Approved by",
    DecisionKind.EDIT: "✏️ Approved with edits by",
    DecisionKind.CHANGES: "🔁 Changes requested by",
    DecisionKind.REJECT: "⛔ Rejected by",
    DecisionKind.ANSWER: "💬 Answered by",
}

_ACTION_VERB = {
    DecisionKind.APPROVE: "approve",
    DecisionKind.EDIT: "edit",
    DecisionKind.CHANGES: "request changes on",
    DecisionKind.REJECT: "reject",
    DecisionKind.ANSWER: "answer",
}


def action_verb(action: DecisionKind) -> str:
    return _ACTION_VERB.get(action, escape(action))


# A waiting run says what for: the kind of review it waits on (one kind; mixed ones are
# reviews).
WAITING_FOR = {
    ReviewKind.QUESTION: "💬 Waiting for an answer",
    ReviewKind.TASK_REVIEW: "👀 Waiting for review",
    ReviewKind.TOOL_APPROVAL: "👀 Waiting for approval",
}


def run_status(status: RunStatus, waiting_on: Collection[ReviewKind] = ()) -> str:
    """The status word with its emoji, e.g. ``✅ Succeeded``; a waiting run's by what it waits
    on (``waiting_on``, the kinds of its pending reviews), e.g. ``💬 Waiting for an answer``."""
    kinds = set(waiting_on)
    if status is RunStatus.WAITING and len(kinds) == 1:
        return WAITING_FOR[kinds.pop()]
    return RUN_STATUS[status]


def decision_line(decision: Decision, *, text_limit: int = 0) -> str:
    """``✅ Approved by <@U1>`` and, with ``text_limit``, ``: the feedback`` (escaped, cut)."""
    if decision.kind is DecisionKind.EXPIRE:
        line = "⌛ Expired: nobody answered in time"
    else:
        line = f"{_DECISION_HEAD[decision.kind]} {user_ref(decision.decided_by)}"
    if text_limit and decision.text and decision.kind is not DecisionKind.EDIT:
        line += ": " + truncate(" ".join(decision.text.split()), text_limit)
    return line


# --- what the bot posts in a run's thread ----------------------------------------------------

REVIEW_TITLE = {
    ReviewKind.QUESTION: "Question",
    ReviewKind.TASK_REVIEW: "Review",
    ReviewKind.TOOL_APPROVAL: "Approve tool call",
}

BUTTON = {
    DecisionKind.APPROVE: "Approve",
    DecisionKind.EDIT: "Edit",
    DecisionKind.CHANGES: "Request changes",
    DecisionKind.REJECT: "Reject",
    DecisionKind.ANSWER: "Answer",
}
REVISE_BUTTON = "Revise an earlier task"

REJECT_CONFIRM_TITLE = "Reject?"
# What a rejection does, said before it is made: a rejected draft stops the run, a denied
# tool call is reported to the agent, which carries on without it.
REJECT_CONFIRM_TEXT = {
    ReviewKind.TASK_REVIEW: "Rejecting stops this run.",
    ReviewKind.TOOL_APPROVAL: (
        "The call is not made. The agent is told it was denied (and your reason, if you "
        "give one) and carries on without it."
    ),
}
REJECT_CONFIRM_YES = "Reject"
REJECT_CONFIRM_NO = "Keep reviewing"

REPLY_HINT = {
    ReviewKind.QUESTION: "Or reply in this thread with your answer.",
    ReviewKind.TASK_REVIEW: (
        "Or reply in this thread: `approve`, `reject: reason`, or the changes you want."
    ),
    ReviewKind.TOOL_APPROVAL: "Or reply in this thread: `approve` or `deny: reason`.",
}

EMPTY_DRAFT = "_(empty)_"


def review_fallback(crew: str, kind: ReviewKind) -> str:
    """Notification text: short and free of LLM text, so a push never carries a ping."""
    ask = {
        ReviewKind.QUESTION: "has a question for you",
        ReviewKind.TASK_REVIEW: "has a draft for your review",
        ReviewKind.TOOL_APPROVAL: "asks to run a tool",
    }[kind]
    return f"{escape(crew)} {ask}"


def part_label(part: int, parts: int) -> str:
    return f"Draft, part {part} of {parts}"


def file_note(filename: str, length: int) -> str:
    return f"The full draft ({length:,} characters) is attached as {code(filename)}."


def file_note_attached(length: int) -> str:
    return f"The full draft ({length:,} characters) is attached in this thread."


def edit_truncated_note(length: int, limit: int) -> str:
    return (
        f"This text has {length:,} characters; only the first {limit:,} fit in this box, and "
        "what you submit replaces all of it. For a long draft, request changes instead."
    )


def review_ref(review_id: str, run_id: str) -> str:
    return f"Review {code(review_id)} · run {code(run_id)}"


def run_ref(run_id: str) -> str:
    return f"Run {code(run_id)}"


def run_title(crew: str, status: RunStatus, waiting_on: Collection[ReviewKind] = ()) -> str:
    return f"*{escape(crew)}* · {run_status(status, waiting_on)}"


def started_by(user: str | None, at: datetime) -> str:
    return f"Started by {user_ref(user)} · {slack_date(at)}"


def run_fallback(crew: str, status: RunStatus, waiting_on: Collection[ReviewKind] = ()) -> str:
    return f"{escape(crew)} run: {run_status(status, waiting_on)}"


def result_title(crew: str, status: RunStatus) -> str:
    return {
        RunStatus.SUCCEEDED: f"✅ *{escape(crew)}* finished. Result:",
        RunStatus.FAILED: f"❌ *{escape(crew)}* failed:",
        RunStatus.REJECTED: f"⛔ *{escape(crew)}* stopped: a reviewer rejected it.",
        RunStatus.CANCELLED: f"🚫 *{escape(crew)}* was cancelled.",
    }.get(status, run_title(crew, status))


def rejected_by(crew: str, user: str) -> str:
    return f"⛔ *{escape(crew)}* stopped: {user_ref(user)} rejected it."


def result_part(part: int, parts: int) -> str:
    return f"Result, part {part} of {parts}"


def output_cut(remaining: int, run_id: str) -> str:
    return (
        f"… {remaining:,} more characters not shown here; the full output is stored "
        f"with run {code(run_id)}."
    )


NO_OUTPUT = "_(the crew returned no output)_"
REASON = "Reason"
DIVERGED = (
    "⚠️ The crew's code or model changed since this run paused, so it no longer matches "
    "its recording. It continues live from here."
)


def divergence_fallback() -> str:
    return "⚠️ This run continues live: the crew changed since it paused."


# Said once in a run's thread when the runtime asks (storage.status.RunNote).
RUN_NOTES: dict[RunNote, str] = {
    RunNote.OFFLINE_MODEL: (
        ":information_source: This run uses Countersign's offline scripted model: its drafts "
        "are canned and follow your feedback. Set "
        f"{code('COUNTERSIGN_LLM')} (e.g. {code('openai/gpt-4o-mini')}) and the provider's "
        "API key to use a real model."
    ),
}


def pending_title(count: int) -> str:
    return f"*{count} review{'s' if count != 1 else ''} waiting*"


def more_not_shown(count: int) -> str:
    return f"…and {count} more."


CREWS_TITLE = "*Crews you can run*"


# --- modals ---------------------------------------------------------------------------------

MODAL_TITLE = {
    DecisionKind.EDIT: "Edit and approve",
    DecisionKind.CHANGES: "Request changes",
    DecisionKind.REJECT: "Reject",
    DecisionKind.ANSWER: "Answer",
    REVISE: "Revise an earlier task",
}
MODAL_SUBMIT = {
    DecisionKind.EDIT: "Approve edit",
    DecisionKind.CHANGES: "Send",
    DecisionKind.REJECT: "Reject",
    DecisionKind.ANSWER: "Send answer",
    REVISE: "Revise",
}
MODAL_CLOSE = "Cancel"
MODAL_LABEL = {
    DecisionKind.EDIT: "The text to approve",
    DecisionKind.CHANGES: "What should change?",
    DecisionKind.REJECT: "Reason",
    DecisionKind.ANSWER: "Your answer",
    REVISE: "What should change in it?",
}
MODAL_LABEL_ARGS = "The arguments to run the tool with (JSON)"


def modal_label_output(model: str) -> str:
    """The edit box of a typed task's draft (plain text)."""
    return f"The output to approve, as JSON of {model}"[:2000]


def output_hint(fields: list[str]) -> str:
    """Under a typed draft's edit box (plain text): the fields the JSON may hold."""
    return f"Fields: {', '.join(fields)}." if fields else "A JSON value of the task's type."


def draft_not_typed(model: str, problem: str) -> str:
    """Above a typed task's draft that is not JSON of its model (mrkdwn, escaped here)."""
    return (
        f"_This draft is not JSON of {escape(model)} ({truncate(problem, 500)}). Approve it and "
        "CrewAI converts it, or Edit to give the object yourself._"
    )


def edit_refused(reason: str) -> str:
    """Above a draft reviewed again because the reviewer's edit was not taken (mrkdwn)."""
    return f":warning: *The last edit was not used:* {truncate(reason, 1000)}"


MODAL_PLACEHOLDER_DENY = "Optional: why not; the agent is told and carries on"
MODAL_PLACEHOLDER = {
    DecisionKind.EDIT: "Edit the text",
    DecisionKind.CHANGES: "Say what to change; the agent revises its draft.",
    DecisionKind.REJECT: "Optional: why the run should stop",
    DecisionKind.ANSWER: "Your answer goes back to the agent.",
    REVISE: "Your feedback goes to the agent with the draft you approved.",
}

# A tool call's edit modal: one input per argument.
TOOL = "Tool"
TASK = "Task"
ARGUMENTS = "Arguments"
BOOLEAN = {"true": "true", "false": "false"}
ARG_REQUIRED = "Required."
_ARG_TYPE = {
    "string": "text",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "array": "a JSON array, like [1, 2]",
    "object": 'a JSON object, like {"key": 1}',
    "null": "null",
}


def _arg_types(kinds: tuple[str, ...]) -> str:
    words = [_ARG_TYPE.get(kind, escape(kind)) for kind in dict.fromkeys(kinds)]
    return " or ".join(words) if words else "JSON, or text"


def arg_hint(kinds: tuple[str, ...], description: str = "") -> str:
    """Under an argument's input (plain text): what it is for and what it must hold."""
    hint = f"Expected: {_arg_types(kinds)}."
    return f"{' '.join(description.split())} · {hint}" if description.strip() else hint


def arg_problem(kinds: tuple[str, ...]) -> str:
    """Why an argument was refused; ``()`` means it is required and was left empty."""
    return f"Expected {_arg_types(kinds)}." if kinds else ARG_REQUIRED


def arg_cut_note(length: int, limit: int) -> str:
    return f"This value has {length:,} characters; only the first {limit:,} fit in this box."


# Re-opening an earlier task.
REVISE_EXPLAINED = (
    "The run goes back to the task you choose: its agent revises the draft you approved "
    "with your feedback, you review it again, and every later task runs again after it."
)
REVISE_TASK_LABEL = "Task to revise"
REVISE_TASK_PLACEHOLDER = "Choose an approved task"
CHOOSE_TASK = "Choose the task to revise."
NOTHING_TO_REVISE = (
    "No task of this run can be revised now: only tasks already approved can, and only "
    "while the run waits for a review."
)
LOADING_RUN = "Loading the run…"


def task_option(index: int, label: str) -> str:
    """A task in the list of revisable ones (plain text); the runtime's label names it."""
    return " ".join(label.split()) or f"Task {index + 1}"


def mention(ref: str) -> str:
    """A reviewer reference from the config: a user (``<@U…>``) or a user group."""
    if ref.startswith("S"):
        return f"<!subteam^{escape(ref)}>"
    return user_ref(ref)


def reminder(review: Review, reviewers: tuple[str, ...]) -> str:
    who = " ".join(mention(r) for r in reviewers) or "Reviewers"
    return f"⏰ {who}: {REVIEW_NOUN[review.kind]} in this thread is still waiting for a decision."


def escalation(review: Review, escalate_to: tuple[str, ...]) -> str:
    who = " ".join(mention(r) for r in escalate_to) or "Reviewers"
    return (
        f"🚨 {who}: {REVIEW_NOUN[review.kind]} in this thread has waited past its escalation "
        "time; please decide or pass it on."
    )


LOADING_TITLE = "Countersign"
LOADING = "Loading the review…"


def task_reopened(review: Review) -> str:
    """Said in the thread when a reviewer sends an approved task back to its agent."""
    decision = review.decision
    who = user_ref(decision.decided_by if decision else None)
    index = streams.task_index(review.stream)
    task = f"task {index + 1}" if index is not None else "an earlier task"
    feedback = truncate(decision.text or "", 1500) if decision else ""
    return (
        f"↩️ {who} reopened {task}; it is being revised, then every later task runs "
        f"again.\n>{feedback}"
    )


# --- refusals -----------------------------------------------------------------------------


def refusal(exc: CountersignError) -> str:
    """What a person is told when Countersign refused what they asked (mrkdwn, escaped).

    Every expected failure has its words here; the exception's own message (written for the
    command line and the logs) reaches Slack only for a plain ``UsageError``, escaped.
    """
    match exc:
        case InputsRefused(unknown=[_, *_]):
            names = ", ".join(code(name) for name in exc.unknown)
            return f"{code(exc.crew)} does not take {names}. It takes {escape(exc.taken)}."
        case InputsRefused():
            names = ", ".join(code(name) for name in exc.missing)
            example = code(f"{exc.missing[0]}=…")
            return f"{code(exc.crew)} needs {names}: give each as {example}."
        case TextRefused():
            return _sentence(f"{exc.what} {exc.reason}") + " Nothing was recorded."
        case EditRefused():
            return f"That edit does not fit the {escape(exc.what)}: {truncate(exc.problem, 500)}."
        case NothingToReopen():
            approved = ", ".join(map(str, exc.approved)) or "none yet"
            return f"Task {exc.task} has no approved draft to send back (approved: {approved})."
        case AlreadyDecided():
            return too_late(exc)
        case AlreadyFinal():
            return already_final(exc.run_id, exc.status)
        case NotWaiting():
            return f"Run {code(exc.run_id)} is not waiting for a review any more."
        case DecisionNotAllowed():
            return "That decision does not fit this review; use its buttons."
        case NotFound():
            return not_found(str(exc))
        case UnstorableValue():
            return "That text could not be stored: the database refused it. Nothing was recorded."
        case ConfigError():
            return "Countersign's configuration has a problem with that crew (the bot logs it)."
        case _:
            return _sentence(str(exc))


def refusal_in_form(exc: CountersignError) -> str:
    """:func:`refusal` for a modal's field error, which Slack shows as plain text."""
    return unescape(refusal(exc)).replace("`", "")[:150]


def _sentence(words: str) -> str:
    """``words`` escaped, as a sentence: a capital first, a full stop last."""
    said = escape(" ".join(words.split()).rstrip("."))
    return said[:1].upper() + said[1:] + "." if said else "That could not be done."
