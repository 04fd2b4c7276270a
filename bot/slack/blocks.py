"""Block Kit for every message the bot posts, built from storage records: reviews, a run's
thread, the answers to ``/crew status``, ``pending`` and ``list``. The modals are in
``bot.slack.modals``, the pieces both are built from in ``bot.slack.elements``.

Pure functions returning plain dicts, so each one is checked against Slack's limits
(``bot/sandbox/blockkit.py``) without a network. The rules they keep (Slack's limits, as
docs/architecture.md lists them):

- Every text from an LLM, a person or the configuration is escaped (``bot.slack.mrkdwn``)
  and put in ``mrkdwn`` with ``verbatim: true``, so it can neither ping (``<!channel>``) nor
  link (``<https://evil|ok>``). Mentions and dates are built by ``bot.slack.mrkdwn`` after
  that.
- A section holds at most 3000 chars, a message at most 50 blocks and ~12k chars of block
  text, so long drafts are cut at paragraph, line or word boundaries into sections and,
  past :data:`DRAFT_PER_MESSAGE`, into several messages; only the last has the buttons.
  Past :data:`FILE_THRESHOLD` the dispatcher posts :func:`review_file_summary` and uploads
  the draft as a file instead.
- Buttons carry the review id as their value, never text; their ``action_id`` is
  ``countersign:<action>`` (``bot.slack.payloads`` parses them back). "Revise an earlier task"
  belongs to the run, so its value is the run id.

The layout of a review's last message depends on the review alone, not on the run, so
:func:`decided_message` can rebuild it with the decision in place of the buttons.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from bot.slack import block_text as t
from bot.slack.elements import (
    SECTION_LIMIT,
    Block,
    arg_text,
    context,
    draft_details,
    plain,
    proposed,
    section,
    split_text,
)
from bot.slack.mrkdwn import code, escape, slack_date, truncate, user_ref
from bot.slack.payloads import CLAIM, REASSIGN, REVISE, action_id
from crew_runtime import streams
from storage.details import QuestionDetails, ToolApprovalDetails
from storage.records import Decision, Review, Run
from storage.status import DecisionKind, ReviewKind, ReviewStatus, RunNote, RunStatus

__all__ = [
    "DRAFT_PER_MESSAGE",
    "FILE_THRESHOLD",
    "Message",
    "crews_message",
    "decided_message",
    "divergence_message",
    "escalation_message",
    "needs_file",
    "note_message",
    "pending_message",
    "reminder_message",
    "reopened_message",
    "result_messages",
    "review_file_summary",
    "review_messages",
    "run_root",
    "status_message",
]

# Of a message's ~12k chars of block text (MAX_BLOCK_TEXT_TOTAL in the stand-in; Slack's
# msg_blocks_too_long hits between 11.3k and 13.3k), the draft gets 7000; the rest is the
# header, the task, a tool call's arguments and, once decided, the decision.
DRAFT_PER_MESSAGE = 7000
ARGS_LIMIT = 6000  # a tool call's arguments, its whole draft
ARG_LIMIT = SECTION_LIMIT - 200  # one argument's value, within a section with its name
FILE_THRESHOLD = 12_000  # longer drafts go up as a file, with a summary message
SUMMARY_CHARS = 500
DECISION_TEXT_LIMIT = 1000  # doubled at worst by quoting each line
MAX_RESULT_MESSAGES = 5
MAX_LISTED = 20  # reviews in /crew pending, one section each
LISTING_BUDGET = 9000  # chars of a list in one message

BUTTONS: dict[ReviewKind, tuple[DecisionKind, ...]] = {
    ReviewKind.TASK_REVIEW: (
        DecisionKind.APPROVE,
        DecisionKind.EDIT,
        DecisionKind.CHANGES,
        DecisionKind.REJECT,
    ),
    ReviewKind.QUESTION: (DecisionKind.ANSWER,),
    ReviewKind.TOOL_APPROVAL: (DecisionKind.APPROVE, DecisionKind.EDIT, DecisionKind.REJECT),
}


@dataclass(frozen=True)
class Message:
    """A message to post: ``text`` is the notification fallback, ``blocks`` what is shown."""

    text: str
    blocks: list[dict[str, Any]]


# --- small builders -----------------------------------------------------------------------


def _header(text: str) -> Block:
    return {"type": "header", "text": plain(text, 150)}


def _text_sections(raw: str) -> list[Block]:
    if not raw.strip():
        return [section(t.EMPTY_DRAFT)]
    return [section(escape(piece)) for piece in split_text(raw, SECTION_LIMIT)]


def _listing(lines: list[str], budget: int = LISTING_BUDGET) -> list[Block]:
    """Lines of mrkdwn packed into sections, within ``budget`` chars; then "…and N more".

    Keeps a list (crews, reviews) inside one message's ~12k chars of block text.
    """
    sections: list[str] = []
    used = 0
    for shown, line in enumerate(lines):
        line = line[:SECTION_LIMIT]
        if used + len(line) > budget:
            return [*map(section, sections), context(t.more_not_shown(len(lines) - shown))]
        used += len(line) + 1
        if sections and len(sections[-1]) + 1 + len(line) <= SECTION_LIMIT:
            sections[-1] += "\n" + line
        else:
            sections.append(line)
    return [section(s) for s in sections]


def _inputs(inputs: dict[str, str], reviewer_input: str | None = None) -> list[Block]:
    """A run's inputs; the one naming its reviewer (``reviewers_from_input``) as a mention."""
    if not inputs:
        return []
    lines = [
        f"*{escape(k)}*: {user_ref(v) if k == reviewer_input else truncate(v, 300)}"
        for k, v in inputs.items()
    ]
    return _listing(lines, budget=2500)


