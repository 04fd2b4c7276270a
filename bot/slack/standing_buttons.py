"""The buttons of standing approvals: "Approve all <tool> calls" on a gated call's review
(the approval and the standing approval in one transaction, as ``reviews decide --standing``)
and *Revoke* on the thread's message about a standing approval.

Both are idempotent and exact once: a click's request key makes a replay record nothing more,
the approval is the review's compare-and-set (a double click, or a click racing someone else's
decision, is told privately it came too late), and revoking is a compare-and-set on the
standing approval (a second *Revoke* is told who revoked it first). Who may revoke is the
review policy's to say (``policy.may_revoke``: who started the run or one of its deciders,
their delegates while they are away); anyone else is told so privately and nothing changes.
"""

from __future__ import annotations

import logging
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltContext

from bot.slack import text
from bot.slack.handlers import Handlers, sync
from bot.slack.intake import REQUEST_KEY
from bot.slack.payloads import (
    APPROVE_ALL,
    REVOKE,
    PayloadError,
    RevokeClick,
    action_id,
    parse_approve_all,
    parse_revoke_click,
)
from crew_runtime import log_fields
from crew_runtime.errors import UsageError
from storage import DecisionKind, NotFound, StandingApproval, StorageError

log = logging.getLogger(__name__)


class StandingButtons(Handlers):
    """ "Approve all <tool> calls" and *Revoke*."""

    def register_standing(self, app: AsyncApp) -> None:
        app.action(action_id(APPROVE_ALL))(self.on_approve_all)
        app.action(action_id(REVOKE))(self.on_revoke)

    async def on_approve_all(
        self, ack: AsyncAck, body: dict[str, Any], context: AsyncBoltContext
    ) -> None:
        await ack()
        try:
            click = parse_approve_all(body)
        except PayloadError as exc:
            log.warning("ignoring a malformed approve-all click: %s", exc)
            return
        found, refusal = await self._clicked_review(click)
        channel = click.channel_id or (found[1].channel if found else None)
        if refusal is not None:
            await self._ephemeral_via_api(channel, click.user_id, refusal)
        elif found is not None:
            request_key = context.get(REQUEST_KEY)
            await self._decide(
                found[0],
                DecisionKind.APPROVE,
                None,
                click.user_id,
                channel,
                request_key,
                standing=True,
            )

    async def on_revoke(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        try:
            click = parse_revoke_click(body)
        except PayloadError as exc:
            log.warning("ignoring a malformed revoke click: %s", exc)
            return
        refusal = await self._revoke_refusal(click)
        if refusal is not None:
            await self._ephemeral_via_api(click.channel_id, click.user_id, refusal)
            return
        try:
            await sync(self.service.revoke_standing, click.standing_id, by=click.user_id)
        except (UsageError, StorageError) as exc:  # AlreadyRevoked says who was first
            await self._ephemeral_via_api(click.channel_id, click.user_id, text.refusal(exc))
            return
        log.info("standing approval %s: revoked by %s", click.standing_id, click.user_id)

    async def _revoke_refusal(self, click: RevokeClick) -> str | None:
        """Why the clicker may not revoke the standing approval (None: they may): it is gone,
        the click was made elsewhere than on its message, or they are not a reviewer."""
        try:
            standing: StandingApproval = await sync(self.store.get_standing, click.standing_id)
            run = await sync(self.store.get_run, standing.run_id)
        except NotFound as exc:
            return text.refusal(exc)
        log_fields.RUN_ID.set(run.id)
        where = (standing.channel, standing.message_ts)
        if standing.message_ts is not None and (click.channel_id, click.message_ts) != where:
            return text.NOT_THE_REVIEW_MESSAGE
        return await self._run_refusal("revoke", click.user_id, run)
