"""The words of the messages and modals the bot posts (``bot.slack.blocks``,
``bot.slack.modals``): statuses, review cards, a run's thread, its modals.

Text that came from a person, an LLM or the configuration is escaped here
(``bot.slack.mrkdwn``) wherever it goes into mrkdwn; plain-text fields (labels, hints,
options) take it as it is. What the bot answers a person (replies, refusals) is in
``bot.slack.text``. Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime
from typing import Any

from bot.slack.mrkdwn import (
    channel_ref,
    code,
    escape,
    mention,
    slack_date,
    truncate,
    user_ref,
)
from bot.slack.payloads import REASSIGN, REVISE
from crew_runtime import flow_outcomes, streams
from crew_runtime.digests import short
from storage.details import TaskReviewDetails
from storage.records import Decision, Review
from storage.status import DEADLINE, DecisionKind, ReviewKind, ReviewStatus, RunNote, RunStatus

# --- statuses and decisions ---------------------------------------------------------------

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
    """``✅ Approved by <@U1>`` (and `` · chose `approved``` where the reviewer chose a
    flow's outcome) and, with ``text_limit``, ``: the feedback`` (escaped, cut)."""
    if decision.kind is DecisionKind.EXPIRE:
        line = "⌛ Expired: nobody answered in time"
    elif decision.decided_by == DEADLINE:
        line = "⌛ Approved by its deadline: nobody answered in time"
    else:
        line = f"{_DECISION_HEAD[decision.kind]} {user_ref(decision.decided_by)}"
    if (outcome := flow_outcomes.chosen_name(decision)) is not None:
        line += f" · chose {code(outcome[:150])}"  # a flow's outcome, its author's
    if text_limit and decision.text and decision.kind is not DecisionKind.EDIT:
        line += ": " + truncate(" ".join(decision.text.split()), text_limit)
    return line


def approvals_so_far(approvers: Collection[str], required: int, expected: Collection[str]) -> str:
    """``✅ 1 of 2 approvals: <@U1> · 1 more needed, from <@U2> or <@U3>``."""
    given = ", ".join(user_ref(a) for a in approvers)
    line = f"✅ {len(approvers)} of {required} approvals: {given} · {required - len(approvers)} "
    line += "more needed"
    if expected:
        line += ", from " + " or ".join(mention(r) for r in expected)
    return line


def approvals_given(approvers: Collection[str], stages: Collection[str | None] = ()) -> str:
    """Under a decided review that needed several approvals: who approved it (all of them
    when it was approved; those before the decision when someone rejected it or sent it back),
    each with the stage of its approval chain (``stages``, in the same order) where it had one."""
    given = [user_ref(a) for a in approvers]
    if any(stages):
        given = [f"{ref} ({escape(stage or '')})" for ref, stage in zip(given, stages, strict=True)]
    return "Approvals given: " + ", ".join(given)


def stage_status(number: int, count: int, name: str, given: Collection[str], required: int) -> str:
    """``🔗 Stage 2 of 2 · manager: 1 of 2 approvals (<@U1>)``: where an approval chain
    stands, under the review's buttons (the caller adds who is waited for, and the rest)."""
    line = f"🔗 Stage {number} of {count} · {escape(name)}"
    if given or required > 1:
        line += f": {len(given)} of {required} approvals"
        line += f" ({', '.join(user_ref(a) for a in given)})" if given else ""
    return line


def waiting_for(expected: Collection[str]) -> str:
    """``waiting for <@U2> or <!subteam^S1>``."""
    return "waiting for " + " or ".join(mention(r) for r in expected)


def stage_passed(name: str, approvers: Collection[str]) -> str:
    """``legal approved by <@U0>``."""
    return f"{escape(name)} approved by {', '.join(user_ref(a) for a in approvers)}"


def stage_passed_note(
    passed: str,
    approvers: Collection[str],
    number: int,
    count: int,
    name: str,
    reviewers: Collection[str],
) -> str:
    """Said in the run's thread when a review passes a stage of its approval chain: the next
    stage's reviewers are mentioned."""
    who = " ".join(mention(r) for r in reviewers)
    done = stage_passed(passed, approvers)
    return (
        f"✅ {done[:1].upper()}{done[1:]}. Stage {number} of {count}, "
        f"{escape(name)}: {who}, this review is yours to decide now."
    )


# --- what the bot posts in a run's thread -------------------------------------------------

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
OUTCOMES_LEAD = "*What should the flow do next?* Choose one of its outcomes:"
OUTCOME_TITLE = "Your decision"
OUTCOME_SUBMIT = "Send"
OUTCOME_LABEL = "Feedback"
OUTCOME_PLACEHOLDER_OPTIONAL = "Optional: the flow reads your feedback with your choice."
OUTCOME_PLACEHOLDER_NEEDED = "Say what to change; the flow reads it with your choice."
OUTCOME_GONE = "This review does not offer that choice any more."


def outcome_chosen(outcome: str) -> str:
    """At the top of an outcome's feedback modal (mrkdwn): the outcome, its author's words."""
    return f"You chose {code(outcome[:500])}: the flow goes on with it."


REVISE_BUTTON = "Revise an earlier task"
CLAIM_BUTTON = "Claim"
REASSIGN_BUTTON = "Reassign"


def claimed_line(person: str) -> str:
    """Under a pending review's buttons: who is handling it."""
    return f"Claimed by {mention(person)}"


def claimed_note(by: str, to: str, before: str | None) -> str:
    """Said in the run's thread when a review is claimed, taken over or reassigned."""
    if by != to:
        return f"{mention(by)} reassigned this review to {mention(to)}."
    if before is not None:
        return f"{mention(to)} took this review over from {mention(before)}."
    return f"{mention(to)} claimed this review: they are handling it."


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
    ReviewKind.TOOL_APPROVAL: "Or reply in this thread: `approve` or `reject: reason`.",
}