# --- reviews ------------------------------------------------------------------------------


def needs_file(review: Review) -> bool:
    """Whether the draft goes up as a file with :func:`review_file_summary`."""
    return len(review.prompt) > FILE_THRESHOLD


def _review_head(review: Review) -> list[Block]:
    details, draft = review.details, draft_details(review)
    title = t.REVIEW_TITLE[review.kind]
    name, agent, task = "", "", ""
    if isinstance(details, ToolApprovalDetails):
        name, task = details.tool, details.description
    elif isinstance(details, QuestionDetails):
        agent = details.agent
    else:
        name, agent, task = details.task, details.agent, details.description
    blocks = [_header(f"{title}: {name}" if name else title)]
    facts = []
    if agent:
        facts.append(f"*{t.AGENT}:* {truncate(agent, 150)}")
    if draft.round > 0:
        facts.append(t.review_round(draft.round + 1))
    if facts:
        blocks.append(context(" · ".join(facts)))
    if task:
        what = t.TOOL if review.kind is ReviewKind.TOOL_APPROVAL else t.TASK
        blocks.append(section(f"*{what}:* {truncate(task, 600)}"))
    if draft.refused_edit:
        blocks.append(section(t.edit_refused(draft.refused_edit)))
    if draft.output_problem:
        blocks.append(context(t.draft_not_typed(draft.output_model or "", draft.output_problem)))
    return blocks


def _button(action: DecisionKind, review: Review) -> Block:
    button: Block = {
        "type": "button",
        "action_id": action_id(action),
        "text": plain(t.BUTTON[action], 75),
        "value": review.id,
    }
    if action in (DecisionKind.APPROVE, DecisionKind.ANSWER):
        button["style"] = "primary"
    if action is DecisionKind.REJECT:
        button["style"] = "danger"
        button["confirm"] = {
            "title": plain(t.REJECT_CONFIRM_TITLE, 100),
            "text": plain(t.REJECT_CONFIRM_TEXT[review.kind], 300),
            "confirm": plain(t.REJECT_CONFIRM_YES, 30),
            "deny": plain(t.REJECT_CONFIRM_NO, 30),
            "style": "danger",
        }
    return button


def _revise_button(run_id: str) -> Block:
    return {
        "type": "button",
        "action_id": action_id(REVISE),
        "text": plain(t.REVISE_BUTTON, 75),
        "value": run_id,
    }


def _claim_buttons(review: Review) -> list[Block]:
    """The buttons *Claim* and *Reassign*: who handles the review (anyone allowed still decides)."""
    return [
        {
            "type": "button",
            "action_id": action_id(action),
            "text": plain(words, 75),
            "value": review.id,
        }
        for action, words in ((CLAIM, t.CLAIM_BUTTON), (REASSIGN, t.REASSIGN_BUTTON))
    ]


def _after_first_task(review: Review) -> bool:
    """A review of a task with tasks before it (the first has nothing to revise before it)."""
    return review.kind is ReviewKind.TASK_REVIEW and (streams.task_index(review.stream) or 0) > 0


def _shows_args(review: Review) -> bool:
    """Whether the review is a tool call shown by its arguments: they are its whole draft
    (its prompt, ``tool({...})``, is the same call on one line)."""
    return proposed(review) is not None


