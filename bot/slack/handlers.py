"""What the bot's Slack handlers share: the one boundary between the event loop and
synchronous code, who may see and act on a run, and telling a person something privately.

The handlers themselves are :class:`bot.slack.slash.SlashCommands` (``/crew``) and
:class:`bot.slack.listeners.Listeners` (buttons, modals, thread replies), built on
:class:`Handlers` as the Store is built on its parts.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from slack_sdk.errors import SlackApiError

from bot.slack import blocks, text
from bot.slack.authz import CheckFailed, Reviewers
from crew_runtime import log_fields
from crew_runtime.config import CrewSpec, UnknownCrewError
from crew_runtime.errors import UsageError
from crew_runtime.service import Countersign
from storage import NotFound, Review, Run, RunStatus, StorageError

log = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")


async def sync(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """The one boundary between the event loop and synchronous storage/runtime code."""
    return await asyncio.to_thread(fn, *args, **kwargs)


class Handlers:
    """One runtime service, who may decide, and how to wake the workers: what every
    handler of the bot's Slack surface is bound to."""

    def __init__(
        self, service: Countersign, reviewers: Reviewers, wake: Callable[[], None]
    ) -> None:
        self.service = service
        self.store = service.store
        self.config = service.config
        self.reviewers = reviewers
        self.wake = wake

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
        """Whether ``user_id``, or someone away whose reviews they hold, may decide ``run``'s
        reviews.

        Raises:
            CheckFailed: a membership lookup failed and no other one said yes.
        """
        try:
            spec: CrewSpec = self.config.get(run.crew)
        except UnknownCrewError:
            return False
        reviewers = spec.reviewers_of(run.inputs)
        # Whoever is away and left their reviews to ``user_id`` (a delegate decides what the
        # person away could); a failed lookup for one of them is no answer for the others.
        failed: CheckFailed | None = None
        for person in await sync(self.service.acting_for, user_id):
            try:
                if await self.reviewers.may_decide(person, reviewers, run.channel):
                    return True
            except CheckFailed as exc:
                failed = exc
        if failed is not None:
            raise failed
        return False

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

    async def _revisable(self, run: Run) -> list[tuple[int, str]]:
        if run.status is not RunStatus.WAITING:
            return []
        try:
            return await sync(self.service.revisable_tasks, run.id)
        except (UsageError, StorageError) as exc:
            log.warning("revisable tasks of %s: %s", run.id, exc)
            return []


def words(said: str) -> blocks.Message:
    """A message of words alone."""
    return blocks.Message(text=said, blocks=[])


def api_error(exc: SlackApiError) -> str:
    data = exc.response.data
    error = data.get("error") if isinstance(data, dict) else None
    return str(error or f"HTTP {exc.response.status_code}")