EMPTY_DRAFT = "_(empty)_"

AGENT = "Agent"


# A tool call's edit modal: one input per argument.
TOOL = "Tool"
TASK = "Task"
ARGUMENTS = "Arguments"
ARGUMENTS_EDITED = "Arguments, as the reviewer edited them"
EDITED_MARK = "_(edited)_"


def args_edited(names: list[str]) -> str:
    """Under an edited tool call's decision: which arguments the edit changed."""
    if not names:
        return "No argument changed."
    listed = ", ".join(code(name[:100]) for name in names)
    return f"Changed: {listed}."


def action_digest(digest: str) -> str:
    """The action digest a decision of this review is bound to, short (a hex digest)."""
    return f"action `{short(digest)}`"


def rule_decided(payload: Mapping[str, Any]) -> str:
    """The thread's one line for a call a rule decided: ``approved by rule `small-payments`:
    amount 42 < 100``; the rule's name and what matched come from the file and the call."""
    verb = "approved" if payload.get("decide") == "approve" else "rejected"
    tool = escape(str(payload.get("tool", "")))
    why = truncate(str(payload.get("why", "")), 300)
    line = f"{tool} {verb} by rule `{escape(str(payload.get('rule', '')))}`: {why}"
    if payload.get("decide") != "approve" and payload.get("reason"):
        line += f" ({truncate(str(payload['reason']), 300)})"
    return line + f" · {action_digest(str(payload.get('digest', '')))}"


def review_round(number: int) -> str:
    """The how-manieth draft of a task this review shows (from 2)."""
    return f"round {number}"


def draft_not_typed(model: str, problem: str) -> str:
    """Above a typed task's draft that is not JSON of its model (mrkdwn, escaped here)."""
    return (
        f"_This draft is not JSON of {escape(model)} ({truncate(problem, 500)}). Approve it and "
        "CrewAI converts it, or Edit to give the object yourself._"
    )


def edit_refused(reason: str) -> str:
    """Above a draft reviewed again because the reviewer's edit was not taken (mrkdwn)."""
    return f":warning: *The last edit was not used:* {truncate(reason, 1000)}"


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


def review_ref(review_id: str, run_id: str) -> str:
    return f"Review {code(review_id)} · run {code(run_id)}"


def run_label(run_id: str) -> str:
    """A run's id after its title or who started it: ``run `run_1```."""
    return f"run {code(run_id)}"


def open_link(link: str) -> str:
    """A link Slack gave (``chat.getPermalink``) to where a pending review is."""
    return f"<{link}|open the thread>"


def in_channel(channel: str) -> str:
    return f"in {channel_ref(channel)}"


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
        ":information_source: This run uses Countersign's offline scripted model "
        f"({code('ScriptedLLM')}): its drafts are canned and follow your feedback. To use a "
        "real model, give the crew's agents one (the example crews read "
        f"{code('COUNTERSIGN_LLM')}, e.g. {code('openai/gpt-4o-mini')}, with the provider's "
        "API key)."
    ),
}


def reminder(review: Review, reviewers: tuple[str, ...]) -> str:
    who = " ".join(mention(r) for r in reviewers) or "Reviewers"
    return f"⏰ {who}: {REVIEW_NOUN[review.kind]} in this thread is still waiting for a decision."


