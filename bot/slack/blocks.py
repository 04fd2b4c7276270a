"""Block Kit for every message and modal the bot posts, built from storage records.

Pure functions returning plain dicts, so each one is checked against Slack's limits
(``bot/sandbox/blockkit.py``) without a network. The rules they keep (Slack's limits, as
docs/architecture.md lists them):

- Every text from an LLM, a person or the configuration is escaped (:func:`escape`) and
  put in ``mrkdwn`` with ``verbatim: true``, so it can neither ping (``<!channel>``) nor
  link (``<https://evil|ok>``). Mentions and dates are built by ``bot.slack.text`` after that.
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
from bisect import bisect_right
from collections.abc import Collection
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

from bot.slack import text as t
from bot.slack.payloads import (
    MAX_ARG_NAME,
    MODAL_ACTIONS,
    REVISE,
    action_id,
    arg_block_id,
    callback_id,
)
from bot.slack.text import escape, truncate
from crew_runtime import streams
from crew_runtime.arguments import schema_types
from storage.details import QuestionDetails, TaskReviewDetails, ToolApprovalDetails
from storage.records import Decision, Review, Run
from storage.status import DecisionKind, ReviewKind, ReviewStatus, RunNote, RunStatus

__all__ = [
    "DRAFT_PER_MESSAGE",
    "FILE_THRESHOLD",
    "SECTION_LIMIT",
    "Message",
    "crews_message",
    "decided_message",
    "divergence_message",
    "escape",
    "modal",
    "needs_file",
    "note_message",
    "pending_message",
    "result_messages",
    "review_file_summary",
    "review_messages",
    "revise_modal",
    "run_root",
    "split_text",
    "status_message",
]

Block = dict[str, Any]

SECTION_LIMIT = 3000  # section text, Slack's limit
# Of a message's ~12k chars of block text (MAX_BLOCK_TEXT_TOTAL in the stand-in; Slack's
# msg_blocks_too_long hits between 11.3k and 13.3k), the draft gets 7000; the rest is the
# header, the task, a tool call's arguments and, once decided, the decision.
DRAFT_PER_MESSAGE = 7000
ARGS_LIMIT = 6000  # a tool call's arguments, its whole draft
ARG_LIMIT = SECTION_LIMIT - 200  # one argument's value, within a section with its name
FILE_THRESHOLD = 12_000  # longer drafts go up as a file, with a summary message
INPUT_LIMIT = 3000  # plain_text_input, Slack's limit
SUMMARY_CHARS = 500
DECISION_TEXT_LIMIT = 1000  # doubled at worst by quoting each line
MAX_RESULT_MESSAGES = 5
MAX_LISTED = 20  # reviews in /crew pending, one section each
ONE_LINE_CHARS = 120  # an argument longer than this is edited in a box, however many lines
MAX_ARG_INPUTS = 90  # a modal holds 100 blocks; past this many arguments, one JSON box
MAX_OPTIONS = 100  # static_select, Slack's limit
OPTION_TEXT_LIMIT = 75  # an option's text, Slack's limit
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


# --- small builders -------------------------------------------------------------------------


def _plain(text: str, limit: int = SECTION_LIMIT) -> dict[str, Any]:
    cut = text if len(text) <= limit else text[: limit - 1] + t.ELLIPSIS
    return {"type": "plain_text", "text": cut or " ", "emoji": True}


def _section(mrkdwn: str) -> Block:
    """A section of already-escaped mrkdwn; verbatim, so Slack adds no links or mentions."""
    return {"type": "section", "text": {"type": "mrkdwn", "text": mrkdwn, "verbatim": True}}


def _context(mrkdwn: str) -> Block:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": mrkdwn, "verbatim": True}]}


def _header(text: str) -> Block:
    return {"type": "header", "text": _plain(text, 150)}


def _draft_details(review: Review) -> TaskReviewDetails:
    """A task's draft's details (a typed output, a refused edit); defaults for other reviews."""
    details = review.details
    return details if isinstance(details, TaskReviewDetails) else TaskReviewDetails()


def _cost(char: str) -> int:
    return len(escape(char))


def split_text(raw: str, limit: int) -> list[str]:
    """Cut ``raw`` into pieces whose *escaped* length is at most ``limit``.

    Cuts after a blank line, else after a newline, else after a space, as long as that
    keeps a piece at least half full; otherwise mid-word. Never inside an entity, since it
    cuts the raw text. ``"".join(split_text(raw, n)) == raw``.
    """
    if limit < len(escape("&")):
        raise ValueError("limit must hold any one escaped character")
    if not raw:
        return []
    sums = [0, *accumulate(_cost(c) for c in raw)]
    pieces: list[str] = []
    start = 0
    while start < len(raw):
        end = bisect_right(sums, sums[start] + limit) - 1
        if end < len(raw):
            floor = start + (end - start) // 2
            for sep in ("\n\n", "\n", " "):
                at = raw.rfind(sep, floor, end)
                if at != -1:
                    end = at + len(sep)
                    break
        pieces.append(raw[start:end])
        start = end
    return pieces


def _text_sections(raw: str) -> list[Block]:
    if not raw.strip():
        return [_section(t.EMPTY_DRAFT)]
    return [_section(escape(piece)) for piece in split_text(raw, SECTION_LIMIT)]


def _listing(lines: list[str], budget: int = LISTING_BUDGET) -> list[Block]:
    """Lines of mrkdwn packed into sections, within ``budget`` chars; then "…and N more".

    Keeps a list (crews, reviews) inside one message's ~12k chars of block text.
    """
    sections: list[str] = []
    used = 0
    for shown, line in enumerate(lines):
        line = line[:SECTION_LIMIT]
        if used + len(line) > budget:
            return [*map(_section, sections), _context(t.more_not_shown(len(lines) - shown))]
        used += len(line) + 1
        if sections and len(sections[-1]) + 1 + len(line) <= SECTION_LIMIT:
            sections[-1] += "\n" + line
        else:
            sections.append(line)
    return [_section(s) for s in sections]


def _inputs(inputs: dict[str, str]) -> list[Block]:
    if not inputs:
        return []
    lines = [f"*{escape(k)}*: {truncate(v, 300)}" for k, v in inputs.items()]
    return _listing(lines, budget=2500)


# --- reviews --------------------------------------------------------------------------------


def needs_file(review: Review) -> bool:
    """Whether the draft goes up as a file with :func:`review_file_summary`."""
    return len(review.prompt) > FILE_THRESHOLD


def _review_head(review: Review) -> list[Block]:
    details, draft = review.details, _draft_details(review)
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
        facts.append(f"*Agent:* {truncate(agent, 150)}")
    if draft.round > 0:
        facts.append(f"round {draft.round + 1}")
    if facts:
        blocks.append(_context(" · ".join(facts)))
    if task:
        what = t.TOOL if review.kind is ReviewKind.TOOL_APPROVAL else t.TASK
        blocks.append(_section(f"*{what}:* {truncate(task, 600)}"))
    if draft.refused_edit:
        blocks.append(_section(t.edit_refused(draft.refused_edit)))
    if draft.output_problem:
        blocks.append(_context(t.draft_not_typed(draft.output_model or "", draft.output_problem)))
    return blocks


def _button(action: DecisionKind, review: Review) -> Block:
    button: Block = {
        "type": "button",
        "action_id": action_id(action),
        "text": _plain(t.BUTTON[action], 75),
        "value": review.id,
    }
    if action in (DecisionKind.APPROVE, DecisionKind.ANSWER):
        button["style"] = "primary"
    if action is DecisionKind.REJECT:
        button["style"] = "danger"
        button["confirm"] = {
            "title": _plain(t.REJECT_CONFIRM_TITLE, 100),
            "text": _plain(t.REJECT_CONFIRM_TEXT[review.kind], 300),
            "confirm": _plain(t.REJECT_CONFIRM_YES, 30),
            "deny": _plain(t.REJECT_CONFIRM_NO, 30),
            "style": "danger",
        }
    return button


def _revise_button(run_id: str) -> Block:
    return {
        "type": "button",
        "action_id": action_id(REVISE),
        "text": _plain(t.REVISE_BUTTON, 75),
        "value": run_id,
    }


def _after_first_task(review: Review) -> bool:
    """A review of a task with tasks before it (the first has nothing to revise before it)."""
    return review.kind is ReviewKind.TASK_REVIEW and (streams.task_index(review.stream) or 0) > 0


def _proposed(review: Review) -> dict[str, Any] | None:
    """A tool call's proposed arguments; None for other reviews (and tool calls recorded
    without them)."""
    details = review.details
    return details.args if isinstance(details, ToolApprovalDetails) else None


def _shows_args(review: Review) -> bool:
    """Whether the review is a tool call shown by its arguments: they are its whole draft
    (its prompt, ``tool({...})``, is the same call on one line)."""
    return _proposed(review) is not None


def _args(review: Review) -> list[Block]:
    """A tool call's arguments, as the reviewer must see them before approving: one line
    per argument, and text with line breaks (or a list, an object) as a block below its
    name, its lines as they will be sent."""
    args = _proposed(review)
    if args is None:
        return []
    if not args:
        shown = json.dumps(args, ensure_ascii=False, default=str)
        return [_section(f"*{t.ARGUMENTS}:* {truncate(shown, ARGS_LIMIT)}")]
    share = min(max(ARGS_LIMIT // len(args), 100), ARG_LIMIT)
    lines = [f"*{t.ARGUMENTS}:*"]
    for name, value in args.items():
        shown = _arg_text(value)
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
        blocks.append(
            {"type": "actions", "block_id": f"countersign:{review.id}", "elements": buttons}
        )
        return [*blocks, _context(f"{t.REPLY_HINT[review.kind]} {ref}")]
    return [*blocks, *_outcome(review), _context(ref)]


def _outcome(review: Review) -> list[Block]:
    decision = review.decision
    if decision is None:
        return [_section(t.REVIEW_STATUS[review.status])]
    line = f"{t.decision_line(decision)} · {t.slack_date(decision.created_at)}"
    if decision.text and decision.kind is not DecisionKind.APPROVE:
        quoted = truncate(decision.text, DECISION_TEXT_LIMIT).replace("\n", "\n>")
        line += f"\n>{quoted}"
    return [_section(line)]


def _typed_json(review: Review) -> bool:
    """Whether the draft is a typed task's output as its model's JSON: shown as code."""
    draft = _draft_details(review)
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
    return [_section(f"{fence}{escape(piece)}{fence}") for piece in pieces]


def _review_blocks(
    review: Review, part: str, index: int, count: int, *, decided: bool
) -> list[Block]:
    blocks: list[Block] = []
    if index == 0:
        blocks += _review_head(review)
    if count > 1:
        blocks.append(_context(t.part_label(index + 1, count)))
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
        _section(truncate(review.prompt, SUMMARY_CHARS)),
        _context(note),
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
    if needs_file(review) if as_file is None else as_file:
        note = t.file_note_attached(len(review.prompt))
        blocks = _file_summary_blocks(review, note, decided=True)
    else:
        parts = _draft_parts(review)
        last = len(parts) - 1
        blocks = _review_blocks(review, parts[last], last, len(parts), decided=True)
    if review.decision is not None:
        fallback = t.decision_line(review.decision)
    else:
        fallback = t.REVIEW_STATUS[review.status]
    return Message(fallback, blocks)


# --- runs -------------------------------------------------------------------------------------


def run_root(run: Run, description: str, waiting_on: Collection[ReviewKind] = ()) -> Message:
    """The root message of a run's thread; updated as the run's status changes.

    ``waiting_on``: the kinds of the run's pending reviews, which say what a waiting run
    waits for."""
    head = t.run_title(run.crew, run.status, waiting_on)
    if description.strip():
        head += "\n" + truncate(description.strip(), 500)
    footer = f"{t.started_by(run.started_by, run.created_at)} · run {t.code(run.id)}"
    blocks = [_section(head), *_inputs(run.inputs), _context(footer)]
    return Message(t.run_fallback(run.crew, run.status, waiting_on), blocks)


def result_messages(run: Run, rejection: Decision | None = None) -> list[Message]:
    """The outcome in the thread: the output (split like drafts), or why there is none.

    ``rejection``: the decision that rejected a rejected run, to name who (a mention) and
    quote their reason; without it, the run's error says why."""
    title = _section(t.result_title(run.crew, run.status))
    fallback = t.run_fallback(run.crew, run.status)
    if run.status is RunStatus.REJECTED and rejection is not None:
        blocks = [_section(t.rejected_by(run.crew, rejection.decided_by))]
        if rejection.text:
            blocks.append(_section(f"*{t.REASON}:* {truncate(rejection.text, 2500)}"))
        return [Message(fallback, blocks)]
    if run.status is not RunStatus.SUCCEEDED:
        blocks = [title]
        if run.error:
            label = t.REASON if run.status is RunStatus.REJECTED else ""
            prefix = f"*{label}:* " if label else ""
            blocks.append(_section(prefix + truncate(run.error, 2500)))
        return [Message(fallback, blocks)]
    if not (run.output or "").strip():
        return [Message(fallback, [title, _section(t.NO_OUTPUT)])]
    parts = split_text(run.output or "", DRAFT_PER_MESSAGE)
    shown = parts[:MAX_RESULT_MESSAGES]
    messages = []
    for i, part in enumerate(shown):
        blocks = [title] if i == 0 else []
        if len(shown) > 1:
            blocks.append(_context(t.result_part(i + 1, len(shown))))
        blocks += _text_sections(part)
        messages.append(Message(fallback if i == 0 else t.result_part(i + 1, len(shown)), blocks))
    if len(parts) > len(shown):
        remaining = sum(len(p) for p in parts[len(shown) :])
        messages[-1].blocks.append(_context(t.output_cut(remaining, run.id)))
    return messages


