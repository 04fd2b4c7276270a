"""What the bot's Slack handlers share: the one boundary between the event loop and
synchronous code, who may see and act on a run, and telling a person something privately.

The handlers themselves are :class:`bot.slack.slash.SlashCommands` (``/crew``),
:class:`bot.slack.standing_buttons.StandingButtons` (approving all of a tool's calls, revoking
that) and :class:`bot.slack.listeners.Listeners` (buttons, modals, thread replies), built on
:class:`Handlers` as the Store is built on its parts. What several of them do is here too: the
review a button was clicked on and whether the clicker may act on it, recording a decision.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import Any, Literal, ParamSpec, TypeVar

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from bot.slack import blocks, modals, text
from bot.slack.authz import Reviewers
from bot.slack.batch_payloads import BatchClick, BatchItem, ItemResult
from bot.slack.outcome_payloads import OutcomeClick
from bot.slack.payloads import ButtonClick, ClaimClick, ReviseClick
from bot.slack.slack_errors import api_error as api_error  # where the handlers find it
from crew_runtime import log_fields, policy
from crew_runtime.config import CrewSpec
from crew_runtime.digests import matches
from crew_runtime.errors import UsageError
from crew_runtime.policy import Reason
from crew_runtime.reviewers import stage_at, stages_of
from crew_runtime.service import Countersign
from storage import (
    AlreadyDecided,
    CountersignError,
    DecisionKind,
    NotFound,
    Review,
    ReviewNotFound,
    ReviewStatus,
    Run,
    RunNotFound,
    RunStatus,
    StorageError,
)

log = logging.getLogger(__name__)

# The thread of the run a request is about (channel, thread ts): a private notice to the
# person who clicked or replied there is posted in it, not in the channel below. Each
# request is handled in a task (a context) of its own.
THREAD: ContextVar[tuple[str | None, str | None]] = ContextVar(
    "countersign_thread", default=(None, None)
)

# A click's modal opened as soon as the click was recorded (``Handlers.open_early``), ahead
# of its handling: its trigger_id and Slack's answer (None: Slack refused). Set in the
# click's own task, so its listener finds it there and opens no second one.
OPENED_EARLY: ContextVar[tuple[str, AsyncSlackResponse | None] | None] = ContextVar(
    "countersign_opened_early", default=None
)

# How many decisions of a batch are recorded at once: each waits on the database most of its
# time (PostgreSQL's round trips), and each is its own transaction, so a few overlap.
BATCH_AT_ONCE = 8

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
        THREAD.set((run.channel, run.thread_ts))
        return review, run

    async def _clicked_review(
        self, click: ButtonClick | ClaimClick | OutcomeClick, request_key: str | None = None
    ) -> tuple[tuple[Review, Run] | None, str | None]:
        """The review a button was clicked on, with its run, and why the clicker may not act
        on it (None: they may): gone, clicked elsewhere, no longer pending, not a reviewer
        (of the stage an approval chain is at). A click ``request_key`` recorded already
        (Slack retrying it) goes through, to be answered as the first time."""
        found = await self._review_and_run(click.review_id)
        if found is None:
            return None, text.REVIEW_GONE
        if not _on_its_message(click, *found):
            return found, text.NOT_THE_REVIEW_MESSAGE
        if found[0].made_by(request_key) or (
            isinstance(click, ClaimClick)
            and await sync(self.store.claimed_by_request, click.review_id, request_key)
        ):
            return found, None
        if found[0].status != ReviewStatus.PENDING:
            return found, text.already_decided(found[0])
        return found, await self._decision_refusal(click.user_id, *found)

    async def _decide(
        self,
        review: Review,
        kind: DecisionKind,
        words: str | None,
        user_id: str,
        channel: str | None,
        request_key: str | None,
        *,
        standing: bool = False,
    ) -> None:
        """Record ``user_id``'s decision (with ``standing``, an approval that also grants a
        standing approval of the tool's later calls) and tell them privately if it was
        refused or came too late."""
        try:
            run = await self._run_of(review)
            if run is None:
                raise RunNotFound(review.run_id)
            recorded = await self._recorded(
                review, run, kind, words, user_id, request_key=request_key, standing=standing
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
            await self._ephemeral_via_api(channel, user_id, await self._counted(recorded))

    async def _recorded(
        self,
        review: Review,
        run: Run,
        kind: DecisionKind,
        words: str | None,
        by: str,
        *,
        request_key: str | None,
        standing: bool = False,
        digest: str | None = None,
    ) -> Review:
        """``by``'s decision of ``review`` (of ``run``), as every door records it: the facts
        the review policy needs fetched (Slack's lookups, the delegations in force), then
        the service's one decision path, which asks the policy on the review as it reads it,
        compares ``digest`` (what ``by`` was shown), applies the quorum and records it by a
        compare-and-set. A request ``request_key`` recorded already is answered as the
        first time, with no lookup.

        Raises:
            CountersignError: refused (the policy's refusals, decided already, changed
                since shown, …), nothing recorded.
        """
        facts = None
        if review.status == ReviewStatus.PENDING and not review.made_by(request_key):
            spec = self.config.crews.get(run.crew)
            facts = await self._facts(*asked_for(spec, run, review))
            refused = policy.decide(spec, run, review, by, kind, facts)
            # Refused before Slack is asked the name; a review changed since shown is the
            # service's to say first, as it says it.
            if refused is not None and (digest is None or matches(review.digest, digest)):
                raise policy.error(refused, review, run)
        return await sync(
            self.service.decide,
            review.id,
            kind,
            words,
            by=by,
            by_name=await self.reviewers.name_of(by),
            request_key=request_key,
            standing=standing,
            facts=facts,
            expected_digest=digest,
        )

    async def _decide_batch(
        self, items: Sequence[BatchItem], by: str, request_key: str | None
    ) -> list[ItemResult]:
        """``by``'s decisions of ``items``, each its own decision by the one path a click
        takes (:meth:`_recorded`: the review policy, the quorum, the digest shown, the
        compare-and-set), :data:`BATCH_AT_ONCE` at a time, each answered apart (in the
        order of ``items``): recorded, or refused with why, whatever the others got (no
        transaction across them). Each item's request key is
        ``request_key`` and its review, so the batch handled again (a retry, a second
        click on the same confirmation) answers each as the first time and records none
        twice."""
        slots = asyncio.Semaphore(BATCH_AT_ONCE)

        async def one(item: BatchItem) -> ItemResult:
            key = None if request_key is None else f"{request_key}:{item.review_id}"
            async with slots:
                try:
                    found = await self._review_and_run(item.review_id)
                    if found is None:
                        raise ReviewNotFound(item.review_id)
                    recorded = await self._recorded(
                        *found,
                        item.kind,
                        item.text,
                        by,
                        request_key=key,
                        standing=item.standing,
                        digest=item.digest,
                    )
                except CountersignError as exc:
                    return ItemResult(item, None, exc)
            self.wake()  # its run is queued: a worker of this process need not wait
            return ItemResult(item, recorded, None)

        # Each in a task (a context) of its own: their log fields and threads stay theirs.
        results = list(await asyncio.gather(*(one(item) for item in items)))
        done = sum(r.error is None for r in results)
        log.info("a batch of %d by %s: %d recorded", len(items), by, done)
        return results

    async def _open_loading_view(
        self,
        client: AsyncWebClient,
        click: ButtonClick | ReviseClick | ClaimClick | OutcomeClick | BatchClick,
        words: str = text.LOADING,
    ) -> str | None:
        """Open the click's modal, saying ``words`` until it is filled (or take the one
        :meth:`open_early` opened for it); its view id, or None when Slack would not open
        it (the clicker is told so privately)."""
        early = OPENED_EARLY.get()
        if early is not None and early[0] == click.trigger_id:
            OPENED_EARLY.set(None)
            response = early[1]
        else:
            response = await self._views_open(client, click.trigger_id, words)
        view = (response.get("view") if response is not None else None) or {}
        if view.get("id"):
            return str(view["id"])
        await self._ephemeral_via_api(click.channel_id, click.user_id, text.MODAL_FAILED)
        return None

    async def open_early(self, client: AsyncWebClient, trigger_id: str) -> None:
        """Open a click's loading modal now, before its handling waits its turn behind the
        burst's other work (a trigger_id lives 3 s): its listener takes the view
        (:data:`OPENED_EARLY`). Run in the click's task; a failure other than Slack's answer
        leaves the opening to the listener."""
        try:
            response = await self._views_open(client, trigger_id, text.LOADING)
        except Exception as exc:
            log.warning("views.open, early, failed: %s", type(exc).__name__)
            return
        OPENED_EARLY.set((trigger_id, response))

    async def _views_open(
        self, client: AsyncWebClient, trigger_id: str | None, words: str
    ) -> AsyncSlackResponse | None:
        """``views.open`` of a notice saying ``words``; None (logged) when Slack refused."""
        try:
            return await client.views_open(trigger_id=trigger_id, view=modals.notice_view(words))
        except SlackApiError as exc:
            log.warning("views.open failed: %s", api_error(exc))
            return None

    async def _update_view(
        self, client: AsyncWebClient, view_id: str, view: dict[str, Any]
    ) -> None:
        try:
            await client.views_update(view_id=view_id, view=view)
        except SlackApiError as exc:
            log.warning("views.update failed for %s: %s", view_id, api_error(exc))

    async def _facts(self, *asked: policy.Asked, people: tuple[str, ...] = ()) -> policy.Facts:
        """The facts the review policy needs for ``asked`` (and whether ``people`` are bots),
        fetched by the one shell (``Reviewers.facts``) with the absences in force."""
        away = await sync(self.store.delegates)
        return await self.reviewers.facts(asked, away, people=people)

    async def _run_refusal(
        self, action: RunAction, user_id: str, run: Run, where: str | None = None
    ) -> str | None:
        """Why ``user_id`` may not ``action`` (cancel, revise, revoke, see) ``run``, in words
        for them; None when the review policy says they may."""
        spec = self.config.crews.get(run.crew)
        facts = await self._facts(*([] if spec is None else [policy.deciders(spec, run)]))
        if action == "see":
            refused = policy.may_see(spec, run, user_id, where, facts)
        else:
            refused = _RUN_ACTIONS[action](spec, run, user_id, facts)
        return None if refused is None else said(refused, None, run, action)

    async def _may_see(self, user_id: str, channel_id: str, run: Run) -> bool:
        """A run's inputs and reviews are shown in its channel, and elsewhere only to
        whoever started it and to its deciders (a lookup that failed: not shown)."""
        return await self._run_refusal("see", user_id, run, channel_id) is None

    async def _decision_refusal(
        self,
        user_id: str,
        review: Review,
        run: Run,
        request_key: str | None = None,
        kind: DecisionKind | None = None,
    ) -> str | None:
        """Why ``user_id`` may not decide (``kind``, or any decision) ``review`` now, in
        words for them; None when the review policy says they may. A request
        ``request_key`` recorded already (replayed after the stage moved on) goes through:
        storage answers it as the first time."""
        if review.made_by(request_key):
            return None
        spec = self.config.crews.get(run.crew)
        refused = policy.decide(
            spec, run, review, user_id, kind, await self._facts(*asked_for(spec, run, review))
        )
        return None if refused is None else said(refused, review, run)

    async def _reassign_refusal(self, by: str, to: str, review: Review, run: Run) -> str | None:
        """Why ``by`` may not give ``review`` to ``to`` (a bot, themself, whoever has it,
        someone the policy would not let decide it now); None when they may."""
        spec = self.config.crews.get(run.crew)
        facts = await self._facts(*asked_for(spec, run, review), people=(to,))
        refused = policy.reassign(spec, run, review, by, to, facts)
        if refused is None:
            return None
        if refused.person == to and refused.reason is not Reason.COULD_NOT_CHECK:
            return text.reassign_refused(refused.reason)
        return said(refused, review, run)

    async def _counted(self, review: Review) -> str:
        """What a reviewer is told when their approval counted and ``review`` still waits:
        how many it has of its quorum, or of its stage's, or that it passed the stage."""
        run = await sync(self.store.get_run, review.run_id)
        spec = self.config.crews.get(run.crew)
        chain = () if spec is None else stages_of(spec, review)
        if not chain:
            required = await sync(self.service.approvals_required, review)
            return text.approval_counted(len(review.approvals), required)
        index = stage_at(chain, review)
        stage = chain[index]
        given = len(review.approvals_at(stage.name))
        if index > 0 and given == 0:  # this approval passed the stage before
            return text.approval_counted_at_stage(chain[index - 1].name, 0, 0, stage.name)
        return text.approval_counted_at_stage(stage.name, given, stage.approvals_required, None)

    async def _run_of(self, review: Review) -> Run | None:
        try:
            return await sync(self.store.get_run, review.run_id)
        except NotFound:
            return None

    async def _ephemeral_via_api(
        self, channel: str | None, user_id: str, words: str, *, thread_ts: str | None = None
    ) -> None:
        """Tell ``user_id`` privately, in the thread of the run the request is about."""
        if channel is None:
            return
        if thread_ts is None and THREAD.get()[0] == channel:
            thread_ts = THREAD.get()[1]
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