def _args(review: Review) -> list[Block]:
    """A tool call's arguments, as the reviewer must see them before approving: one line
    per argument, and text with line breaks (or a list, an object) as a block below its
    name, its lines as they will be sent."""
    args = proposed(review)
    if args is None:
        return []
    if not args:
        shown = json.dumps(args, ensure_ascii=False, default=str)
        return [section(f"*{t.ARGUMENTS}:* {truncate(shown, ARGS_LIMIT)}")]
    share = min(max(ARGS_LIMIT // len(args), 100), ARG_LIMIT)
    lines = [f"*{t.ARGUMENTS}:*"]
    for name, value in args.items():
        shown = arg_text(value)
        label = f"*{truncate(str(name), 100)}:*"
        if "\n" in shown:
            lines.append(f"{label}\n```{truncate(shown, share)}```")
        else:
            lines.append(f"{label} {truncate(shown, share) if shown else t.EMPTY_DRAFT}")
    return _listing(lines, budget=ARGS_LIMIT + 500)


def _review_tail(review: Review, *, decided: bool) -> list[Block]:
    blocks = _args(review)
    ref = t.review_ref(review.id, review.run_id)
    if not decided:
        buttons = [_button(a, review) for a in BUTTONS[review.kind]]
        if _after_first_task(review):
            buttons.append(_revise_button(review.run_id))
        buttons += _claim_buttons(review)
        blocks.append(
            {"type": "actions", "block_id": f"countersign:{review.id}", "elements": buttons}
        )
        if review.claimed_by is not None:
            blocks.append(context(t.claimed_line(review.claimed_by)))
        return [*blocks, context(f"{t.REPLY_HINT[review.kind]} {ref}")]
    return [*blocks, *_outcome(review), context(ref)]


def _outcome(review: Review) -> list[Block]:
    decision = review.decision
    if decision is None:
        return [section(t.REVIEW_STATUS[review.status])]
    line = f"{t.decision_line(decision)} · {slack_date(decision.created_at)}"
    if decision.text and decision.kind is not DecisionKind.APPROVE:
        quoted = truncate(decision.text, DECISION_TEXT_LIMIT).replace("\n", "\n>")
        line += f"\n>{quoted}"
    if not review.approvals:
        return [section(line)]
    return [section(line), context(t.approvals_given([a.decided_by for a in review.approvals]))]


def _typed_json(review: Review) -> bool:
    """Whether the draft is a typed task's output as its model's JSON: shown as code."""
    draft = draft_details(review)
    return bool(draft.output_model) and not draft.output_problem


def _draft_parts(review: Review) -> list[str]:
    if _shows_args(review):
        return [""]
    return split_text(review.prompt, DRAFT_PER_MESSAGE) or [""]


def _draft_sections(review: Review, part: str) -> list[Block]:
    if not (_typed_json(review) and part.strip()):
        return _text_sections(part)
    fence = "```"
    pieces = split_text(part, SECTION_LIMIT - 2 * len(fence))
    return [section(f"{fence}{escape(piece)}{fence}") for piece in pieces]


def _review_blocks(
    review: Review, part: str, index: int, count: int, *, decided: bool
) -> list[Block]:
    blocks: list[Block] = []
    if index == 0:
        blocks += _review_head(review)
    if count > 1:
        blocks.append(context(t.part_label(index + 1, count)))
    if not _shows_args(review):
        blocks += _draft_sections(review, part)
    if index == count - 1:
        blocks += _review_tail(review, decided=decided)
    return blocks


def review_messages(review: Review, run: Run) -> list[Message]:
    """The review as posted in the run's thread; long drafts over several messages.

    Only the last message carries the buttons, so a reviewer decides after the whole
    draft has been shown.
    """
    parts = _draft_parts(review)
    messages = []
    for i, part in enumerate(parts):
        blocks = _review_blocks(review, part, i, len(parts), decided=False)
        fallback = t.review_fallback(run.crew, review.kind)
        if i:
            fallback = t.part_label(i + 1, len(parts))
        messages.append(Message(fallback, blocks))
    return messages


def _file_summary_blocks(review: Review, note: str, *, decided: bool) -> list[Block]:
    return [
        *_review_head(review),
        section(truncate(review.prompt, SUMMARY_CHARS)),
        context(note),
        *_review_tail(review, decided=decided),
    ]


def review_file_summary(review: Review, run: Run, filename: str) -> Message:
    """For a draft past :data:`FILE_THRESHOLD`: its start and the buttons; the file follows."""
    note = t.file_note(filename, len(review.prompt))
    blocks = _file_summary_blocks(review, note, decided=False)
    return Message(t.review_fallback(run.crew, review.kind), blocks)


def decided_message(review: Review, *, as_file: bool | None = None) -> Message:
    """The review's last message again, with who decided what (and when) instead of buttons.

    ``as_file`` says whether the review went out as :func:`review_file_summary`; by
    default, whether it :func:`needs_file`.
    """
    blocks = _last_blocks(review, decided=True, as_file=as_file)
    if review.decision is not None:
        fallback = t.decision_line(review.decision)
    else:
        fallback = t.REVIEW_STATUS[review.status]
    return Message(fallback, blocks)


def open_review_message(review: Review) -> Message:
    """The pending review's last message again, buttons kept, as it stands now (who has
    claimed it)."""
    blocks = _last_blocks(review, decided=False)
    words = (
        t.claimed_line(review.claimed_by) if review.claimed_by else t.REVIEW_STATUS[review.status]
    )
    return Message(words, blocks)


def partly_approved_message(
    review: Review, required: int, expected: Collection[str] = ()
) -> Message:
    """The review's last message again, buttons kept, with who approved it so far out of
    the ``required`` approvals and who is still ``expected`` (the crew's other reviewers)."""
    blocks = _last_blocks(review, decided=False)
    approvers = [a.decided_by for a in review.approvals]
    words = t.approvals_so_far(approvers, required, expected)
    blocks.insert(len(blocks) - 1, context(words))  # above the reply hint, under the buttons
    return Message(words, blocks)


def _last_blocks(review: Review, *, decided: bool, as_file: bool | None = None) -> list[Block]:
    """The blocks of the review's last message (the one with its buttons or outcome)."""
    if needs_file(review) if as_file is None else as_file:
        note = t.file_note_attached(len(review.prompt))
        return _file_summary_blocks(review, note, decided=decided)
    parts = _draft_parts(review)
    last = len(parts) - 1
    return _review_blocks(review, parts[last], last, len(parts), decided=decided)


# --- runs ---------------------------------------------------------------------------------


def run_root(
    run: Run,
    description: str,
    waiting_on: Collection[ReviewKind] = (),
    *,
    reviewer_input: str | None = None,
) -> Message:
    """The root message of a run's thread; updated as the run's status changes.

    ``waiting_on``: the kinds of the run's pending reviews, which say what a waiting run
    waits for. ``reviewer_input``: the input naming the run's reviewer, shown as a mention."""
    head = t.run_title(run.crew, run.status, waiting_on)
    if description.strip():
        head += "\n" + truncate(description.strip(), 500)
    footer = f"{t.started_by(run.started_by, run.created_at)} · {t.run_label(run.id)}"
    blocks = [section(head), *_inputs(run.inputs, reviewer_input), context(footer)]
    return Message(t.run_fallback(run.crew, run.status, waiting_on), blocks)


def result_messages(run: Run, rejection: Decision | None = None) -> list[Message]:
    """The outcome in the thread: the output (split like drafts), or why there is none.

    ``rejection``: the decision that rejected a rejected run, to name who (a mention) and
    quote their reason; without it, the run's error says why."""
    title = section(t.result_title(run.crew, run.status))
    fallback = t.run_fallback(run.crew, run.status)
    if run.status is RunStatus.REJECTED and rejection is not None:
        blocks = [section(t.rejected_by(run.crew, rejection.decided_by))]
        if rejection.text:
            blocks.append(section(f"*{t.REASON}:* {truncate(rejection.text, 2500)}"))
        return [Message(fallback, blocks)]
    if run.status is not RunStatus.SUCCEEDED:
        blocks = [title]
        if run.error:
            label = t.REASON if run.status is RunStatus.REJECTED else ""
            prefix = f"*{label}:* " if label else ""
            blocks.append(section(prefix + truncate(run.error, 2500)))
        return [Message(fallback, blocks)]
    if not (run.output or "").strip():
        return [Message(fallback, [title, section(t.NO_OUTPUT)])]
    parts = split_text(run.output or "", DRAFT_PER_MESSAGE)
    shown = parts[:MAX_RESULT_MESSAGES]
    messages = []
    for i, part in enumerate(shown):
        blocks = [title] if i == 0 else []
        if len(shown) > 1:
            blocks.append(context(t.result_part(i + 1, len(shown))))
        blocks += _text_sections(part)
        messages.append(Message(fallback if i == 0 else t.result_part(i + 1, len(shown)), blocks))
    if len(parts) > len(shown):
        remaining = sum(len(p) for p in parts[len(shown) :])
        messages[-1].blocks.append(context(t.output_cut(remaining, run.id)))
    return messages


def _review_line(review: Review) -> str:
    status = t.decision_line(review.decision) if review.decision else None
    status = status or t.REVIEW_STATUS[review.status]
    return f"• {t.REVIEW_NOUN[review.kind]} {code(review.id)}: {status}"


def status_message(
    run: Run,
    reviews: list[Review],
    *,
    revisable: bool = False,
    reviewer_input: str | None = None,
) -> Message:
    """``/crew status``: the run, its inputs, its reviews and how each ended.

    With ``revisable`` (the run waits and has approved tasks), a button to re-open one;
    ``reviewer_input`` names the input shown as a mention (as in ``run_root``).
    """
    waiting_on = [r.kind for r in reviews if r.status is ReviewStatus.PENDING]
    head = f"{t.run_title(run.crew, run.status, waiting_on)} · {t.run_label(run.id)}"
    blocks = [section(head), *_inputs(run.inputs, reviewer_input)]
    blocks.append(context(t.started_by(run.started_by, run.created_at)))
    if run.error:
        blocks.append(section(truncate(run.error, 1000)))
    if run.divergence:
        blocks.append(context(t.divergence_fallback()))
    blocks += _listing([_review_line(r) for r in reviews], budget=5000)
    if revisable:
        blocks.append(
            {"type": "actions", "block_id": "countersign:run", "elements": [_revise_button(run.id)]}
        )
    return Message(t.run_fallback(run.crew, run.status, waiting_on), blocks)


def pending_message(
    reviews: list[Review], runs: dict[str, Run], total: int | None = None
) -> Message:
    """``/crew pending``: what waits for a decision, oldest first, with where to find it.

    ``total``: how many wait, when ``reviews`` are only the first of them.
    """
    count = len(reviews) if total is None else total
    if not count:
        return Message(t.NO_PENDING, [section(t.NO_PENDING)])
    blocks = [section(t.pending_title(count))]
    listed = sorted(reviews, key=lambda r: r.created_at)[:MAX_LISTED]
    for review in listed:
        run = runs.get(review.run_id)
        crew = f"*{escape(run.crew)}* · " if run else ""
        where = f" {t.in_channel(review.channel)}" if review.channel else ""
        line = (
            f"{crew}{t.REVIEW_NOUN[review.kind]} {code(review.id)}{where} · "
            f"{slack_date(review.created_at)}\n>{truncate(' '.join(review.prompt.split()), 200)}"
        )
        blocks.append(section(line))
    if count > len(listed):
        blocks.append(context(t.more_not_shown(count - len(listed))))
    return Message(t.pending_title(count).strip("*"), blocks)


def crews_message(crews: list[tuple[str, str]]) -> Message:
    """``/crew list``: each crew's name and description."""
    if not crews:
        return Message(t.NO_CREWS, [section(t.NO_CREWS)])
    lines = [f"• {code(name)}: {truncate(' '.join(d.split()), 300)}" for name, d in crews]
    blocks = [section(t.CREWS_TITLE), *_listing(lines)]
    return Message(t.CREWS_TITLE.strip("*"), blocks)


def divergence_message(note: str) -> Message:
    """Said in the thread when a resumed run no longer matches its recording."""
    body = t.DIVERGED
    if note.strip():
        body += "\n" + truncate(note.strip(), 2000)
    return Message(t.divergence_fallback(), [section(body)])


def note_message(note: RunNote) -> Message:
    """A note the runtime asked for, said once in the run's thread (small print)."""
    words = t.RUN_NOTES[note]
    return Message(words, [context(words)])


def reminder_message(review: Review, reviewers: tuple[str, ...]) -> Message:
    """Said in the run's thread when a review has waited ``remind_after``."""
    words = t.reminder(review, reviewers)
    return Message(words, [section(words)])


def escalation_message(review: Review, escalate_to: tuple[str, ...]) -> Message:
    """Said in the run's thread when a review has waited ``escalate_after``."""
    words = t.escalation(review, escalate_to)
    return Message(words, [section(words)])


def dm_nudge_message(review: Review, crew: str, escalated: bool, link: str | None) -> Message:
    """Sent to one reviewer's DM when a review has waited ``remind_after`` or
    ``escalate_after`` and its rule says ``remind_by = "dm"``."""
    words = t.dm_nudge(review, crew, escalated, link)
    return Message(words, [section(words)])


def claimed_message(by: str, to: str, before: str | None) -> Message:
    """Said in the run's thread when a review is claimed, taken over or reassigned."""
    words = t.claimed_note(by, to, before)
    return Message(words, [context(words)])


def reopened_message(review: Review) -> Message:
    """Said in the run's thread when an approved task is sent back to its agent."""
    words = t.task_reopened(review)
    return Message(words, [section(words)])