def escalation(review: Review, escalate_to: tuple[str, ...]) -> str:
    who = " ".join(mention(r) for r in escalate_to) or "Reviewers"
    return (
        f"🚨 {who}: {REVIEW_NOUN[review.kind]} in this thread has waited past its escalation "
        "time; please decide or pass it on."
    )


def dm_nudge(review: Review, crew: str, escalated: bool, link: str | None) -> str:
    """A reminder (or an escalation) sent as a DM (``remind_by = "dm"``): what waits, and where."""
    what = f"{REVIEW_NOUN[review.kind].capitalize()} of a {code(crew)} run"
    if escalated:
        line = f"🚨 {what} has waited past its escalation time; please decide or pass it on."
    else:
        line = f"⏰ {what} is still waiting for your decision."
    return f"{line} <{link}|Open its thread>" if link else line


def task_reopened(review: Review) -> str:
    """Said in the thread when a reviewer sends an approved task back to its agent."""
    decision = review.decision
    who = user_ref(decision.decided_by if decision else None)
    index = streams.task_index(review.stream)
    task = f"task {index + 1}" if index is not None else "an earlier task"
    details = review.details
    name = details.task if isinstance(details, TaskReviewDetails) else ""
    if name.strip():
        task += f" (*{truncate(' '.join(name.split()), 150)}*)"
    feedback = truncate(decision.text or "", 1500) if decision else ""
    return (
        f"↩️ {who} reopened {task}. It is being revised, then every later task runs "
        f"again.\n>{feedback}"
    )


# --- /crew status, pending and list -------------------------------------------------------


def pending_title(count: int) -> str:
    return f"*{count} review{'s' if count != 1 else ''} waiting*"


def more_not_shown(count: int) -> str:
    return f"…and {count} more."


NO_PENDING = "Nothing is waiting for a review. :tada:"

CREWS_TITLE = "*Crews you can run*"

NO_CREWS = "No crews are configured yet."


# --- modals -------------------------------------------------------------------------------

