"""Slack's side of Socket Mode: the WebSocket the app connects to, envelopes and acks.

Why: the bot supports Socket Mode for laptops (no public URL needed), and the
same end-to-end scenarios must run over it. The protocol: the app calls
``apps.connections.open`` with its app-level token and gets a ``ws://`` URL; on connect
Slack sends ``hello``; every request is an envelope
``{"envelope_id", "type", "payload", "accepts_response_payload", "retry_attempt",
"retry_reason"}``, and the app answers ``{"envelope_id": ..., "payload"?: ...}``.
Waiting for that ack with a deadline gives the 3-second rule for free.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
import uuid
from dataclasses import dataclass
from typing import Any

from aiohttp import WSMsgType, web

__all__ = ["Ack", "SocketHub"]

Json = dict[str, Any]


@dataclass(frozen=True)
class Ack:
    """The app's answer to one envelope: ``acked`` False when none came before the deadline."""

    acked: bool
    payload: Any
    latency: float


class SocketHub:
    """Connected Socket Mode clients, and envelopes waiting for their ack."""

    def __init__(self, app_id: str) -> None:
        self.app_id = app_id
        self._tickets: set[str] = set()
        self._sockets: list[web.WebSocketResponse] = []
        self._pending: dict[str, asyncio.Future[Json]] = {}
        self._next = 0

    @property
    def connected(self) -> bool:
        return any(not ws.closed for ws in self._sockets)

    def issue_url(self, ws_base: str) -> str:
        """A fresh connection URL, as ``apps.connections.open`` returns."""
        ticket = secrets.token_hex(8)
        self._tickets.add(ticket)
        return f"{ws_base}link/?ticket={ticket}&app_id={self.app_id}"

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """The ``/link`` WebSocket endpoint. A ticket is good for one connection."""
        ticket = request.query.get("ticket", "")
        if ticket not in self._tickets:
            return web.Response(status=401, text="invalid ticket")
        self._tickets.discard(ticket)
        ws = web.WebSocketResponse(autoping=True)  # answers the SDK's pings with pongs
        await ws.prepare(request)
        self._sockets.append(ws)
        await ws.send_json(
            {
                "type": "hello",
                "num_connections": len(self._sockets),
                "debug_info": {
                    "host": "applink-sandbox",
                    "build_number": 1,
                    "approximate_connection_time": 18060,
                },
                "connection_info": {"app_id": self.app_id},
            }
        )
        try:
            async for message in ws:
                if message.type is WSMsgType.TEXT:
                    self._on_text(message.data)
        finally:
            self._sockets.remove(ws)
        return ws

    def _on_text(self, text: str) -> None:
        try:
            data = json.loads(text)
        except ValueError:
            return
        future = self._pending.pop(str(data.get("envelope_id")), None)
        if future is not None and not future.done():
            future.set_result(data)

    async def wait_connected(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self.connected:
            if time.monotonic() > deadline:
                raise TimeoutError("no Socket Mode client connected")
            await asyncio.sleep(0.01)

    async def push(
        self,
        kind: str,
        payload: Json,
        *,
        accepts_response_payload: bool,
        timeout: float,
        retry_attempt: int = 0,
        retry_reason: str = "",
    ) -> Ack:
        """Send one envelope to a connected client and wait for its ack."""
        sockets = [ws for ws in self._sockets if not ws.closed]
        if not sockets:
            raise RuntimeError("no Socket Mode client connected")
        envelope_id = str(uuid.uuid4())
        future: asyncio.Future[Json] = asyncio.get_running_loop().create_future()
        self._pending[envelope_id] = future
        envelope = {
            "envelope_id": envelope_id,
            "type": kind,
            "payload": payload,
            "accepts_response_payload": accepts_response_payload,
            "retry_attempt": retry_attempt,
            "retry_reason": retry_reason,
        }
        self._next += 1
        started = time.monotonic()
        await sockets[self._next % len(sockets)].send_json(envelope)  # spread, like Slack
        try:
            ack = await asyncio.wait_for(future, timeout)
        except TimeoutError:
            self._pending.pop(envelope_id, None)
            return Ack(False, None, time.monotonic() - started)
        return Ack(True, ack.get("payload"), time.monotonic() - started)

    async def disconnect(self, reason: str = "refresh_requested") -> None:
        """Ask clients to reconnect, as Slack does every few hours."""
        for ws in list(self._sockets):
            await ws.send_json(
                {"type": "disconnect", "reason": reason, "debug_info": {"host": "applink-sandbox"}}
            )

    async def close(self) -> None:
        for future in self._pending.values():
            future.cancel()
        self._pending.clear()
        for ws in list(self._sockets):
            await ws.close()
