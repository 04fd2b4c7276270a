"""Socket Mode with the same promise as HTTP: an envelope is acked once it is recorded.

Bolt's own handler acks an envelope with whatever the listener answered, before anything is
recorded. This one hands each envelope to ``bot.slack.intake`` first, exactly as
``bot.hosting.http`` does for HTTP: recorded (or a duplicate), it is acked; not recorded, a
slash command is answered with an ephemeral saying so, and anything else is left unacked, so
Slack retries an event and shows a click as failed. Modal submissions, whose ack carries the
answer, are handled before it, as over HTTP.
"""

from __future__ import annotations

import time

from slack_bolt.adapter.socket_mode.aiohttp import AsyncSocketModeHandler
from slack_bolt.adapter.socket_mode.async_internals import send_async_response
from slack_bolt.async_app import AsyncApp
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse

from bot.slack import text
from bot.slack.intake import Intake, Kind, Receipt, classify_payload


class DurableSocketModeHandler(AsyncSocketModeHandler):
    """Bolt's Socket Mode handler, with each envelope recorded before it is acked."""

    def __init__(self, app: AsyncApp, app_token: str, intake: Intake) -> None:
        super().__init__(app, app_token)
        self.intake = intake

    async def handle(  # type: ignore[override]
        self, connection: SocketModeClient, req: SocketModeRequest
    ) -> None:
        payload = req.payload if isinstance(req.payload, dict) else {}
        request = classify_payload(payload, fallback_key=f"envelope:{req.envelope_id}")
        if request.kind is Kind.ANSWERED_IN_ACK:
            started = time.time()
            response = await self.intake.answer_now(request)
            await send_async_response(connection, req, response, started)
            return
        receipt = await self.intake.receive(request)
        if receipt is not Receipt.FAILED:
            await connection.send_socket_mode_response(
                SocketModeResponse(envelope_id=req.envelope_id)
            )
        elif request.kind is Kind.SLASH_COMMAND:
            answer = {"response_type": "ephemeral", "text": text.NOT_RECORDED}
            await connection.send_socket_mode_response(
                SocketModeResponse(envelope_id=req.envelope_id, payload=answer)
            )