def _review_line(review: Review) -> str:
    status = t.decision_line(review.decision) if review.decision else None
    status = status or t.REVIEW_STATUS[review.status]
    return f"• {t.REVIEW_NOUN[review.kind]} {t.code(review.id)}: {status}"


def status_message(run: Run, reviews: list[Review], *, revisable: bool = False) -> Message:
    """``/crew status``: the run, its inputs, its reviews and how each ended.

    With ``revisable`` (the run waits and has approved tasks), a button to re-open one.
    """
    waiting_on = [r.kind for r in reviews if r.status is ReviewStatus.PENDING]
    head = f"{t.run_title(run.crew, run.status, waiting_on)} · run {t.code(run.id)}"
    blocks = [_section(head), *_inputs(run.inputs)]
    blocks.append(_context(t.started_by(run.started_by, run.created_at)))
    if run.error:
        blocks.append(_section(truncate(run.error, 1000)))
    if run.divergence:
        blocks.append(_context(t.divergence_fallback()))
    blocks += _listing([_review_line(r) for r in reviews], budget=5000)
    if revisable:
        blocks.append(
            {"type": "actions", "block_id": "countersign:run", "elements": [_revise_button(run.id)]}
        )
    return Message(t.run_fallback(run.crew, run.status, waiting_on), blocks)


