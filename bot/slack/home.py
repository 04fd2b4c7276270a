"""The app's Home tab: published when a person opens it, refreshed when something changes
for them, through the outbox's dispatcher.

Opening Home (``app_home_opened``, tab ``home``) is recorded and acked like any event; its
handler only records the person (``Store.open_home``) and wakes the dispatcher, which
publishes the view (``views.publish``) at its next pass: the Slack call is never on the ack's
path, a failed one is retried with a backoff, and one path publishes for an opening and for a
change alike. A change is noticed as the dispatcher delivers the outbox row announcing it (a
run started or ended, a review opened, approved, decided or reopened): the people it
concerns who opened Home get a refresh (``Store.want_home``), due after a short debounce and
coalesced per person, so a burst of changes is one publish. Who is concerned: whoever started
the run, whoever decided the review, and whoever the review policy asks (``crew_runtime.policy``:
those asked now, for a review with an approval chain also the stage it just left; for a change
of the run, any of its deciders; user groups and channel members from Slack's cached lists, and
delegates of people away), among
those who opened Home in the last ``ACTIVE`` days, never anyone else: a crew open to a
channel of thousands costs a check per recent Home user, not a publish per member.

A publish is idempotent (the whole view replaces the last), so a row's refresh noticed
twice (the row retried) or a refresh published twice (a dispatcher that lost its claim) costs
a call, not a wrong view. Slack's refusal for a person (``user_not_found``, the Home tab not
enabled, a view refused) is given up on at once and a transient failure after a few tries
(``bot.slack.slack_errors`` tells which, for the outbox's dispatcher too); neither holds back
anything else.
"""

from __future__ import annotations

import logging
import secrets
from datetime import timedelta

from aiohttp import ClientError
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.authz import CheckFailed, Reviewers
from bot.slack.handlers import sync
from bot.slack.home_blocks import DECISIONS_SHOWN, PENDING_SHOWN, RUNS_SHOWN, home_view
from bot.slack.pending import pending_for
from bot.slack.slack_errors import explanation, is_transient
from crew_runtime import policy
from crew_runtime.policy import Asked
from crew_runtime.reviewers import stage_at, stages_of
from crew_runtime.service import Countersign
from storage import Backoff, OutboxKind, OutboxMessage, PendingReviews, RunStatus

log = logging.getLogger(__name__)

DEBOUNCE = timedelta(seconds=2)  # a burst of changes within it is one publish
ACTIVE = timedelta(days=30)  # whose Home is refreshed on a change: opened it since
MAX_ATTEMPTS = 5  # a refresh that keeps failing is given up (the next opening publishes)
BACKOFF = Backoff(first=timedelta(seconds=2), most=timedelta(minutes=5), jitter=0.0)
# The outbox rows that change what someone's Home shows.
CHANGES = frozenset(
    {
        OutboxKind.RUN_STARTED,
        OutboxKind.REVIEW_OPENED,
        OutboxKind.REVIEW_APPROVED,
        OutboxKind.REVIEW_DECIDED,
        OutboxKind.TASK_REOPENED,
        OutboxKind.RUN_FINISHED,
    }
)