MODAL_TITLE = {
    DecisionKind.EDIT: "Edit and approve",
    DecisionKind.CHANGES: "Request changes",
    DecisionKind.REJECT: "Reject",
    DecisionKind.ANSWER: "Answer",
    REVISE: "Revise an earlier task",
    REASSIGN: "Reassign the review",
}
MODAL_SUBMIT = {
    DecisionKind.EDIT: "Approve edit",
    DecisionKind.CHANGES: "Send",
    DecisionKind.REJECT: "Reject",
    DecisionKind.ANSWER: "Send answer",
    REVISE: "Revise",
    REASSIGN: "Reassign",
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


MODAL_PLACEHOLDER_DENY = "Optional: why not; the agent is told and carries on"
MODAL_PLACEHOLDER = {
    DecisionKind.EDIT: "Edit the text",
    DecisionKind.CHANGES: "Say what to change; the agent revises its draft.",
    DecisionKind.REJECT: "Optional: why the run should stop",
    DecisionKind.ANSWER: "Your answer goes back to the agent.",
    REVISE: "Your feedback goes to the agent with the draft you approved.",
}


def edit_in_parts_note(length: int, parts: int, limit: int) -> str:
    """Above a long draft's edit boxes (mrkdwn): one box holds at most ``limit`` characters."""
    return (
        f"This text has {length:,} characters, more than one box holds ({limit:,}): it is "
        f"shown in {parts} parts, joined back as they are. Edit any of them; empty a part to "
        "remove it."
    )


def input_part_label(label: str, number: int, parts: int) -> str:
    """The label of one box of a text shown in parts (plain text)."""
    return f"{label} (part {number} of {parts})"


def edit_too_long(length: int, review_id: str) -> str:
    """Instead of an edit modal for a text no modal holds (mrkdwn); nothing is cut."""
    return (
        f"This text has {length:,} characters, more than a Slack form holds. Request changes "
        f"instead, or edit it from the command line: `countersign reviews decide {review_id} "
        "edit - --by YOU < edited.txt`."
    )


LOADING_TITLE = "Countersign"
CLOSE = "Close"

BOOLEAN = {"true": "true", "false": "false"}

_ARG_TYPE = {
    "string": "text",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "array": "a JSON array, like [1, 2]",
    "object": 'a JSON object, like {"key": 1}',
    "null": "null",
}


def arg_types(kinds: tuple[str, ...]) -> str:
    words = [_ARG_TYPE.get(kind, kind) for kind in dict.fromkeys(kinds)]
    return " or ".join(words) if words else "JSON, or text"


def arg_hint(kinds: tuple[str, ...], description: str = "") -> str:
    """Under an argument's input (plain text): what it is for and what it must hold."""
    hint = f"Expected: {arg_types(kinds)}."
    return f"{' '.join(description.split())} · {hint}" if description.strip() else hint


def arg_parts_note(length: int, parts: int) -> str:
    """Under a long argument's first box (plain text): it is shown in parts."""
    return f"This value has {length:,} characters, shown in {parts} parts joined back as they are."


# Re-opening an earlier task.
REVISE_EXPLAINED = (
    "The run goes back to the task you choose: its agent revises the draft you approved "
    "with your feedback, you review it again, and every later task runs again after it."
)
REASSIGN_LABEL = "Who should handle it?"
REASSIGN_PLACEHOLDER = "Choose one of the run's reviewers"
REVISE_TASK_LABEL = "Task to revise"
REVISE_TASK_PLACEHOLDER = "Choose an approved task"


def run_ref(run_id: str) -> str:
    return f"Run {code(run_id)}"


def task_option(index: int, label: str) -> str:
    """A task in the list of revisable ones (plain text); the runtime's label names it."""
    return " ".join(label.split()) or f"Task {index + 1}"


# --- batch review (``bot.slack.batch_blocks``) --------------------------------------------

BATCH_BUTTON = "Decide several…"
BATCH_TITLE = "Decide several"
BATCH_NEXT = "Next"
BATCH_CANCEL = "Cancel"
BATCH_DECISION_LABEL = "Decision"
BATCH_DECISIONS = {DecisionKind.APPROVE: "Approve them", DecisionKind.REJECT: "Reject them"}
BATCH_REASON_LABEL = "Why (optional; the crews read it)"
BATCH_CHOOSE_ONE = "Tick at least one review."
BATCH_NOTHING = (
    "Nothing is waiting for you that can be approved or rejected here. A question needs "
    "its answer in its thread."
)
BATCH_RECORDING = "Recording your decisions…"


def batch_intro(count: int, total: int, questions: int) -> str:
    """Above the choosing modal's checkboxes: how many are listed, of how many."""
    said = f"*{count}* review{'s' if count != 1 else ''} waiting for you, oldest first."
    if total > count:
        said += f" {total - count} more wait: decide these first."
    if questions:
        said += (
            f" {questions} question{'s' if questions != 1 else ''} need answers in their threads."
        )
    return said + " Each one ticked is its own decision, held to its crew's rules."


def batch_group_label(first: int, last: int) -> str:
    return f"Reviews {first} to {last}" if last > first else f"Review {first}"


def batch_option(crew: str, kind: ReviewKind) -> str:
    """A checkbox's words (plain text): ``writer · a task review``."""
    return f"{crew} · {REVIEW_NOUN[kind]}"


def batch_confirm_head(kind: DecisionKind, count: int, reason: str) -> str:
    """What the confirmation says will happen (mrkdwn; ``reason`` escaped here)."""
    verb = "approve" if kind is DecisionKind.APPROVE else "reject"
    said = (
        f"You are about to *{verb} {count} review{'s' if count != 1 else ''}*, each as its own "
        "decision: each resumes its own run. One that changed since you saw it, or that is "
        "no longer yours to decide, is skipped and listed."
    )
    if reason.strip():
        said += f"\n>{escape(' '.join(reason.split()))}"
    return said


def batch_confirm_button(kind: DecisionKind, count: int) -> str:
    verb = "Approve" if kind is DecisionKind.APPROVE else "Reject"
    return f"{verb} {count} review{'s' if count != 1 else ''}"


def batch_shown_button(kind: DecisionKind, count: int) -> str:
    """*Approve all N shown*: beside *Decide several…*, for the reviews listed there."""
    verb = "Approve" if kind is DecisionKind.APPROVE else "Reject"
    return f"{verb} all {count} shown"


def batch_line(label: str, about: str) -> str:
    """One review the confirmation lists: its words (escaped here) and what it is about."""
    said = f"• *{escape(label)}*"
    return f"{said} · {escape(about)}" if about else said


def batch_done(kind: DecisionKind, recorded: int, waiting: int, skipped: int) -> str:
    """The answer's first line: what was recorded, what waits for more approvals, what was
    skipped."""
    verb = "Approved" if kind is DecisionKind.APPROVE else "Rejected"
    said = f"*{verb} {recorded} review{'s' if recorded != 1 else ''}.*"
    if waiting:
        said += f" {waiting} of them wait{'s' if waiting == 1 else ''} for more approvals."
    if skipped:
        said += f" Skipped {skipped} (below): nothing was recorded for {_them(skipped)}."
    return said


def _them(count: int) -> str:
    return "it" if count == 1 else "them"


def batch_skipped(label: str, why: str) -> str:
    """One skipped review: its checkbox's words (escaped here) and why (mrkdwn already)."""
    return f"• {escape(label)}: {why}"