def pending_message(reviews: list[Review], runs: dict[str, Run]) -> Message:
    """``/crew pending``: what waits for a decision, oldest first, with where to find it."""
    if not reviews:
        return Message(t.NO_PENDING, [_section(t.NO_PENDING)])
    blocks = [_section(t.pending_title(len(reviews)))]
    for review in sorted(reviews, key=lambda r: r.created_at)[:MAX_LISTED]:
        run = runs.get(review.run_id)
        crew = f"*{escape(run.crew)}* · " if run else ""
        where = f" in {t.channel_ref(review.channel)}" if review.channel else ""
        line = (
            f"{crew}{t.REVIEW_NOUN[review.kind]} {t.code(review.id)}{where} · "
            f"{t.slack_date(review.created_at)}\n>{truncate(' '.join(review.prompt.split()), 200)}"
        )
        blocks.append(_section(line))
    if len(reviews) > MAX_LISTED:
        blocks.append(_context(t.more_not_shown(len(reviews) - MAX_LISTED)))
    return Message(t.pending_title(len(reviews)).strip("*"), blocks)


def crews_message(crews: list[tuple[str, str]]) -> Message:
    """``/crew list``: each crew's name and description."""
    if not crews:
        return Message(t.NO_CREWS, [_section(t.NO_CREWS)])
    lines = [f"• {t.code(name)}: {truncate(' '.join(d.split()), 300)}" for name, d in crews]
    blocks = [_section(t.CREWS_TITLE), *_listing(lines)]
    return Message(t.CREWS_TITLE.strip("*"), blocks)


