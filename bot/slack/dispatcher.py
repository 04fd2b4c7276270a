"""The outbox dispatcher: announces in Slack what storage committed.

State changes and the rows announcing them commit together; this loop delivers them
in order, one run at a time. A row may take several Slack calls (a draft in parts, a
file and its summary, a result and the root message's update), so it is delivered step
by step and each step is recorded in the row once done: a failed call (rate limit past
the client's retries, a 5xx, a network error) leaves the row in the outbox, and the
retry, after a backoff, goes on from the first step not done. Later rows of the same
run wait, so a thread never shows a result before its draft.

Posts and uploads must not happen twice, and Slack can apply a call and lose its answer
(a timeout, a reset connection, a 5xx from its edge). So every post carries message
metadata naming its row and step and is recorded as tried before it is made (and
forgotten again if Slack answers that it refused it: a 429, an error code); an upload
goes through the external upload flow, so its file id is recorded before the upload is
completed. A step tried before is first looked for: thread replies with
``conversations.replies``, root messages with ``conversations.history``, files with
``files.info``. Lookups happen only on retries: those methods are rate-limited hard for
apps outside the Marketplace. ``chat.update`` of a message that exists is idempotent
and is simply made again.

For the same reason the client given to the dispatcher must not retry server errors or
dropped connections itself (``bot.hosting.server.slack_client``): only this module knows how to
retry a post that may have been applied. Each row is claimed for a while before its
first call (renewed while it is delivered), so two dispatchers never deliver one row at
once, and one that died lets the row go when its claim runs out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from datetime import timedelta

from aiohttp import ClientError
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack import blocks, review_blocks, standing_blocks, thread_posts
from bot.slack.given_up import give_up
from bot.slack.handlers import sync
from bot.slack.home import Home
from bot.slack.slack_errors import explanation, is_transient
from bot.slack.steps import Steps, Thread
from bot.slack.thread_posts import Deferred
from bot.waking import Waking
from crew_runtime import policy
from crew_runtime.config import UnknownCrewError, rule_of
from crew_runtime.reviewers import (
    approvals_required,
    covered,
    stages_of,
)
from crew_runtime.service import Countersign
from crew_runtime.specs import Chain
from storage import (
    Backoff,
    Decision,
    DecisionKind,
    OutboxClaimLost,
    OutboxKind,
    OutboxMessage,
    Review,
    ReviewKind,
    ReviewStatus,
    Run,
    RunStatus,
    StandingNotFound,
    ToolApprovalDetails,
)
from storage.status import RunNote

log = logging.getLogger(__name__)

# A row that failed waits 1 s, then twice as long each time, at most 5 minutes.
BACKOFF = Backoff(first=timedelta(seconds=1), most=timedelta(minutes=5), jitter=0.0)
CLAIM = timedelta(seconds=30)

# What delivers a row of a kind about a run (given its steps, the run's thread and the run),
# or about a review (given the review too).
RunHandler = Callable[[Steps, Thread, Run], Awaitable[None]]
ReviewHandler = Callable[[Steps, Thread, Run, Review], Awaitable[None]]


class Dispatcher(Waking):
    """Posts outbox rows to Slack; wake it from any thread after a commit.

    Each outbox kind has one handler: :attr:`for_runs` (given the row's steps, its run's
    thread and the run) or :attr:`for_reviews` (given its review too).

    Args:
        client: a client that waits out rate limits but does not retry server errors or
            dropped connections (see the module docstring).
        service: the runtime service whoever builds the dispatcher built (``serve``'s): its
            store, where the rows are, and its configuration, for the crews' descriptions
            and reviewers.
        claim: how long a row is held for this dispatcher without news from it; one that
            died lets its row go after that long.
        backoff: how long a row (or a Home tab's publish) that failed waits before its next
            attempt; by default :data:`BACKOFF` (and the Home tab's own, 2 s at first).
    """

    def __init__(
        self,
        client: AsyncWebClient,
        service: Countersign,
        *,
        claim: timedelta = CLAIM,
        backoff: Backoff | None = None,
    ) -> None:
        super().__init__()
        self.client = client
        self.store = service.store
        self.config = service.config
        self.claim = claim
        self.backoff = BACKOFF if backoff is None else backoff
        # People's Home tabs: refreshed as the rows announcing their changes go out.
        self.home = Home(client, service, claim=claim, backoff=backoff)
        self.for_runs: Mapping[OutboxKind, RunHandler] = {
            OutboxKind.RUN_STARTED: self._root,
            OutboxKind.RUN_PROGRESS: self._progress,
            OutboxKind.RUN_DIVERGED: self._diverged,
            OutboxKind.RULE_DECIDED: self._rule_decided,
            OutboxKind.RUN_NOTE: self._noted,
            OutboxKind.RUN_FINISHED: self._finished,
            OutboxKind.STANDING_GRANTED: self._standing,
            OutboxKind.STANDING_REVOKED: self._standing,
        }
        self.for_reviews: Mapping[OutboxKind, ReviewHandler] = {
            OutboxKind.REVIEW_OPENED: self._review,
            OutboxKind.REVIEW_DECIDED: self._decided,
            OutboxKind.REVIEW_APPROVED: self._approved,
            OutboxKind.REVIEW_CLAIMED: self._claimed,
            OutboxKind.REVIEW_REMINDED: self._nudged,
            OutboxKind.REVIEW_ESCALATED: self._nudged,
            OutboxKind.TASK_REOPENED: self._reopened,
        }

    async def run(self, stop: asyncio.Event, interval: float = 1.0) -> None:
        """Drain the outbox until ``stop``: when woken (a commit in this process, or on
        PostgreSQL a row written by any process) and every ``interval`` seconds anyway."""
        async with self.listening(self.store):
            while not stop.is_set():
                try:
                    await self.drain()
                except Exception:
                    log.exception("outbox dispatch failed; retrying")
                await self.doze(interval)

    async def drain(self) -> int:
        """Send what is due, then the Home views due; returns how many went out."""
        sent = 0
        held: set[str] = set()
        for listed in await sync(self.store.due_outbox, 100):
            if listed.run_id in held:
                continue
            token = secrets.token_hex(8)
            message = await sync(self.store.claim_outbox, listed.id, token, self.claim)
            if message is None:  # another dispatcher has it, or an earlier row of its run
                held.add(listed.run_id)
                continue
            steps = Steps(self.client, self.store, message, token)
            try:
                async with self._holding(steps):
                    await self._deliver(steps)
                sent += 1
                await self.home.noticed(message)
            except (SlackApiError, ClientError, TimeoutError) as exc:
                if not await self._refused(steps, exc):
                    held.add(message.run_id)
            except Deferred as later:  # holds back no other row (storage.outbox)
                await sync(self.store.defer_outbox, message.id, token, later.until)
            except OutboxClaimLost:
                held.add(message.run_id)
                log.warning("outbox %d: taken over by another dispatcher", message.id)
        return sent + await self.home.drain()

    async def _refused(self, steps: Steps, exc: Exception) -> bool:
        """Give up on a row Slack refused for good (``bot.slack.given_up``: True, the run's
        later rows go on); else, or if giving up failed for a while, try it again after a
        backoff (False: the run's later rows wait)."""
        message = steps.message
        if isinstance(exc, SlackApiError) and not is_transient(exc):
            try:
                await give_up(steps, exc)
                return True
            except OutboxClaimLost:
                log.warning("outbox %d: taken over by another dispatcher", message.id)
                return False
            except (SlackApiError, ClientError, TimeoutError) as again:
                exc = again
        reason = _reason(exc)
        backoff = self.backoff.after(message.attempts + 1)
        log.warning("outbox %d (%s): %s; retry in %s", message.id, message.kind, reason, backoff)
        await sync(self.store.mark_failed, message.id, steps.token, reason, backoff)
        return False

    @contextlib.asynccontextmanager
    async def _holding(self, steps: Steps) -> AsyncIterator[None]:
        """Renew the row's claim while it is delivered (a rate limit may wait minutes)."""

        async def renew() -> None:
            while True:
                await asyncio.sleep(self.claim.total_seconds() / 3)
                try:
                    held = await sync(
                        self.store.renew_outbox_claim, steps.message.id, steps.token, self.claim
                    )
                except Exception:
                    log.exception("outbox %d: claim not renewed", steps.message.id)
                    continue
                if not held:
                    log.warning("outbox %d: claim lost while delivering", steps.message.id)
                    return

        renewing = asyncio.create_task(renew())
        try:
            yield
        finally:
            renewing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewing

    async def _deliver(self, steps: Steps) -> None:
        """Deliver the row by its kind's handler (:attr:`for_runs`, :attr:`for_reviews`)."""
        message = steps.message
        run = await sync(self.store.get_run, message.run_id)
        if run.channel is None:  # started outside Slack with no channel configured
            await steps.sent()
            return
        kind = OutboxKind(message.kind)
        thread = Thread(run.channel, run.thread_ts)
        if kind == OutboxKind.RUN_STARTED:
            await self.for_runs[kind](steps, thread, run)
            return
        if run.thread_ts is None:
            # A run's rows go out in order (storage.outbox), so its root row is settled: Slack
            # refused it for good (bot.slack.given_up), and there is no thread to show this in.
            await steps.sent()
            return
        if kind in _SHOWN_IN_PROGRESS:  # the progress message says the run waits, or ended
            await sync(self.store.refresh_progress, run.id)
        if kind in self.for_runs:
            await self.for_runs[kind](steps, thread, run)
        elif message.review_id is None:  # a review's row without its review: nothing to show
            await steps.sent()
        else:
            review = await sync(self.store.get_review, message.review_id)
            await self.for_reviews[kind](steps, thread, run, review)

    async def _root(self, steps: Steps, thread: Thread, run: Run) -> None:
        """RUN_STARTED: the run's root message in its channel (the thread's first)."""
        if run.thread_ts is not None:
            await steps.sent()
            return
        root = self._root_message(run)
        posted = await steps.post("root", Thread(thread.channel, None), root)
        await steps.sent(thread=(run.id, posted.channel, posted.ts))

    async def _progress(self, steps: Steps, thread: Thread, run: Run) -> None:
        """RUN_PROGRESS: the run's progress message, posted or edited."""
        await thread_posts.show_progress(self.client, self.store, self.config, steps, thread, run)

    async def _decided(self, steps: Steps, thread: Thread, run: Run, review: Review) -> None:
        """REVIEW_DECIDED: the review's buttons swapped for its decision; the root updated."""
        await self._replace(review)
        await self._update_root(run)
        await steps.sent()

    async def _approved(self, steps: Steps, thread: Thread, run: Run, review: Review) -> None:
        """REVIEW_APPROVED: the approvals so far on the review's message, and in the thread
        the next stage's reviewers when it passed a stage of its approval chain."""
        if review.status == ReviewStatus.PENDING:
            await self._tally(review, run)
            passed = steps.message.payload.get("stage")
            moved = None if passed is None else await self._next_stage(review, run, passed)
            if moved is not None:
                await steps.post_all(thread, [moved])
        await steps.sent()

    async def _claimed(self, steps: Steps, thread: Thread, run: Run, review: Review) -> None:
        """REVIEW_CLAIMED: who has the pending review, on its message and in the thread."""
        if review.status == ReviewStatus.PENDING:
            await self._show_claim(review, run)
            said = steps.message.payload
            before = said.get("before")
            claimed = blocks.claimed_message(
                str(said["by"]), str(said["to"]), None if before is None else str(before)
            )
            await steps.post_all(thread, [claimed])
        await steps.sent()

    async def _nudged(self, steps: Steps, thread: Thread, run: Run, review: Review) -> None:
        """REVIEW_REMINDED, REVIEW_ESCALATED: the nudge of a pending review, by DM to the
        people its rule names, else in the thread."""
        kind = OutboxKind(steps.message.kind)
        if review.status == ReviewStatus.PENDING:
            away = await sync(self.store.delegates)
            people = await self._dm_people(kind, review, run, away)
            if people:
                await self._nudge_by_dm(steps, kind, review, run, people)
            else:
                await steps.post_all(thread, [self._nudge(kind, review, run, away)])
        await steps.sent()

    async def _reopened(self, steps: Steps, thread: Thread, run: Run, reopened: Review) -> None:
        """TASK_REOPENED: the superseded reviews' buttons taken away; the reopening said."""
        superseded = await sync(
            self.store.list_reviews, status=ReviewStatus.SUPERSEDED, run_id=run.id
        )
        for review in superseded:
            if review.decision is None:  # it was still waiting: take its buttons away
                await self._replace(review)
        await steps.post_all(thread, [blocks.reopened_message(reopened)])
        await steps.sent()

    async def _diverged(self, steps: Steps, thread: Thread, run: Run) -> None:
        """RUN_DIVERGED: the divergence's note in the thread."""
        note = str(steps.message.payload.get("note", ""))
        await steps.post_all(thread, [blocks.divergence_message(note)])
        await steps.sent()

    async def _rule_decided(self, steps: Steps, thread: Thread, run: Run) -> None:
        """RULE_DECIDED: one line saying which rule decided a gated call, and why."""
        await steps.post_all(thread, [blocks.rule_message(steps.message.payload)])
        await steps.sent()

    async def _noted(self, steps: Steps, thread: Thread, run: Run) -> None:
        """RUN_NOTE: the note in the thread, in this bot's words."""
        asked = _note(steps.message)
        if asked is not None:
            await steps.post_all(thread, [blocks.note_message(asked)])
        await steps.sent()

    async def _finished(self, steps: Steps, thread: Thread, run: Run) -> None:
        """RUN_FINISHED: the cancelled reviews' buttons taken away, the result in the
        thread, the root updated."""
        for review in await sync(
            self.store.list_reviews, status=ReviewStatus.CANCELLED, run_id=run.id
        ):
            await self._replace(review)
        await steps.post_all(thread, blocks.result_messages(run, await self._rejection(run)))
        await self._update_root(run)
        await steps.sent()

    async def _review(self, steps: Steps, thread: Thread, run: Run, review: Review) -> None:
        """REVIEW_OPENED: the review's messages in the thread (what changed first, a long
        draft as a file), its buttons on the last; the root updated."""
        if review.message_ts is not None:
            await steps.sent()
            return
        # What changed comes first, so a reviewer sees it before reading on (and before the
        # file of a long draft).
        changes = await thread_posts.changes(self.store, review)
        if review_blocks.needs_file(review):
            if changes is not None:
                await steps.post("changes", thread, changes, review_id=review.id)
                changes = None
            filename = f"draft-{review.id}.md"
            await steps.upload("upload", thread, review.prompt, filename)
            messages = [review_blocks.review_file_summary(review, run, filename)]
        else:
            messages = review_blocks.review_messages(review, run)
        chain = self._chain(review, run)
        if chain:  # where its approval chain stands, under the buttons from the start
            away = await sync(self.store.delegates)
            messages[-1] = review_blocks.staged_message(
                review, chain, policy.waiting_for(self.config.get(run.crew), run, review, away)
            )
        messages[-1] = self._with_approve_all(messages[-1], review, run)
        if changes is not None:
            messages = [changes, *messages]
        last = await steps.post_all(thread, messages, review_id=review.id)
        # The root shows "Waiting for review" (or an answer) from now on; a failed update is retried
        # with the row, whose posts are done and not made again.
        await self._update_root(run)
        await steps.sent(review_message=(review.id, last.channel, last.ts))

    async def _replace(self, review: Review) -> None:
        """Swap a decided (or cancelled) review's buttons for who decided what."""
        if review.channel is None or review.message_ts is None:
            return
        done = review_blocks.decided_message(review)
        await self.client.chat_update(
            channel=review.channel, ts=review.message_ts, text=done.text, blocks=done.blocks
        )

    def _chain(self, review: Review, run: Run) -> Chain:
        """The approval chain ``review`` follows (none for a crew no longer configured)."""
        spec = self.config.crews.get(run.crew)
        return () if spec is None else stages_of(spec, review)

    async def _tally(self, review: Review, run: Run) -> None:
        """Show who approved a review that needs several approvals, and who is expected; for
        one with an approval chain, where the chain stands."""
        if review.channel is None or review.message_ts is None:
            return
        spec = self.config.crews.get(run.crew)
        required = 1 if spec is None else approvals_required(spec, review)
        away = await sync(self.store.delegates)
        expected = () if spec is None else policy.waiting_for(spec, run, review, away)
        chain = self._chain(review, run)
        if chain:
            tally = review_blocks.staged_message(review, chain, expected)
        else:
            tally = review_blocks.partly_approved_message(review, required, expected)
        await self.client.chat_update(
            channel=review.channel, ts=review.message_ts, text=tally.text, blocks=tally.blocks
        )

    async def _next_stage(self, review: Review, run: Run, passed: str) -> blocks.Message | None:
        """Said in the thread when ``review`` passed the stage named ``passed`` of its
        approval chain: who approved there, and the next stage's reviewers (each away one's
        delegate instead), mentioned."""
        chain = self._chain(review, run)
        names = [stage.name for stage in chain]
        if passed not in names or names.index(passed) + 1 >= len(chain):
            return None
        number = names.index(passed) + 2
        after = chain[number - 1]
        away = await sync(self.store.delegates)
        approvers = [a.decided_by for a in review.approvals_at(passed)]
        return blocks.stage_passed_message(
            passed, approvers, number, len(chain), after.name, covered(after.reviewers, away)
        )

    async def _show_claim(self, review: Review, run: Run) -> None:
        """Show on the pending review's message who has claimed it (with the approvals so
        far, where it needs several, or where its approval chain stands)."""
        if review.approvals or self._chain(review, run):
            await self._tally(review, run)
            return
        if review.channel is None or review.message_ts is None:
            return
        shown = self._with_approve_all(review_blocks.open_review_message(review), review, run)
        await self.client.chat_update(
            channel=review.channel, ts=review.message_ts, text=shown.text, blocks=shown.blocks
        )

    def _with_approve_all(
        self, message: blocks.Message, review: Review, run: Run
    ) -> blocks.Message:
        """A pending gated call's last message, with "Approve all <tool> calls" where its
        gate allows standing approvals."""
        spec, details = self.config.crews.get(run.crew), review.details
        if spec is None or not isinstance(details, ToolApprovalDetails):
            return message
        match = spec.standing_values(details.tool, details.args or {})
        return standing_blocks.with_approve_all(message, review, details.tool, match)

    async def _standing(self, steps: Steps, thread: Thread, run: Run) -> None:
        """STANDING_GRANTED, STANDING_REVOKED: a standing approval in the thread: its
        message, posted once when granted (as it stands by then) and edited when revoked to
        say by whom and when."""
        try:
            standing_id = str(steps.message.payload.get("standing", ""))
            standing = await sync(self.store.get_standing, standing_id)
        except StandingNotFound:
            await steps.sent()
            return
        shown = standing_blocks.standing_message(standing)
        if OutboxKind(steps.message.kind) == OutboxKind.STANDING_GRANTED:
            posted = await steps.post("post1", thread, shown)
            await sync(self.store.place_standing, standing.id, posted.channel, posted.ts)
        elif standing.channel is not None and standing.message_ts is not None:
            await self.client.chat_update(
                channel=standing.channel,
                ts=standing.message_ts,
                text=shown.text,
                blocks=shown.blocks,
            )
        await steps.sent()

    async def _update_root(self, run: Run) -> None:
        fresh = await sync(self.store.get_run, run.id)
        if fresh.channel is None or fresh.thread_ts is None:
            return
        pending = await sync(self.store.list_reviews, run_id=fresh.id)
        root = self._root_message(fresh, [r.kind for r in pending])
        await self.client.chat_update(
            channel=fresh.channel, ts=fresh.thread_ts, text=root.text, blocks=root.blocks
        )

    async def _rejection(self, run: Run) -> Decision | None:
        """The decision that rejected a rejected run (its latest rejection), if any."""
        if run.status is not RunStatus.REJECTED:
            return None
        decided = await sync(self.store.list_reviews, status=ReviewStatus.DECIDED, run_id=run.id)
        rejections = [
            r.decision
            for r in decided
            if r.decision is not None and r.decision.kind is DecisionKind.REJECT
        ]
        return max(rejections, key=lambda d: d.created_at, default=None)

    def _nudge(
        self, kind: OutboxKind, review: Review, run: Run, away: Mapping[str, str]
    ) -> blocks.Message:
        """A reminder or an escalation in the thread, mentioning the reviewers (or
        ``escalate_to``), each away one's delegate (``away``: ``Store.delegates``) instead."""
        try:
            spec = self.config.get(run.crew)
        except UnknownCrewError:
            return blocks.reminder_message(review, ())
        if kind == OutboxKind.REVIEW_ESCALATED:
            people = policy.reminded(spec, run, review, away, escalated=True)
            return blocks.escalation_message(review, people)
        return blocks.reminder_message(
            review, policy.reminded(spec, run, review, away, escalated=False)
        )

    async def _dm_people(
        self, kind: OutboxKind, review: Review, run: Run, away: Mapping[str, str]
    ) -> list[str]:
        """Who gets a reminder or an escalation as a DM: nobody unless the review's rule
        says ``remind_by = "dm"`` and names people (a crew open to its channel is reminded
        in the thread); user groups' members, each person once; a reminder of a claimed
        review goes to whoever has it; for each one away (``away``: ``Store.delegates``),
        their delegate."""
        spec = self.config.crews.get(run.crew)
        if spec is None:
            return []
        tool, task = rule_of(review.kind, review.stream, review.details)
        if spec.deadlines_for(tool=tool, task=task).remind_by != "dm":
            return []
        named = policy.waiting_for(spec, run, review, away)
        if kind == OutboxKind.REVIEW_ESCALATED:
            named = spec.escalate_to or named
        elif review.claimed_by is not None:  # a reminder goes to whoever has it
            named = (review.claimed_by,)
        people: list[str] = []
        for ref in named:
            members = [ref] if not ref.startswith("S") else await self._group(ref)
            people.extend(p for p in covered(tuple(members), away) if p not in people)
        return people

    async def _group(self, group_id: str) -> list[str]:
        response = await self.client.usergroups_users_list(usergroup=group_id)
        return [str(user) for user in response.get("users") or []]

    async def _nudge_by_dm(
        self, steps: Steps, kind: OutboxKind, review: Review, run: Run, people: list[str]
    ) -> None:
        """The reminder or escalation to each of ``people``, in their DM, each once."""
        link = None
        if review.channel is not None and review.message_ts is not None:
            found = await self.client.chat_getPermalink(
                channel=review.channel, message_ts=review.message_ts
            )
            link = str(found["permalink"])
        escalated = kind == OutboxKind.REVIEW_ESCALATED
        nudge = blocks.dm_nudge_message(review, run.crew, escalated, link)
        for person in people:
            opened = await self.client.conversations_open(users=person)
            dm = str(opened["channel"]["id"])
            await steps.post(f"dm:{person}", Thread(dm, None), nudge)

    def _root_message(self, run: Run, waiting_on: list[ReviewKind] | None = None) -> blocks.Message:
        """The run's root message, with its crew's description and its reviewer's mention."""
        spec = self.config.crews.get(run.crew)
        return blocks.run_root(
            run,
            "" if spec is None else spec.description,
            waiting_on or (),
            reviewer_input=None if spec is None else spec.reviewers_from_input,
        )


# Rows after which the run's progress message is shown again: the run waits, or ended.
_SHOWN_IN_PROGRESS = frozenset(
    {OutboxKind.REVIEW_OPENED, OutboxKind.REVIEW_DECIDED, OutboxKind.RUN_FINISHED}
)


def _note(message: OutboxMessage) -> RunNote | None:
    """The note a RUN_NOTE row asks for; None (logged) for one this bot has no words for."""
    try:
        return RunNote(str(message.payload.get("note", "")))
    except ValueError:
        log.warning("outbox %d: unknown run note %r; skipped", message.id, message.payload)
        return None


def _reason(exc: Exception) -> str:
    if isinstance(exc, SlackApiError):
        return f"slack: {explanation(exc)}"
    return f"{type(exc).__name__}: {exc}"