class Home:
    """Publishes the Home views due, and notices the changes that make them due.

    Args:
        client: the dispatcher's client.
        service: the runtime service (its store and configuration).
        claim: how long a publish holds a person's refresh for this dispatcher.
        debounce: how long a change waits for others before its publish.
        backoff: how long a publish that failed waits before its next attempt (by
            default :data:`BACKOFF`).
    """

    def __init__(
        self,
        client: AsyncWebClient,
        service: Countersign,
        *,
        claim: timedelta,
        debounce: timedelta = DEBOUNCE,
        backoff: Backoff | None = None,
    ) -> None:
        self.client = client
        self.service = service
        self.store = service.store
        self.reviewers = Reviewers(client)
        self.claim = claim
        self.debounce = debounce
        self.backoff = BACKOFF if backoff is None else backoff

    async def drain(self) -> int:
        """Publish the Home views due; returns how many were published."""
        published = 0
        for user_id in await sync(self.store.due_homes):
            token = secrets.token_hex(8)
            claimed = await sync(self.store.claim_home, user_id, token, self.claim)
            if claimed is None:  # another dispatcher has it
                continue
            shown, attempts = claimed
            try:
                await self.publish(user_id)
            except (SlackApiError, ClientError, TimeoutError) as exc:
                await self._failed(user_id, token, shown, attempts, exc)
                continue
            except Exception as exc:  # a bug, say: given up, never tried again and again
                log.exception("home of %s: not published", user_id)
                await sync(self.store.home_published, user_id, token, shown, error=repr(exc))
                continue
            published += await sync(self.store.home_published, user_id, token, shown)
        return published

    async def publish(self, user_id: str) -> None:
        """Build ``user_id``'s Home view from the database as it is now and publish it."""
        pending: PendingReviews | None
        try:
            pending = await pending_for(self.service, self.reviewers, user_id, PENDING_SHOWN)
        except CheckFailed:
            pending = None
        going = await sync(self.store.runs_going, user_id, RUNS_SHOWN)
        waiting = [r.id for r in going if r.status is RunStatus.WAITING]
        waiting_on = await sync(self.store.waiting_on, waiting)
        decided, runs = await sync(self.store.decided_by, user_id, DECISIONS_SHOWN)
        links = await self.reviewers.links()
        view = home_view(pending, going, decided, runs, links, waiting_on)
        await self.client.views_publish(user_id=user_id, view=view)

    async def noticed(self, message: OutboxMessage) -> None:
        """The outbox row ``message`` was delivered: refresh the Home of whom it concerns.
        Never raises: a Home left stale is shown fresh when it is next opened."""
        if message.kind not in CHANGES:
            return
        try:
            concerned = await self._concerned(message)
            if concerned:
                await sync(self.store.want_home, concerned, self.debounce)
        except Exception:
            log.exception("outbox %d: whose Home it changes is unknown", message.id)

    async def _concerned(self, message: OutboxMessage) -> set[str]:
        users = await sync(self.store.home_users, self.store.clock() - ACTIVE)
        if not users:
            return set()
        run = await sync(self.store.get_run, message.run_id)
        concerned = {u for u in users if u == run.started_by}
        review = None
        if message.review_id is not None:
            review = await sync(self.store.get_review, message.review_id)
            if review.decision is not None and review.decision.decided_by in users:
                concerned.add(review.decision.decided_by)
        spec = self.service.config.crews.get(run.crew)
        if spec is None:
            return concerned
        # Who the review policy asks: now, and (a stage passing) the stage just left; for a
        # change of the run, any of its deciders.
        asked = [policy.deciders(spec, run)]
        if review is not None:
            asked = [policy.asked_now(spec, run, review)]
            if chain := stages_of(spec, review):
                asked.append(Asked(chain[max(stage_at(chain, review) - 1, 0)].reviewers))
        held = await sync(self.store.delegates)
        facts = await self.reviewers.facts(asked, held)
        # A lookup that failed is a no here (nobody to ask to try again: the next opening
        # of their Home shows the truth).
        concerned.update(u for u in users if policy.one_of(u, asked, facts))
        return concerned

    async def _failed(
        self, user_id: str, token: str, shown: int, attempts: int, exc: Exception
    ) -> None:
        """Try again later after a transient failure, a few times; else give up the
        changes this publish would have shown (not those that come after)."""
        reason = f"slack: {explanation(exc)}" if isinstance(exc, SlackApiError) else repr(exc)
        if is_transient(exc) and attempts + 1 < MAX_ATTEMPTS:
            log.warning("home of %s: %s; retrying", user_id, reason)
            backoff = self.backoff.after(attempts + 1)
            await sync(self.store.home_failed, user_id, token, reason, backoff)
            return
        log.warning("home of %s: %s; given up", user_id, reason)
        await sync(self.store.home_published, user_id, token, shown, error=reason)
