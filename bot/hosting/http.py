"""Slack's HTTP entry point: check the request, record it, ack, and let Bolt handle it after.

Slack wants an answer within 3 s, and an ack tells the person their click or command was
taken, so a click, an event or a slash command is acked only once ``bot.slack.intake`` has it in
the database. When that fails, the answer says so the way Slack shows it: an ephemeral
"not recorded, try again" for a slash command (the ack's body is shown to its author), an
error status for a click (Slack marks the button as failed) and for an event (Slack retries
it). Modal submissions and URL verification carry their answer in the ack: they are handled
before it.

Malformed requests (a body that is not UTF-8, a timestamp that is not a number, a bad
signature) are refused with one log line each and no traceback: anyone can send them.
"""

from __future__ import annotations

import json
import logging

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_sdk.signature import SignatureVerifier

from bot.slack import text
from bot.slack.intake import Intake, Kind, Receipt, classify

log = logging.getLogger(__name__)


class SlackEndpoint:
    """The aiohttp handler of ``/slack/events``, in front of the :class:`Intake`."""

    def __init__(self, intake: Intake, signing_secret: str) -> None:
        self.intake = intake
        self.verifier = SignatureVerifier(signing_secret)

    async def handle(self, request: web.Request) -> web.Response:
        with self.intake.acking():
            return await self._ack(request)

    async def _ack(self, request: web.Request) -> web.Response:
        raw = await request.read()
        try:
            body = raw.decode("utf-8")
        except UnicodeDecodeError:
            log.warning("refused a request from %s: its body is not UTF-8", request.remote)
            return web.Response(status=400)
        timestamp = request.headers.get("X-Slack-Request-Timestamp", "")
        signature = request.headers.get("X-Slack-Signature", "")
        if not timestamp.isdigit():
            log.warning("refused a request from %s: bad or missing timestamp", request.remote)
            return web.Response(status=401)
        if not self.verifier.is_valid(body, timestamp, signature):
            return web.Response(status=401)
        try:
            slack_request = classify(body, request.content_type, fallback_key=f"sig:{signature}")
            if slack_request.kind is Kind.ANSWERED_IN_ACK:
                return await to_aiohttp_response(await self.intake.answer_now(slack_request))
        except ValueError:
            log.warning("refused a signed request: its body cannot be parsed")
            return web.Response(status=400)
        receipt = await self.intake.receive(slack_request)
        if receipt is not Receipt.FAILED:
            return web.Response(status=200)
        if slack_request.kind is Kind.SLASH_COMMAND:
            # Slack shows the body of a slash command's ack to its author only.
            answer = {"response_type": "ephemeral", "text": text.NOT_RECORDED}
            return web.Response(
                status=200, text=json.dumps(answer), content_type="application/json"
            )
        return web.Response(status=503)