def _on_its_message(
    click: ButtonClick | ClaimClick | OutcomeClick, review: Review, run: Run
) -> bool:
    """Whether a click was made on its review's own message: a click elsewhere carrying the
    review's id was not. Until the dispatcher has recorded where the message went (it does
    so after its last step), a click in the run's thread stands for it."""
    if review.message_ts is not None:
        return (click.channel_id, click.message_ts) == (review.channel, review.message_ts)
    return (click.channel_id, click.thread_ts) == (run.channel, run.thread_ts)


def words(said: str) -> blocks.Message:
    """A message of words alone."""
    return blocks.Message(text=said, blocks=[])


RunAction = Literal["cancel", "revise", "revoke", "see"]
_RUN_ACTIONS = {
    "cancel": policy.may_cancel,
    "revise": policy.may_revise,
    "revoke": policy.may_revoke,
}


def asked_for(spec: CrewSpec | None, run: Run, review: Review) -> list[policy.Asked]:
    """Whose memberships answering for ``review`` takes: those asked now, and (to say when
    theirs comes) every stage of its chain."""
    if spec is None:
        return []
    chain = stages_of(spec, review)
    return [policy.asked_now(spec, run, review), *(policy.Asked(s.reviewers) for s in chain)]


def said(refused: policy.Refusal, review: Review | None, run: Run, action: str = "decide") -> str:
    """A policy refusal in Slack's words, to the person refused (the one mapping of this
    door: the CLI's ``error:`` line and the API's problem body map ``policy.error`` too)."""
    if refused.reason is Reason.NOT_A_REVIEWER:
        return text.NOT_A_REVIEWER
    if refused.reason is Reason.COULD_NOT_CHECK:
        return text.CHECK_FAILED
    return text.refusal(policy.error(refused, review, run, action=action))