def divergence_message(note: str) -> Message:
    """Said in the thread when a resumed run no longer matches its recording."""
    body = t.DIVERGED
    if note.strip():
        body += "\n" + truncate(note.strip(), 2000)
    return Message(t.divergence_fallback(), [_section(body)])


def note_message(note: RunNote) -> Message:
    """A note the runtime asked for, said once in the run's thread (small print)."""
    words = t.RUN_NOTES[note]
    return Message(words, [_context(words)])


# --- modals -----------------------------------------------------------------------------------


def _editable(review: Review) -> str:
    if (args := _proposed(review)) is not None:
        return json.dumps(args, indent=2, ensure_ascii=False, default=str)
    return review.prompt


def _utf16_prefix(text: str, units: int) -> str:
    """The longest prefix within ``units`` UTF-16 code units: Slack's client counts those."""
    used = 0
    for i, char in enumerate(text):
        used += 2 if ord(char) > 0xFFFF else 1
        if used > units:
            return text[:i]
    return text


def modal(
    action: DecisionKind, review: Review, channel_id: str | None, message_ts: str | None
) -> dict[str, Any]:
    """The ``views.open`` view for ``edit``, ``changes``, ``reject`` or ``answer``.

    The review id and the message to update travel in ``private_metadata``; the text comes
    back in ``state.values["text"]["value"]``. An edit box holds at most 3000 chars
    (Slack's limit), so a longer text is cut and the modal says so.

    Raises:
        ValueError: for an action that has no modal (``approve``) or is unknown.
    """
    if action not in MODAL_ACTIONS:
        raise ValueError(f"no modal for action {action!r}")
    metadata = {"review_id": review.id, "channel_id": channel_id, "message_ts": message_ts}
    details = review.details
    if (
        action is DecisionKind.EDIT
        and isinstance(details, ToolApprovalDetails)
        and (fields := _arg_inputs(details))
    ):
        head = _tool_head(review, details)
        return _view(callback_id(action), metadata, action, [*head, *fields])
    blocks: list[Block] = [_context(t.review_ref(review.id, review.run_id))]
    element: Block = {
        "type": "plain_text_input",
        "action_id": "value",
        "multiline": True,
        "max_length": INPUT_LIMIT,
        "placeholder": _plain(t.MODAL_PLACEHOLDER[action], 150),
    }
    if action is DecisionKind.REJECT and review.kind is ReviewKind.TOOL_APPROVAL:
        element["placeholder"] = _plain(t.MODAL_PLACEHOLDER_DENY, 150)
    if action is DecisionKind.ANSWER:
        blocks.append(_section(f"*{t.REVIEW_TITLE[review.kind]}:* {truncate(review.prompt, 2800)}"))
    if action is DecisionKind.EDIT:
        editable = _editable(review)
        initial = _utf16_prefix(editable, INPUT_LIMIT)
        if initial:
            element["initial_value"] = initial
        if len(initial) < len(editable):
            blocks.append(_context(t.edit_truncated_note(len(editable), INPUT_LIMIT)))
    label = t.MODAL_LABEL[action]
    if action is DecisionKind.EDIT and review.kind is ReviewKind.TOOL_APPROVAL:
        label = t.MODAL_LABEL_ARGS
    field: Block = {
        "type": "input",
        "block_id": "text",
        "label": _plain(label, 2000),
        "element": element,
        "optional": action is DecisionKind.REJECT,
    }
    if action is DecisionKind.EDIT and (model := _draft_details(review).output_model):
        field["label"] = _plain(t.modal_label_output(model), 2000)
        schema = _draft_details(review).output_schema or {}
        field["hint"] = _plain(t.output_hint(list(_as_dict(schema.get("properties")))), 2000)
    blocks.append(field)
    return _view(callback_id(action), metadata, action, blocks)


