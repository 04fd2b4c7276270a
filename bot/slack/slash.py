"""The ``/crew`` command: list the crews, start a run, a run's status, cancel it, one's
pending reviews, one's absence. Every answer is ephemeral and goes by ``response_url``."""

from __future__ import annotations

import logging
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncBoltContext
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from bot.slack import blocks, text
from bot.slack.authz import CheckFailed
from bot.slack.commands import (
    USAGE,
    AwayCommand,
    BackCommand,
    CancelCommand,
    CommandError,
    HelpCommand,
    ListCommand,
    PendingCommand,
    RunCommand,
    StatusCommand,
    parse_command,
)
from bot.slack.handlers import Handlers, api_error, sync, words
from bot.slack.intake import REQUEST_KEY
from bot.slack.payloads import PayloadError, parse_slash
from bot.slack.pending import pending_for
from crew_runtime import policy
from crew_runtime.config import ConfigError, UnknownCrewError
from crew_runtime.errors import UsageError
from storage import AlreadyFinal, DelegationRefused, NotFound, Review, Run, RunNotFound

log = logging.getLogger(__name__)


class SlashCommands(Handlers):
    """``/crew`` and its subcommands (``bot.slack.commands`` parses them)."""

    async def on_command(
        self,
        ack: AsyncAck,
        body: dict[str, Any],
        client: AsyncWebClient,
        context: AsyncBoltContext,
    ) -> None:
        # The transport acked once the command was recorded (bot.slack.intake); every answer
        # goes by response_url, as an ephemeral message.
        await ack()
        answer = _ephemeral(await self._answer(body, context.get(REQUEST_KEY)))
        url = body.get("response_url")
        if not isinstance(url, str) or not url:
            log.warning("a /crew command without a response_url: its answer is not sent")
            return
        # On the Web API client's pooled session (Bolt's respond() opens a connection each).
        await AsyncWebhookClient(url, session=client.session).send_dict(answer)

    async def _answer(self, body: dict[str, Any], request_key: str | None) -> blocks.Message:
        try:
            slash = parse_slash(body)
            command = parse_command(slash.text)
        except CommandError as exc:
            return words(exc.message)
        except PayloadError as exc:
            return words(text.refusal(exc))
        if isinstance(command, HelpCommand):
            return words(USAGE)
        if isinstance(command, ListCommand):
            return blocks.crews_message(
                [(s.name, s.description) for s in self.config.crews.values()]
            )
        if isinstance(command, RunCommand):
            return words(
                await self._start(command, slash.user_id, slash.channel_id, body, request_key)
            )
        if isinstance(command, AwayCommand | BackCommand):
            return words(await self._away(command, slash.user_id))
        return await self._lookup(command, slash.user_id, slash.channel_id)

    async def _away(self, command: AwayCommand | BackCommand, user_id: str) -> str:
        """One's own absence: begun (replacing any before it) or ended. The delegate must be
        someone who can review (Slack knows them, not deactivated, not a bot). Replayed, the
        request is answered from the inbox, and doing either again changes nothing more."""
        if isinstance(command, BackCommand):
            ended = await sync(self.service.back, user_id, by=user_id)
            return text.back(None if ended is None else ended.delegate)
        try:
            why = await self.reviewers.not_a_person(command.delegate)
        except CheckFailed:
            return text.DELEGATE_CHECK_FAILED
        if why is not None:
            return text.not_a_delegate(command.delegate, why)
        try:
            made = await sync(
                self.service.away, user_id, command.delegate, command.until, by=user_id
            )
        except (UsageError, DelegationRefused) as exc:
            return text.refusal(exc)
        log.info("%s is away until %s; %s reviews for them", user_id, made.until, made.delegate)
        return text.away(made.delegate, made.until)

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
        inputs = command.inputs
        nobody = policy.start_refusal(spec, inputs, channel_id)
        if nobody is not None:
            return text.nobody_decides(nobody.configure)
        name = spec.reviewers_from_input
        if name is not None and name in inputs:
            reviewer = command.mentions.get(name)
            if reviewer is None:
                return text.reviewer_not_mentioned(spec.name, name)
            try:
                why = await self.reviewers.not_a_person(reviewer)
            except CheckFailed:
                return text.REVIEWER_CHECK_FAILED
            if why is not None:
                return text.not_a_person(reviewer, why, name)
            inputs = {**inputs, name: reviewer}  # the run keeps the id; Slack shows the name
        try:
            run = await sync(
                self.service.start_run,
                command.crew,
                inputs,
                started_by=user_id,
                channel=channel_id,
                request_key=request_key,
            )
        except (UsageError, ConfigError) as exc:
            log.info("run of %s refused: %s", command.crew, exc)  # their mistake, told to them
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
                revisable = bool(await self._revisable(run)) and (
                    await self._run_refusal("revise", user_id, run) is None
                )
                spec = self.config.crews.get(run.crew)
                return blocks.status_message(
                    run,
                    reviews,
                    revisable=revisable,
                    reviewer_input=None if spec is None else spec.reviewers_from_input,
                )
            if isinstance(command, CancelCommand):
                run = await sync(self.store.get_run, command.run_id)
                refusal = await self._run_refusal("cancel", user_id, run)
                if refusal is not None:
                    return words(refusal)
                run = await sync(self.service.cancel, run.id, by=user_id)
                self.wake()
                return words(text.cancelled(run.id, user_id))
            return await self._pending_for(user_id)
        except NotFound as exc:
            return words(text.not_found(exc))
        except AlreadyFinal as exc:
            return words(text.already_final(exc.run_id, exc.status))
        except CheckFailed:
            return words(text.CHECK_FAILED)

    async def _pending_for(self, user_id: str) -> blocks.Message:
        found = await pending_for(self.service, self.reviewers, user_id, blocks.MAX_LISTED)
        links = await self._permalinks(found.reviews[: blocks.MAX_LISTED], found.runs)
        return blocks.pending_message(found.reviews, found.runs, found.total, links)

    async def _permalinks(self, reviews: list[Review], runs: dict[str, Run]) -> dict[str, str]:
        """The link to each review's message (its run's thread while the message is not
        posted yet), built as Slack builds permalinks; none when Slack did not say the
        workspace's address."""
        try:
            links = await self.reviewers.links()
        except SlackApiError as exc:
            log.warning("no links for /crew pending: %s", api_error(exc))
            return {}
        found = {r.id: links.review(r, runs.get(r.run_id)) for r in reviews}
        return {review_id: url for review_id, url in found.items() if url is not None}


def _ephemeral(message: blocks.Message) -> dict[str, Any]:
    if message.blocks:
        return {"response_type": "ephemeral", "text": message.text, "blocks": message.blocks}
    return {"response_type": "ephemeral", "text": message.text}
