"""Block Kit for a review's messages: its draft in parts (or, past :data:`FILE_THRESHOLD`,
a summary of the file the draft is uploaded as), a tool call's arguments, its buttons, and,
once decided, the decision in their place. The rules all messages keep are in
``bot.slack.blocks``' docstring.

The layout of a review's last message depends on the review alone, not on the run, so
:func:`decided_message` can rebuild it with the decision in place of the buttons.
"""

from __future__ import annotations

import json
from collections.abc import Collection

from bot.slack import block_text as t
from bot.slack.elements import (
    SECTION_LIMIT,
    Block,
    arg_text,
    changed_args,
    context,
    draft_details,
    plain,
    proposed,
    ran_args,
    section,
    split_text,
)
from bot.slack.message import (
    DRAFT_PER_MESSAGE,
    Message,
    header,
    listing,
    revise_button,
    text_sections,
)
from bot.slack.mrkdwn import escape, slack_date, truncate
from bot.slack.outcome_blocks import outcome_blocks, outcomes_of
from bot.slack.payloads import CLAIM, REASSIGN, action_id
from crew_runtime import streams
from crew_runtime.reviewers import stage_at
from crew_runtime.specs import Chain
from storage.details import QuestionDetails, ToolApprovalDetails
from storage.records import Review, Run
from storage.status import DecisionKind, ReviewKind

ARGS_LIMIT = 6000  # a tool call's arguments, its whole draft
ARG_LIMIT = SECTION_LIMIT - 200  # one argument's value, within a section with its name
FILE_THRESHOLD = 12_000  # longer drafts go up as a file, with a summary message
SUMMARY_CHARS = 500
DECISION_TEXT_LIMIT = 1000  # doubled at worst by quoting each line
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
    blocks = [header(f"{title}: {name}" if name else title)]
    facts = []
    if agent:
        facts.append(f"*{t.AGENT}:* {truncate(agent, 150)}")
    if draft.round > 0:
        facts.append(t.review_round(draft.round + 1))
    if review.digest:
        facts.append(t.action_digest(review.digest))
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
    args = ran_args(review)
    if args is None:
        return []
    changed = changed_args(review)
    title = t.ARGUMENTS_EDITED if changed else t.ARGUMENTS
    if not args:
        shown = json.dumps(args, ensure_ascii=False, default=str)
        return [section(f"*{title}:* {truncate(shown, ARGS_LIMIT)}")]
    share = min(max(ARGS_LIMIT // len(args), 100), ARG_LIMIT)
    lines = [f"*{title}:*"]
    for name, value in args.items():
        shown = arg_text(value)
        label = f"*{truncate(str(name), 100)}:*"
        if name in changed:
            label = f"{label} {t.EDITED_MARK}"
        if "\n" in shown:
            lines.append(f"{label}\n```{truncate(shown, share)}```")
        else:
            lines.append(f"{label} {truncate(shown, share) if shown else t.EMPTY_DRAFT}")
    return listing(lines, budget=ARGS_LIMIT + 500)


def _review_tail(review: Review, *, decided: bool) -> list[Block]:
    blocks = _args(review)
    ref = t.review_ref(review.id, review.run_id)
    if not decided:
        if outcomes_of(review):  # a flow's outcomes, in place of the generic decisions
            blocks += outcome_blocks(review)
            buttons = []
        else:
            buttons = [_button(a, review) for a in BUTTONS[review.kind]]
        if _after_first_task(review):
            buttons.append(revise_button(review.run_id))
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
    if review.kind is ReviewKind.TOOL_APPROVAL and decision.kind is DecisionKind.EDIT:
        line += f"\n{t.args_edited(changed_args(review))}"  # the arguments show the rest
    elif decision.text and decision.kind is not DecisionKind.APPROVE:
        quoted = truncate(decision.text, DECISION_TEXT_LIMIT).replace("\n", "\n>")
        line += f"\n>{quoted}"
    if not review.approvals:
        return [section(line)]
    given = t.approvals_given(
        [a.decided_by for a in review.approvals], [a.stage for a in review.approvals]
    )
    return [section(line), context(given)]


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
        return text_sections(part)
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
    approvers = [a.decided_by for a in review.approvals]
    return _with_status(review, t.approvals_so_far(approvers, required, expected))


def staged_message(review: Review, chain: Chain, expected: Collection[str] = ()) -> Message:
    """The review's last message again, buttons kept, with where its approval chain
    (``chain``) stands: the stage it is at, who approved there, who is ``expected`` (the
    stage's reviewers who have not), the stages passed and the next one."""
    index = stage_at(chain, review)
    stage = chain[index]
    given = [a.decided_by for a in review.approvals_at(stage.name)]
    parts = [t.stage_status(index + 1, len(chain), stage.name, given, stage.approvals_required)]
    if expected:
        parts.append(t.waiting_for(expected))
    for passed in chain[:index]:
        parts.append(
            t.stage_passed(passed.name, [a.decided_by for a in review.approvals_at(passed.name)])
        )
    if index + 1 < len(chain):
        parts.append(f"next: {escape(chain[index + 1].name)}")
    return _with_status(review, " · ".join(parts))


def _with_status(review: Review, words: str) -> Message:
    """The review's last message again, buttons kept, with ``words`` under them."""
    blocks = _last_blocks(review, decided=False)
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