def _view(
    callback: str, metadata: dict[str, Any], action: str, blocks: list[Block]
) -> dict[str, Any]:
    return {
        "type": "modal",
        "callback_id": callback,
        "private_metadata": json.dumps(metadata),
        "title": _plain(t.MODAL_TITLE[action], 24),
        "submit": _plain(t.MODAL_SUBMIT[action], 24),
        "close": _plain(t.MODAL_CLOSE, 24),
        "blocks": blocks,
    }


# --- a tool call's arguments, one input each ----------------------------------------------


def _tool_head(review: Review, details: ToolApprovalDetails) -> list[Block]:
    blocks = [_context(t.review_ref(review.id, review.run_id))]
    line = f"*{t.TOOL}:* {t.code(details.tool)}"
    if details.description:
        line += f"\n{truncate(details.description, 600)}"
    return [*blocks, _section(line)]


def _as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _arg_names(properties: dict[str, Any], args: dict[str, Any]) -> list[str] | None:
    """The arguments to show: the schema's, in its order, then any other the call has.

    ``None`` when they cannot be one input each (none, too many, a name too long for a
    block_id); the modal is then one JSON box, which the service also accepts.
    """
    names = [*properties, *(name for name in args if name not in properties)]
    if not 0 < len(names) <= MAX_ARG_INPUTS:
        return None
    if not all(isinstance(n, str) and 0 < len(n) <= MAX_ARG_NAME for n in names):
        return None
    return names


