"""Batch review in Slack: *Decide several…* on the Home tab and in ``/crew pending``'s answer
opens a modal choosing among the clicker's pending reviews (the review policy's list,
``bot.slack.pending``), then a confirmation listing what will happen; its button records
each chosen review as its own decision (``Handlers._decide_batch``: the one path a click on
a review takes) and answers with what was recorded and what was skipped, and why.
*Approve all N shown* and *Reject all N shown* beside it open that same confirmation for the
reviews listed there, each with its digest as shown.

The confirmation's button is a click, recorded in the inbox before it is acked like any
(``bot.slack.intake``), so a crash after the ack loses nothing; each item's request key is
the modal's view id and the review, so a second click on the same confirmation, or the
click handled again, records nothing twice.
"""

from __future__ import annotations

import logging
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack import block_text as t
from bot.slack import modals, text
from bot.slack.authz import CheckFailed
from bot.slack.batch_blocks import (
    choose_view,
    confirm_view,
    done_text,
    done_view,
    label,
    picked,
    recording_view,
)
from bot.slack.batch_payloads import (
    BATCH,
    CONFIRM,
    MAX_BATCH,
    SHOWN,
    BatchChoice,
    BatchItem,
    Picked,
    parse_batch_click,
    parse_batch_confirm,
    parse_batch_submission,
    parse_shown_click,
    pick_block_id,
)
from bot.slack.handlers import THREAD, Handlers
from bot.slack.payloads import PayloadError, action_id, callback_id
from bot.slack.pending import pending_for

log = logging.getLogger(__name__)


class BatchButtons(Handlers):
    """*Decide several…*, its choosing modal and its confirmation's button."""

    def register_batch(self, app: AsyncApp) -> None:
        app.action(action_id(BATCH))(self.on_batch)
        app.view(callback_id(BATCH))(self.on_batch_submission)
        app.action(action_id(CONFIRM))(self.on_batch_confirm)
        for suffix in SHOWN.values():
            app.action(action_id(suffix))(self.on_batch_shown)

    async def on_batch(self, ack: AsyncAck, body: dict[str, Any], client: AsyncWebClient) -> None:
        """Open the choosing modal (at once, as the trigger id lives 3 s), then fill it with
        the clicker's pending reviews as the review policy lists them now."""
        await ack()
        try:
            click = parse_batch_click(body)
        except PayloadError as exc:
            log.warning("ignoring a malformed batch click: %s", exc)
            return
        view_id = await self._open_loading_view(client, click)
        if view_id is None:
            return
        try:
            pending = await pending_for(self.service, self.reviewers, click.user_id, MAX_BATCH)
        except CheckFailed:
            view = modals.notice_view(text.CHECK_FAILED)
        else:
            view = choose_view(pending, click.channel_id)
        await self._update_view(client, view_id, view)

    async def on_batch_shown(
        self, ack: AsyncAck, body: dict[str, Any], client: AsyncWebClient
    ) -> None:
        """*Approve all N shown* (or *Reject…*): open the confirmation listing the reviews
        the click was shown with, each with its digest as shown then (nothing recorded yet;
        its button records them, as after choosing them one by one)."""
        await ack()
        try:
            shown = parse_shown_click(body)
        except PayloadError as exc:
            log.warning("ignoring a malformed batch click: %s", exc)
            return
        view_id = await self._open_loading_view(client, shown.click)
        if view_id is None:
            return
        listed = []
        for pick in shown.picked:
            found = await self._review_and_run(pick.review_id)
            listed.append(
                Picked(pick.review_id, pick.digest, pick.review_id)
                if found is None
                else picked(*found, pick.digest)
            )
        THREAD.set((None, None))
        click = shown.click
        choice = BatchChoice(
            click.user_id, view_id, shown.kind, "", tuple(listed), click.channel_id
        )
        await self._update_view(client, view_id, confirm_view(choice))

    async def on_batch_submission(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        """The reviews chosen: the modal becomes their confirmation (nothing recorded yet)."""
        try:
            choice = parse_batch_submission(body)
        except PayloadError as exc:
            log.warning("ignoring a malformed batch submission: %s", exc)
            await ack()
            return
        if not choice.picked:
            await ack(response_action="errors", errors={pick_block_id(0): t.BATCH_CHOOSE_ONE})
            return
        await ack(response_action="update", view=confirm_view(choice))

    async def on_batch_confirm(
        self, ack: AsyncAck, body: dict[str, Any], client: AsyncWebClient
    ) -> None:
        """Record each review still ticked as its own decision; answer in the modal (and,
        from ``/crew pending``, privately in its channel) what was recorded and skipped."""
        await ack()
        try:
            choice = parse_batch_confirm(body)
        except PayloadError as exc:
            log.warning("ignoring a malformed batch confirmation: %s", exc)
            return
        await self._update_view(client, choice.view_id, recording_view())
        items = [
            BatchItem(p.review_id, choice.kind, choice.text.strip() or None, p.digest)
            for p in choice.picked
        ]
        results = await self._decide_batch(items, choice.user_id, f"batch:{choice.view_id}")
        labels = {}
        for result in results:
            if result.error is not None:
                found = await self._review_and_run(result.item.review_id)
                if found is not None:
                    labels[result.item.review_id] = label(*found)
        THREAD.set((None, None))
        answer = done_text(choice.kind, results, labels)
        await self._update_view(client, choice.view_id, done_view(answer))
        await self._ephemeral_via_api(choice.channel_id, choice.user_id, answer)
