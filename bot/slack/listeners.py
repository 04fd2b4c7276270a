"""Slack's entry points: the ``/crew`` command, buttons, modals and thread replies.

Each listener acks first (Slack gives 3 s; modals need the trigger id right away),
parses the payload with a pure function, checks who is asking, calls one runtime
method across the one sync boundary (``asyncio.to_thread``), and answers in words
from ``bot.slack.text``. Every entry point is idempotent: requests are recorded and
deduplicated by ``bot.slack.intake`` before they get here, a decision is a compare-and-set
in storage, and what a request starts or decides carries its key, so handling it
again after a crash changes nothing.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltContext, AsyncRespond
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack import blocks, modals, text
from bot.slack.authz import CheckFailed, Reviewers
from bot.slack.commands import (
    USAGE,
    CancelCommand,
    CommandError,
    HelpCommand,
    ListCommand,
    PendingCommand,
    RunCommand,
    StatusCommand,
    parse_command,
)
from bot.slack.intake import REQUEST_KEY
from bot.slack.payloads import (
    BUTTON_PATTERN,
    MODAL_PATTERN,
    REVISE,
    ButtonClick,
    ModalSubmission,
    PayloadError,
    ReviseClick,
    action_id,
    arg_block_id,
    callback_id,
    parse_button,
    parse_message_event,
    parse_revise_click,
    parse_revise_submission,
    parse_slash,
    parse_submission,
)
from bot.slack.replies import interpret_reply
from crew_runtime import log_fields
from crew_runtime.arguments import coerce_fields, field_errors
from crew_runtime.config import ConfigError, CrewSpec, UnknownCrewError
from crew_runtime.errors import UsageError
from crew_runtime.outputs import parse_edited_output
from crew_runtime.service import Countersign
from storage import (
    AlreadyDecided,
    AlreadyFinal,
    DecisionKind,
    NotFound,
    Review,
    ReviewKind,
    ReviewStatus,
    Run,
    RunNotFound,
    RunStatus,
    StorageError,
    TaskReviewDetails,
    ToolApprovalDetails,
)

log = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")

# A person's reply comes plain, "also sent to the channel" (thread_broadcast), or with a
# file attached (file_share, a screenshot say): each decides like any reply.
_REPLY_SUBTYPES = frozenset({None, "thread_broadcast", "file_share"})

# Of an edit's problems, what the modal shows under its box (plain text).
_ERRORS_LIMIT = 600


async def sync(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """The one boundary between the event loop and synchronous storage/runtime code."""
    return await asyncio.to_thread(fn, *args, **kwargs)


class Listeners:
    """The bot's listeners, bound to one runtime service."""

    def __init__(
        self, service: Countersign, reviewers: Reviewers, wake: Callable[[], None]
    ) -> None:
        self.service = service
        self.store = service.store
        self.config = service.config
        self.reviewers = reviewers
        self.wake = wake

    def register(self, app: AsyncApp) -> None:
        app.command("/crew")(self.on_command)
        app.action(BUTTON_PATTERN)(self.on_button)
        app.view(MODAL_PATTERN)(self.on_submission)
        app.action(action_id(REVISE))(self.on_revise)
        app.view(callback_id(REVISE))(self.on_revise_submission)
        app.event("message")(self.on_message)
        app.event("app_mention")(self.on_message)

    # ------------------------------------------------------------ /crew

    async def on_command(
        self,
        ack: AsyncAck,
        body: dict[str, Any],
        respond: AsyncRespond,
        context: AsyncBoltContext,
    ) -> None:
        # The transport acked once the command was recorded (bot.slack.intake); every answer
        # goes by response_url, as an ephemeral message.
        await ack()
        await respond(**_ephemeral(await self._answer(body, context.get(REQUEST_KEY))))

    async def _answer(self, body: dict[str, Any], request_key: str | None) -> blocks.Message:
        try:
            slash = parse_slash(body)
            command = parse_command(slash.text)
        except CommandError as exc:
            return _words(exc.message)
        except PayloadError as exc:
            return _words(text.refusal(exc))
        if isinstance(command, HelpCommand):
            return _words(USAGE)
        if isinstance(command, ListCommand):
            return blocks.crews_message(
                [(s.name, s.description) for s in self.config.crews.values()]
            )
        if isinstance(command, RunCommand):
            return _words(
                await self._start(command, slash.user_id, slash.channel_id, body, request_key)
            )
        return await self._lookup(command, slash.user_id, slash.channel_id)

    async def _start(
        self,
        command: RunCommand,
        user_id: str,
        channel_id: str,
        body: dict[str, Any],
        request_key: str | None,
    ) -> str:
        try:
            spec = self.config.get(command.crew)
        except UnknownCrewError:
            return text.unknown_crew(command.crew, sorted(self.config.crews))
        if spec.channel and spec.channel.lstrip("#") not in (
            channel_id,
            str(body.get("channel_name", "")),
        ):
            return text.wrong_channel(spec.name, spec.channel)
        try:
            run = await sync(
                self.service.start_run,
                command.crew,
                command.inputs,
                started_by=user_id,
                channel=channel_id,
                request_key=request_key,
            )
        except (UsageError, ConfigError) as exc:
            log.warning("run of %s refused: %s", command.crew, exc)
            return text.refusal(exc)
        log.info("run %s (%s) started by %s", run.id, run.crew, user_id)
        self.wake()
        return text.starting(spec.name)

    async def _lookup(
        self,
        command: StatusCommand | CancelCommand | PendingCommand,
        user_id: str,
        channel_id: str,
    ) -> blocks.Message:
        try:
            if isinstance(command, StatusCommand):
                run = await sync(self.store.get_run, command.run_id)
                if not await self._may_see(user_id, channel_id, run):
                    raise RunNotFound(command.run_id)  # the answer to an id that never was
                reviews = await sync(self.store.list_reviews, status=None, run_id=run.id)
                # The button only for someone who may use it.
                revisable = bool(await self._revisable(run)) and await self._may_act(user_id, run)
                return blocks.status_message(run, reviews, revisable=revisable)
            if isinstance(command, CancelCommand):
                run = await sync(self.store.get_run, command.run_id)
                if not await self._may_act(user_id, run):
                    return _words(text.NOT_A_REVIEWER)
                run = await sync(self.service.cancel, run.id, by=user_id)
                self.wake()
                return _words(text.cancelled(run.id, user_id))
            return await self._pending_for(user_id)
        except NotFound as exc:
            return _words(text.not_found(exc))
        except AlreadyFinal as exc:
            return _words(text.already_final(exc.run_id, exc.status))
        except CheckFailed:
            return _words(text.CHECK_FAILED)

    async def _pending_for(self, user_id: str) -> blocks.Message:
        """The oldest pending reviews ``user_id`` may decide, read by an index: the crews
        they review, and for a crew naming no reviewers the channels they are in."""
        places: dict[str, set[str] | None] = {}
        open_crews = {s.name: s for s in self.config.crews.values() if not s.reviewers}
        for spec in self.config.crews.values():
            if spec.reviewers and await self.reviewers.may_decide(user_id, spec, None):
                places[spec.name] = None
        if open_crews:
            channels: dict[str, set[str]] = {}
            for crew, channel in await sync(self.store.pending_channels, list(open_crews)):
                if channel and await self.reviewers.may_decide(user_id, open_crews[crew], channel):
                    channels.setdefault(crew, set()).add(channel)
            places.update(channels)
        found = await sync(self.store.pending_reviews, places, limit=blocks.MAX_LISTED)
        return blocks.pending_message(found.reviews, found.runs, found.total)

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
            view_id = await self._open_loading_view(client, click.trigger_id)
            if view_id is None:
                await self._ephemeral_via_api(click.channel_id, click.user_id, text.MODAL_FAILED)
                return
        found = await self._review_and_run(click.review_id)
        refusal = None
        if found is None:
            refusal = text.REVIEW_GONE
        elif not _on_its_message(click, *found):
            refusal = text.NOT_THE_REVIEW_MESSAGE
        elif found[0].status != ReviewStatus.PENDING:
            refusal = text.already_decided(found[0])
        else:
            refusal = await self._refusal(click.user_id, found[1])
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
            request_key = context.get(REQUEST_KEY)
            await self._decide(
                found[0], DecisionKind.APPROVE, None, click.user_id, channel, request_key
            )

    async def _open_loading_view(
        self, client: AsyncWebClient, trigger_id: str | None, words: str = text.LOADING
    ) -> str | None:
        try:
            response = await client.views_open(
                trigger_id=trigger_id, view=modals.notice_view(words)
            )
        except SlackApiError as exc:
            log.warning("views.open failed: %s", api_error(exc))
            return None
        view = response.get("view") or {}
        return str(view.get("id")) if view.get("id") else None

    async def _update_view(
        self, client: AsyncWebClient, view_id: str, view: dict[str, Any]
    ) -> None:
        try:
            await client.views_update(view_id=view_id, view=view)
        except SlackApiError as exc:
            log.warning("views.update failed for %s: %s", view_id, api_error(exc))

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
        refusal = await self._refusal(submission.user_id, run)
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
        view_id = await self._open_loading_view(client, click.trigger_id, text.LOADING_RUN)
        if view_id is None:
            await self._ephemeral_via_api(click.channel_id, click.user_id, text.MODAL_FAILED)
            return
        await self._update_view(client, view_id, await self._revise_view(click))

    async def _revise_view(self, click: ReviseClick) -> dict[str, Any]:
        try:
            run = await sync(self.store.get_run, click.run_id)
        except NotFound:
            return modals.notice_view(text.RUN_GONE)
        refusal = await self._refusal(click.user_id, run)
        if refusal is not None:
            return modals.notice_view(refusal)
        tasks = await self._revisable(run)
        if not tasks:
            return modals.notice_view(text.NOTHING_TO_REVISE)
        channel = click.channel_id or run.channel
        return modals.revise_modal(run.id, tasks, channel, click.message_ts)

    async def _revisable(self, run: Run) -> list[tuple[int, str]]:
        if run.status is not RunStatus.WAITING:
            return []
        try:
            return await sync(self.service.revisable_tasks, run.id)
        except (UsageError, StorageError) as exc:
            log.warning("revisable tasks of %s: %s", run.id, exc)
            return []

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
        refusal = await self._refusal(submission.user_id, run)
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

    # ------------------------------------------------------------ replies

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
        refusal = await self._refusal(message.user_id, run)
        if refusal is not None:
            await self._ephemeral_via_api(message.channel_id, message.user_id, refusal)
            return
        await self._decide(
            review,
            reply.decision,
            reply.text,
            message.user_id,
            message.channel_id,
            context.get(REQUEST_KEY),
        )

    # ------------------------------------------------------------ helpers

    async def _decide(
        self,
        review: Review,
        kind: DecisionKind,
        words: str | None,
        user_id: str,
        channel: str | None,
        request_key: str | None,
    ) -> None:
        try:
            recorded = await sync(
                self.service.decide,
                review.id,
                kind,
                words,
                by=user_id,
                by_name=await self.reviewers.name_of(user_id),
                request_key=request_key,
            )
        except AlreadyDecided as exc:
            await self._ephemeral_via_api(channel, user_id, text.too_late(exc))
            return
        except (UsageError, StorageError) as exc:
            await self._ephemeral_via_api(channel, user_id, text.refusal(exc))
            return
        log.info("review %s: %s by %s", review.id, kind, user_id)
        self.wake()
        if recorded.status == ReviewStatus.PENDING:  # an approval short of the quorum
            required = await sync(self.service.approvals_required, recorded)
            counted = text.approval_counted(len(recorded.approvals), required)
            await self._ephemeral_via_api(channel, user_id, counted)

    async def _review_and_run(self, review_id: str) -> tuple[Review, Run] | None:
        """The review a click or a submission names, and its run; the request's log lines
        are about them (each request is handled in a task, a context, of its own)."""
        log_fields.REVIEW_ID.set(review_id)
        try:
            review = await sync(self.store.get_review, review_id)
            run = await sync(self.store.get_run, review.run_id)
        except NotFound:
            return None
        log_fields.RUN_ID.set(run.id)
        return review, run

    async def _may_see(self, user_id: str, channel_id: str, run: Run) -> bool:
        """A run's inputs and reviews are shown in its channel, and elsewhere only to
        whoever started it and to its reviewers."""
        if channel_id == run.channel or user_id == run.started_by:
            return True
        return await self._may_act(user_id, run)

    async def _refusal(self, user_id: str, run: Run) -> str | None:
        """Why ``user_id`` may not act on ``run``, in words for them; None when they may."""
        try:
            return None if await self._may_act(user_id, run) else text.NOT_A_REVIEWER
        except CheckFailed:
            return text.CHECK_FAILED

    async def _may_act(self, user_id: str, run: Run) -> bool:
        try:
            spec: CrewSpec = self.config.get(run.crew)
        except UnknownCrewError:
            return False
        return await self.reviewers.may_decide(user_id, spec, run.channel)

    async def _ephemeral_via_api(
        self, channel: str | None, user_id: str, words: str, *, thread_ts: str | None = None
    ) -> None:
        if channel is None:
            return
        try:
            await self.reviewers.client.chat_postEphemeral(
                channel=channel, user=user_id, text=words, thread_ts=thread_ts
            )
        except SlackApiError as exc:
            log.warning("could not tell %s: %s", user_id, api_error(exc))


def _on_its_message(click: ButtonClick, review: Review, run: Run) -> bool:
    """Whether a click was made on its review's own message: a click elsewhere carrying the
    review's id was not. Until the dispatcher has recorded where the message went (it does
    so after its last step), a click in the run's thread stands for it."""
    if review.message_ts is not None:
        return (click.channel_id, click.message_ts) == (review.channel, review.message_ts)
    return (click.channel_id, click.thread_ts) == (run.channel, run.thread_ts)


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


def _words(words: str) -> blocks.Message:
    return blocks.Message(text=words, blocks=[])


def _ephemeral(message: blocks.Message) -> dict[str, Any]:
    if message.blocks:
        return {"response_type": "ephemeral", "text": message.text, "blocks": message.blocks}
    return {"response_type": "ephemeral", "text": message.text}


def api_error(exc: SlackApiError) -> str:
    data = exc.response.data
    error = data.get("error") if isinstance(data, dict) else None
    return str(error or f"HTTP {exc.response.status_code}")