def _arg_inputs(details: ToolApprovalDetails) -> list[Block]:
    """One input per argument of a tool call, prefilled with what the agent proposed.

    Block and action ids are both ``arg:<name>``: action ids must be unique in a view.
    """
    properties = _as_dict(details.schema.get("properties"))
    required = details.schema.get("required")
    args = details.args or {}
    names = _arg_names(properties, args)
    if names is None:
        return []
    return [
        _arg_input(
            name,
            _as_dict(properties.get(name)),
            args,
            required=isinstance(required, list) and name in required,
        )
        for name in names
    ]


def _arg_input(name: str, prop: dict[str, Any], args: dict[str, Any], *, required: bool) -> Block:
    kinds = schema_types(prop)
    title, description = (prop.get(key) for key in ("title", "description"))
    title = title if isinstance(title, str) else ""
    notes = [t.arg_hint(kinds, description if isinstance(description, str) else "")]
    element: Block
    if kinds and set(kinds) <= {"boolean", "null"} and "boolean" in kinds:
        element = {
            "type": "static_select",
            "action_id": arg_block_id(name),
            "options": [_option(t.BOOLEAN[v], v) for v in ("true", "false")],
        }
        proposed = args.get(name)
        if isinstance(proposed, bool):
            word = json.dumps(proposed)
            element["initial_option"] = _option(t.BOOLEAN[word], word)
    else:
        shown = _arg_text(args[name]) if name in args else ""
        # Sized to the value: one line for a one-line value, a box for text with lines.
        element = {
            "type": "plain_text_input",
            "action_id": arg_block_id(name),
            "multiline": "\n" in shown or len(shown) > ONE_LINE_CHARS,
            "max_length": INPUT_LIMIT,
        }
        initial = _utf16_prefix(shown, INPUT_LIMIT)
        if initial:
            element["initial_value"] = initial
        if len(initial) < len(shown):
            notes.append(t.arg_cut_note(len(shown), INPUT_LIMIT))
    return {
        "type": "input",
        "block_id": arg_block_id(name),
        "label": _plain(title or name, 2000),
        "hint": _plain(" ".join(notes), 2000),
        "element": element,
        "optional": not required,
    }


