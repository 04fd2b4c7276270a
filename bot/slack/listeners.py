"""Slack's entry points: review buttons and modals, the revise button and modal, replies in
a run's thread, the Home tab opened, and (from :class:`bot.slack.slash.SlashCommands`) the
``/crew`` command.

Each listener acks first (Slack gives 3 s; modals need the trigger id right away),
parses the payload with a pure function, checks who is asking, calls one runtime
method across the one sync boundary (``asyncio.to_thread``), and answers in words
from ``bot.slack.text``. Every entry point is idempotent: requests are recorded and
deduplicated by ``bot.slack.intake`` before they get here, a decision is a compare-and-set
in storage, and what a request starts or decides carries its key, so handling it
again after a crash changes nothing.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Coroutine
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltContext
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack import modals, text
from bot.slack.batch_buttons import BatchButtons
from bot.slack.handlers import THREAD, sync
from bot.slack.intake import REQUEST_KEY
from bot.slack.outcome_buttons import OutcomeButtons
from bot.slack.payloads import (
    BUTTON_PATTERN,
    CLAIM,
    MODAL_PATTERN,
    REASSIGN,
    REVISE,
    ModalSubmission,
    PayloadError,
    ReviseClick,
    action_id,
    arg_block_id,
    callback_id,
    parse_button,
    parse_claim_click,
    parse_message_event,
    parse_reassign_submission,
    parse_revise_click,
    parse_revise_submission,
    parse_submission,
)
from bot.slack.replies import interpret_reply
from bot.slack.slash import SlashCommands
from bot.slack.standing_buttons import StandingButtons
from crew_runtime import log_fields
from crew_runtime.arguments import coerce_fields, field_errors
from crew_runtime.errors import UsageError
from crew_runtime.outputs import parse_edited_output
from storage import (
    DecisionKind,
    NotFound,
    Review,
    ReviewKind,
    StorageError,
    TaskReviewDetails,
    ToolApprovalDetails,
)

log = logging.getLogger(__name__)

# A person's reply comes plain, "also sent to the channel" (thread_broadcast), or with a
# file attached (file_share, a screenshot say): each decides like any reply.
_REPLY_SUBTYPES = frozenset({None, "thread_broadcast", "file_share"})

# Of an edit's problems, what the modal shows under its box (plain text).
_ERRORS_LIMIT = 600


class Listeners(BatchButtons, OutcomeButtons, StandingButtons, SlashCommands):
    """The bot's listeners: ``/crew`` (:class:`SlashCommands`), review buttons and modals,
    a flow's outcome buttons (:class:`OutcomeButtons`), approving all of a tool's calls and
    revoking that (:class:`StandingButtons`), deciding several reviews at once
    (:class:`BatchButtons`), the revise button and modal, and replies in a run's thread."""

    def register(self, app: AsyncApp) -> None:
        self.register_batch(app)
        self.register_standing(app)
        self.register_outcomes(app)
        app.command("/crew")(self.on_command)
        app.action(BUTTON_PATTERN)(self.on_button)
        app.view(MODAL_PATTERN)(self.on_submission)
        app.action(action_id(REVISE))(self.on_revise)
        app.view(callback_id(REVISE))(self.on_revise_submission)
        app.action(action_id(CLAIM))(self.on_claim)
        app.action(action_id(REASSIGN))(self.on_claim)
        app.view(callback_id(REASSIGN))(self.on_reassign_submission)
        app.event("message")(self.on_message)
        app.event("app_mention")(self.on_message)
        app.event("app_home_opened")(self.on_home_opened)

    def early_step(self, trigger_id: str, clicked: str) -> Coroutine[Any, Any, None] | None:
        """What a fresh click needs as soon as it is recorded (``Intake``'s ``early``): a
        review button that opens a modal (all but Approve, as :meth:`on_button` does) has
        it opened at once, ahead of the burst's other work; the listener fills it."""
        found = BUTTON_PATTERN.match(clicked)
        if found is None or found.group(1) == DecisionKind.APPROVE.value:
            return None
        return self.open_early(self.reviewers.client, trigger_id)

    # ------------------------------------------------------------ buttons

    async def on_button(
        self,
        ack: AsyncAck,
        body: dict[str, Any],
        client: AsyncWebClient,
        context: AsyncBoltContext,
    ) -> None:
        await ack()
        try:
            click = parse_button(body)
        except PayloadError as exc:
            log.warning("ignoring a malformed button payload: %s", exc)
            return
        view_id = None
        if click.action != DecisionKind.APPROVE:
            # The trigger id dies 3 s after the click: open the modal before any
            # database read, which can queue behind busy crews, and fill it after.
            view_id = await self._open_loading_view(client, click)
            if view_id is None:
                return
        request_key = context.get(REQUEST_KEY)
        found, refusal = await self._clicked_review(click, request_key)
        channel = click.channel_id or (found[1].channel if found else None)
        if view_id is not None:
            if refusal is None and found is not None:
                view = modals.modal(click.action, found[0], channel, click.message_ts)
            else:
                view = modals.notice_view(refusal or text.REVIEW_GONE)
            await self._update_view(client, view_id, view)
        elif refusal is not None:
            await self._ephemeral_via_api(channel, click.user_id, refusal)
        elif found is not None:
            await self._decide(
                found[0], DecisionKind.APPROVE, None, click.user_id, channel, request_key
            )

    # ------------------------------------------------------------ modals

    async def on_submission(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        try:
            submission = parse_submission(body)
        except PayloadError as exc:
            log.warning("ignoring a malformed view submission: %s", exc)
            await ack()
            return
        # Errors must name an input of the modal: the text box, or a tool call's first argument.
        where = arg_block_id(next(iter(submission.fields))) if submission.fields else "text"
        if not submission.fields and not submission.text.strip():
            await ack(response_action="errors", errors={"text": text.EMPTY_TEXT})
            return
        found = await self._review_and_run(submission.review_id)
        if found is None:
            await ack(response_action="errors", errors={where: text.REVIEW_GONE})
            return
        review, run = found
        refusal = await self._decision_refusal(
            submission.user_id, review, run, kind=submission.action
        )
        if refusal is not None:
            await ack(response_action="errors", errors={where: refusal})
            return
        words = submission.text
        if submission.fields and review.kind is ReviewKind.TOOL_APPROVAL:
            args, errors = _edited_args(review, submission)
            if errors:
                await ack(response_action="errors", errors=errors)
                return
            words = json.dumps(args, ensure_ascii=False)
        elif submission.action == DecisionKind.EDIT and (
            problems := _output_problems(review, words)
        ):
            await ack(response_action="errors", errors={"text": problems})
            return
        try:
            await sync(
                self.service.decide,
                review.id,
                submission.action,
                words,
                by=submission.user_id,
                by_name=await self.reviewers.name_of(submission.user_id),
            )
        except (UsageError, StorageError) as exc:
            await ack(response_action="errors", errors={where: text.refusal_in_form(exc)})
            return
        await ack()
        log.info("review %s: %s by %s", review.id, submission.action, submission.user_id)
        self.wake()

    # ------------------------------------------------------------ revising an earlier task

    async def on_revise(self, ack: AsyncAck, body: dict[str, Any], client: AsyncWebClient) -> None:
        await ack()
        try:
            click = parse_revise_click(body)
        except PayloadError as exc:
            log.warning("ignoring a malformed revise click: %s", exc)
            return
        # As in on_button: open the modal within the trigger id's 3 s, fill it after.
        view_id = await self._open_loading_view(client, click, text.LOADING_RUN)
        if view_id is None:
            return
        await self._update_view(client, view_id, await self._revise_view(click))

    async def _revise_view(self, click: ReviseClick) -> dict[str, Any]:
        try:
            run = await sync(self.store.get_run, click.run_id)
        except NotFound:
            return modals.notice_view(text.RUN_GONE)
        refusal = await self._run_refusal("revise", click.user_id, run)
        if refusal is not None:
            return modals.notice_view(refusal)
        tasks = await self._revisable(run)
        if not tasks:
            return modals.notice_view(text.NOTHING_TO_REVISE)
        channel = click.channel_id or run.channel
        return modals.revise_modal(run.id, tasks, channel, click.message_ts)

    async def on_revise_submission(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        try:
            submission = parse_revise_submission(body)
        except PayloadError as exc:
            log.warning("ignoring a malformed revise submission: %s", exc)
            await ack()
            return
        if submission.task_index is None:
            await ack(response_action="errors", errors={"task": text.CHOOSE_TASK})
            return
        if not submission.feedback.strip():
            await ack(response_action="errors", errors={"text": text.EMPTY_TEXT})
            return
        try:
            run = await sync(self.store.get_run, submission.run_id)
        except NotFound:
            await ack(response_action="errors", errors={"task": text.RUN_GONE})
            return
        refusal = await self._run_refusal("revise", submission.user_id, run)
        if refusal is not None:
            await ack(response_action="errors", errors={"task": refusal})
            return
        try:
            await sync(
                self.service.revise,
                run.id,
                submission.task_index,
                submission.feedback,
                by=submission.user_id,
            )
        except (UsageError, StorageError) as exc:
            await ack(response_action="errors", errors={"task": text.refusal_in_form(exc)})
            return
        by = submission.user_id
        log.info("run %s: task %s re-opened by %s", run.id, submission.task_index, by)
        await ack()
        self.wake()

    # ------------------------------------------------------------ claiming and reassigning

    async def on_claim(
        self,
        ack: AsyncAck,
        body: dict[str, Any],
        client: AsyncWebClient,
        context: AsyncBoltContext,
    ) -> None:
        """A click on *Claim* records the clicker as handling the review; one on *Reassign*
        opens a modal to choose who should (as in on_button, before any database read)."""
        await ack()
        try:
            click = parse_claim_click(body)
        except PayloadError as exc:
            log.warning("ignoring a malformed claim click: %s", exc)
            return
        view_id = None
        if click.reassign:
            view_id = await self._open_loading_view(client, click)
            if view_id is None:
                return
        request_key = context.get(REQUEST_KEY)
        found, refusal = await self._clicked_review(click, request_key)
        channel = click.channel_id or (found[1].channel if found else None)
        if view_id is not None:
            shown = modals.reassign_modal(found[0]) if refusal is None and found else None
            await self._update_view(client, view_id, shown or modals.notice_view(refusal or ""))
        elif refusal is not None:
            await self._ephemeral_via_api(channel, click.user_id, refusal)
        elif found is not None:
            try:
                await sync(
                    self.service.claim,
                    found[0].id,
                    by=click.user_id,
                    request_key=request_key,
                )
            except (UsageError, StorageError) as exc:
                await self._ephemeral_via_api(channel, click.user_id, text.refusal(exc))

    async def on_reassign_submission(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        """The chosen person must be allowed to decide the run's reviews (Slack says, for
        a group or the channel); else the modal stays open and says so."""
        try:
            submission = parse_reassign_submission(body)
        except PayloadError as exc:
            log.warning("ignoring a malformed reassign submission: %s", exc)
            await ack()
            return
        found = await self._review_and_run(submission.review_id)
        if found is None:
            await ack(response_action="errors", errors={"to": text.REVIEW_GONE})
            return
        review, run = found
        refusal = await self._reassign_refusal(submission.user_id, submission.to, review, run)
        if refusal is not None:
            await ack(response_action="errors", errors={"to": refusal})
            return
        try:
            await sync(
                self.service.claim,
                review.id,
                by=submission.user_id,
                to=submission.to,
                request_key=f"view:{submission.view_id}",
            )
        except (UsageError, StorageError) as exc:
            await ack(response_action="errors", errors={"to": text.refusal_in_form(exc)})
            return
        await ack()
        log.info("review %s: reassigned to %s by %s", review.id, submission.to, submission.user_id)

    # ------------------------------------------------------------ replies

    async def on_home_opened(self, event: dict[str, Any]) -> None:
        """Someone opened the app's Home tab: record them and wake the dispatcher, which
        publishes their view (``bot.slack.home``); the Messages tab is Slack's."""
        user = event.get("user")
        if event.get("tab") == "home" and isinstance(user, str) and user:
            await sync(self.store.open_home, user)
            self.wake()

    async def on_message(self, body: dict[str, Any], context: AsyncBoltContext) -> None:
        # Slack's retries and the app_mention/message twins of one message are one request
        # to the intake (keyed by channel and ts): this runs once per message, or again
        # only after a crash, when the decision's request key makes it a no-op.
        try:
            message = parse_message_event(body)
        except PayloadError:
            return
        if message.bot_id or message.subtype not in _REPLY_SUBTYPES or not message.user_id:
            return  # bots, edits, deletions, joins: not a person's reply
        if not message.thread_ts or message.thread_ts == message.ts:
            return
        run = await sync(self.store.find_run_by_thread, message.channel_id, message.thread_ts)
        if run is None:
            return
        log_fields.RUN_ID.set(run.id)
        THREAD.set((run.channel, run.thread_ts))
        pending = await sync(self.store.list_reviews, run_id=run.id)
        if not pending:
            words = text.nothing_pending(run.status)
            await self._ephemeral_via_api(
                message.channel_id, message.user_id, words, thread_ts=message.thread_ts
            )
            return
        review = pending[0]
        log_fields.REVIEW_ID.set(review.id)
        reply = interpret_reply(message.text, review.kind)
        if reply is None:
            await self._ephemeral_via_api(
                message.channel_id, message.user_id, text.reply_hint(review.kind)
            )
            return
        request_key = context.get(REQUEST_KEY)
        refusal = await self._decision_refusal(message.user_id, review, run, request_key)
        if refusal is not None:
            await self._ephemeral_via_api(message.channel_id, message.user_id, refusal)
            return
        await self._decide(
            review,
            reply.decision,
            reply.text,
            message.user_id,
            message.channel_id,
            request_key,
        )


def _edited_args(
    review: Review, submission: ModalSubmission
) -> tuple[dict[str, Any], dict[str, str]]:
    """A tool call's arguments from its edit modal, and the errors by input (empty if none).

    Each field is typed by the tool's schema, then the whole checked against it, so a
    reviewer sees every problem next to its field; the service checks them again.
    """
    details = review.details
    schema = details.schema if isinstance(details, ToolApprovalDetails) else {}
    args, wrong = coerce_fields(submission.fields, schema)
    if wrong:
        problems = {name: text.arg_problem(kinds) for name, kinds in wrong.items()}
    else:
        problems = field_errors(schema, args)
    first = next(iter(submission.fields))
    errors: dict[str, str] = {}
    for name, problem in problems.items():
        # A problem with an argument the modal has no input for goes on the first input.
        where = arg_block_id(name if name in submission.fields else first)
        errors[where] = (errors[where] + " " if where in errors else "") + problem[:150]
    return args, errors


def _output_problems(review: Review, words: str) -> str | None:
    """Why an edit of a typed task's draft does not fit its output model, field by field;
    None when it fits (or the task is not typed). The service checks it again."""
    details = review.details
    if not isinstance(details, TaskReviewDetails) or details.output_schema is None:
        return None
    try:
        parse_edited_output(words, details.output_schema)
    except ValueError as exc:
        return str(exc)[:_ERRORS_LIMIT]
    return None
