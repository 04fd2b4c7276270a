"""Block Kit for every message the bot posts, built from storage records: reviews, a run's
thread, the answers to ``/crew status``, ``pending`` and ``list``. The modals are in
``bot.slack.modals``, the pieces both are built from in ``bot.slack.elements``.

Pure functions returning plain dicts, so each one is checked against Slack's limits
(``sandbox/blockkit.py``) without a network. The rules they keep (Slack's limits, as
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

A review's own messages are built in ``bot.slack.review_blocks``; the pieces all messages
share (:class:`Message`, a header, text in sections, a list) in ``bot.slack.message``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from bot.slack import block_text as t
from bot.slack.batch_blocks import batch_button
from bot.slack.elements import (
    Block,
    context,
    section,
    split_text,
)
from bot.slack.message import (
    DRAFT_PER_MESSAGE,
    Message,
    listing,
    revise_button,
    text_sections,
)
from bot.slack.mrkdwn import code, escape, slack_date, truncate, user_ref
from storage.records import Decision, Review, Run
from storage.status import ReviewKind, ReviewStatus, RunNote, RunStatus

__all__ = [
    "MAX_LISTED",
    "Message",
    "claimed_message",
    "crews_message",
    "divergence_message",
    "dm_nudge_message",
    "escalation_message",
    "note_message",
    "pending_message",
    "reminder_message",
    "reopened_message",
    "result_messages",
    "run_root",
    "status_message",
]

MAX_RESULT_MESSAGES = 5
MAX_LISTED = 20  # reviews in /crew pending, one section each


def _inputs(inputs: dict[str, str], reviewer_input: str | None = None) -> list[Block]:
    """A run's inputs; the one naming its reviewer (``reviewers_from_input``) as a mention."""
    if not inputs:
        return []
    lines = [
        f"*{escape(k)}*: {user_ref(v) if k == reviewer_input else truncate(v, 300)}"
        for k, v in inputs.items()
    ]
    return listing(lines, budget=2500)


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
        blocks += text_sections(part)
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
    blocks += listing([_review_line(r) for r in reviews], budget=5000)
    if revisable:
        blocks.append(
            {"type": "actions", "block_id": "countersign:run", "elements": [revise_button(run.id)]}
        )
    return Message(t.run_fallback(run.crew, run.status, waiting_on), blocks)


def pending_message(
    reviews: list[Review],
    runs: dict[str, Run],
    total: int | None = None,
    links: Mapping[str, str] | None = None,
) -> Message:
    """``/crew pending``: what waits for a decision, oldest first, with where to find it.

    ``total``: how many wait, when ``reviews`` are only the first of them; ``links``: by
    review id, Slack's permalink to its message (or its run's thread).
    """
    count = len(reviews) if total is None else total
    if not count:
        return Message(t.NO_PENDING, [section(t.NO_PENDING)])
    listed = sorted(reviews, key=lambda r: r.created_at)[:MAX_LISTED]
    blocks = [section(t.pending_title(count)), batch_button(listed)]
    for review in listed:
        run = runs.get(review.run_id)
        crew = f"*{escape(run.crew)}* · " if run else ""
        where = f" {t.in_channel(review.channel)}" if review.channel else ""
        if links and review.id in links:
            where += f" · {t.open_link(links[review.id])}"
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
    blocks = [section(t.CREWS_TITLE), *listing(lines)]
    return Message(t.CREWS_TITLE.strip("*"), blocks)


def divergence_message(note: str) -> Message:
    """Said in the thread when a resumed run no longer matches its recording."""
    body = t.DIVERGED
    if note.strip():
        body += "\n" + truncate(note.strip(), 2000)
    return Message(t.divergence_fallback(), [section(body)])


def rule_message(payload: Mapping[str, Any]) -> Message:
    """The one line said in the thread when a rule decided a gated call (small print)."""
    words = t.rule_decided(payload)
    return Message(words, [context(words)])


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


def stage_passed_message(
    passed: str,
    approvers: list[str],
    number: int,
    count: int,
    name: str,
    reviewers: tuple[str, ...],
) -> Message:
    """Said in the run's thread when a review passes a stage of its approval chain, mentioning
    the next stage's reviewers."""
    words = t.stage_passed_note(passed, approvers, number, count, name, reviewers)
    return Message(words, [section(words)])


def reopened_message(review: Review) -> Message:
    """Said in the run's thread when an approved task is sent back to its agent."""
    words = t.task_reopened(review)
    return Message(words, [section(words)])
