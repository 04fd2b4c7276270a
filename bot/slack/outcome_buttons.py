"""A flow's outcome buttons (``@human_feedback(emit=[...])``): a click opens the outcome's
feedback modal, its submission records the decision with the outcome chosen
(``Countersign.decide(..., outcome=)``), and the resumed flow takes exactly that outcome.

A Slack door like the review buttons: the click is checked as theirs is (the review gone,
clicked elsewhere, decided already: :meth:`Handlers._clicked_review`), and both the click and
the submission ask the review policy (``policy.decide``) with the kind the choice is recorded
as (``flow_outcomes.kind_for``: choosing ``approved`` is an approval), in the same words. It
is idempotent: the modal's view id is the decision's request key, so a submission Slack sends
again is answered as the first time and records nothing more; a decision made meanwhile is a
compare-and-set that comes too late.
"""

from __future__ import annotations

import logging
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltContext
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack import block_text, modals, text
from bot.slack.handlers import Handlers, asked_for, sync
from bot.slack.intake import REQUEST_KEY
from bot.slack.outcome_blocks import needs_feedback, outcome_modal, outcomes_of
from bot.slack.outcome_payloads import (
    OUTCOME,
    OUTCOME_PATTERN,
    parse_outcome_click,
    parse_outcome_submission,
)
from bot.slack.payloads import PayloadError, callback_id
from crew_runtime import flow_outcomes
from crew_runtime.errors import UsageError
from storage import AlreadyDecided, Review, Run, StorageError

log = logging.getLogger(__name__)


class OutcomeButtons(Handlers):
    """The outcome buttons of a flow's review and their feedback modal."""

    def register_outcomes(self, app: AsyncApp) -> None:
        app.action(OUTCOME_PATTERN)(self.on_outcome)
        app.view(callback_id(OUTCOME))(self.on_outcome_submission)

    async def on_outcome(
        self,
        ack: AsyncAck,
        body: dict[str, Any],
        client: AsyncWebClient,
        context: AsyncBoltContext,
    ) -> None:
        await ack()
        try:
            click = parse_outcome_click(body)
        except PayloadError as exc:
            log.warning("ignoring a malformed outcome click: %s", exc)
            return
        # As for the review buttons: open the modal within the trigger id's 3 s, fill it after.
        view_id = await self._open_loading_view(client, click)
        if view_id is None:
            return
        request_key = context.get(REQUEST_KEY)
        found, refusal = await self._clicked_review(click, request_key)
        if refusal is None and found is not None:
            refusal = await self._choice_refusal(click.user_id, *found, click.index, request_key)
        if refusal is not None or found is None:
            view = modals.notice_view(refusal or text.REVIEW_GONE)
        else:
            channel = click.channel_id or found[1].channel
            view = outcome_modal(found[0], click.index, channel, click.message_ts)
        await self._update_view(client, view_id, view)

    async def _choice_refusal(
        self, user_id: str, review: Review, run: Run, index: int, request_key: str | None
    ) -> str | None:
        """Why ``user_id`` may not choose the outcome at ``index`` (None: they may): the
        review offers none there, or the review policy refuses the kind it is recorded as
        (an approval, say, by who started a run whose crew forbids self-approval)."""
        outcomes = outcomes_of(review)
        if index >= len(outcomes):
            return block_text.OUTCOME_GONE
        kind = flow_outcomes.kind_for(outcomes[index], outcomes)
        return await self._decision_refusal(user_id, review, run, request_key, kind=kind)

    async def on_outcome_submission(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        try:
            submission = parse_outcome_submission(body)
        except PayloadError as exc:
            log.warning("ignoring a malformed outcome submission: %s", exc)
            await ack()
            return
        found = await self._review_and_run(submission.review_id)
        if found is None:
            await ack(response_action="errors", errors={"text": text.REVIEW_GONE})
            return
        review, run = found
        request_key = f"view:{submission.view_id}"
        refusal = await self._choice_refusal(
            submission.user_id, review, run, submission.index, request_key
        )
        if refusal is not None:
            await ack(response_action="errors", errors={"text": refusal})
            return
        outcomes = outcomes_of(review)
        outcome = outcomes[submission.index]
        kind = flow_outcomes.kind_for(outcome, outcomes)
        words = submission.text.strip() or None
        if words is None and needs_feedback(review, submission.index):
            await ack(response_action="errors", errors={"text": text.EMPTY_TEXT})
            return
        spec = self.config.crews.get(run.crew)
        try:
            await sync(
                self.service.decide,
                review.id,
                kind,
                words,
                by=submission.user_id,
                by_name=await self.reviewers.name_of(submission.user_id),
                request_key=request_key,
                facts=await self._facts(*asked_for(spec, run, review)),
                outcome=outcome,
            )
        except AlreadyDecided as exc:
            await ack(response_action="errors", errors={"text": text.too_late(exc)})
            return
        except (UsageError, StorageError) as exc:
            await ack(response_action="errors", errors={"text": text.refusal_in_form(exc)})
            return
        await ack()
        log.info("review %s: outcome %r by %s", review.id, outcome, submission.user_id)
        self.wake()