def _arg_text(value: Any) -> str:
    """A proposed value as a person edits it: text as is, anything else as JSON."""
    if isinstance(value, str):
        return value
    indent = 2 if isinstance(value, list | dict) and value else None
    return json.dumps(value, indent=indent, ensure_ascii=False, default=str)


def _option(label: str, value: str) -> Block:
    return {"text": _plain(label, OPTION_TEXT_LIMIT), "value": value}


# --- re-opening an earlier task -------------------------------------------------------------


def revise_modal(
    run_id: str,
    tasks: list[tuple[int, str]],
    channel_id: str | None,
    message_ts: str | None,
) -> dict[str, Any]:
    """The modal of "Revise an earlier task": which approved task, and the feedback.

    ``tasks`` are ``(index, label)`` pairs of the run's revisable tasks (at least one);
    the chosen index comes back as ``state.values["task"]["task"]`` (action ids are
    unique in a view), the feedback as ``state.values["text"]["value"]``.
    """
    options = [_option(t.task_option(i, label), str(i)) for i, label in tasks[:MAX_OPTIONS]]
    blocks: list[Block] = [
        _context(t.run_ref(run_id)),
        _section(t.REVISE_EXPLAINED),
        {
            "type": "input",
            "block_id": "task",
            "label": _plain(t.REVISE_TASK_LABEL, 2000),
            "element": {
                "type": "static_select",
                "action_id": "task",
                "placeholder": _plain(t.REVISE_TASK_PLACEHOLDER, 150),
                "options": options,
            },
        },
        {
            "type": "input",
            "block_id": "text",
            "label": _plain(t.MODAL_LABEL[REVISE], 2000),
            "element": {
                "type": "plain_text_input",
                "action_id": "value",
                "multiline": True,
                "max_length": INPUT_LIMIT,
                "placeholder": _plain(t.MODAL_PLACEHOLDER[REVISE], 150),
            },
        },
    ]
    metadata = {"run_id": run_id, "channel_id": channel_id, "message_ts": message_ts}
    return _view(callback_id(REVISE), metadata, REVISE, blocks)


def reminder_message(review: Review, reviewers: tuple[str, ...]) -> Message:
    """Said in the run's thread when a review has waited ``remind_after``."""
    words = t.reminder(review, reviewers)
    return Message(words, [_section(words)])


def escalation_message(review: Review, escalate_to: tuple[str, ...]) -> Message:
    """Said in the run's thread when a review has waited ``escalate_after``."""
    words = t.escalation(review, escalate_to)
    return Message(words, [_section(words)])


def notice_view(words: str) -> dict[str, Any]:
    """A modal that only says something (mrkdwn from ``bot.slack.text``, escaped there): opened at
    once while the real one is prepared (a trigger id lives 3 s), or shown instead of it when
    the review cannot be decided."""
    return {
        "type": "modal",
        "title": _plain(t.LOADING_TITLE, 24),
        "close": _plain("Close", 24),
        "blocks": [_section(words)],
    }


def reopened_message(review: Review) -> Message:
    """Said in the run's thread when an approved task is sent back to its agent."""
    words = t.task_reopened(review)
    return Message(words, [_section(words)])
