"""Getting a payload to the bot the way Slack would, over HTTP or Socket Mode.

Why one place: both transports must carry the same payloads, and a test reads the same
``Delivery`` either way (status, body, what the bot answered, how long it took). Over
HTTP the body is encoded like Slack's (JSON for events, ``payload=`` form for
interactivity, a plain form for slash commands) and signed; Slack gives up after 3 s,
and so does this sender.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlencode

import aiohttp

from sandbox.signing import Tamper, signed_headers
from sandbox.socket_mode import SocketHub

__all__ = ["Delivery", "Kind", "Sender"]

Json = dict[str, Any]
Kind = Literal["events_api", "interactive", "slash_commands"]
Transport = Literal["http", "socket"]


@dataclass(frozen=True)
class Delivery:
    """What happened when the stand-in sent one request to the bot.

    Attributes:
        status: the bot's HTTP status; over Socket Mode 200 when acked; 0 when the bot
            did not answer within the ack timeout (Slack would show an error or retry).
        body: the response body as text (over Socket Mode, the ack's payload as JSON).
        json: ``body`` parsed when it is JSON, e.g. ``{"response_action": "errors", ...}``.
        latency: seconds from sending to the answer.
        payload: what was sent, decoded; ``retry`` re-sends it unchanged.
        problems: ways the bot's answer broke Slack's rules (e.g. errors for a block
            that is not an input); empty when Slack would have been content.
    """

    transport: Transport
    kind: Kind
    status: int
    body: str
    json: Any
    latency: float
    payload: Json
    retry_num: int = 0
    problems: list[str] = field(default_factory=list)
    unsubscribed: str | None = None  # the bot event not in the manifest: never sent

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def timed_out(self) -> bool:
        return self.status == 0 and self.unsubscribed is None

    @property
    def event_id(self) -> str | None:
        value = self.payload.get("event_id")
        return value if isinstance(value, str) else None


def encode(kind: Kind, payload: Json) -> tuple[str, str]:
    """The exact body and content type Slack uses for ``kind``."""
    if kind == "events_api":
        return json.dumps(payload), "application/json"
    if kind == "interactive":
        return urlencode({"payload": json.dumps(payload)}), "application/x-www-form-urlencoded"
    return urlencode(payload), "application/x-www-form-urlencoded"


def parse(body: str) -> Any:
    try:
        return json.loads(body) if body.strip() else None
    except ValueError:
        return None


class Sender:
    """Delivers payloads to the bot over the transport chosen for the stand-in.

    Args:
        transport: ``http`` posts signed requests to ``endpoint``; ``socket`` pushes
            envelopes to the connected Socket Mode client.
        signing_secret: never logged; used only to sign.
        clock: the Unix time used for request timestamps.
    """

    def __init__(
        self,
        *,
        transport: Transport,
        endpoint: Callable[[], str],
        signing_secret: str,
        hub: SocketHub,
        ack_timeout: float,
        clock: Callable[[], float],
    ) -> None:
        self.transport: Transport = transport
        self._endpoint = endpoint
        self._secret = signing_secret
        self._hub = hub
        self.ack_timeout = ack_timeout
        self._clock = clock
        self._session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def send(
        self,
        kind: Kind,
        payload: Json,
        *,
        tamper: Tamper = Tamper.NONE,
        retry_num: int = 0,
        retry_reason: str = "",
    ) -> Delivery:
        if self.transport == "socket":
            return await self._push(kind, payload, retry_num, retry_reason)
        body, content_type = encode(kind, payload)
        headers = {
            "Content-Type": content_type,
            **signed_headers(self._secret, self._clock(), body, tamper),
        }
        if retry_num:
            headers.update(
                {"X-Slack-Retry-Num": str(retry_num), "X-Slack-Retry-Reason": retry_reason}
            )
        if self._session is None:
            self._session = aiohttp.ClientSession()
        started = time.monotonic()
        try:
            async with self._session.post(
                self._endpoint(),
                data=body.encode(),
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=self.ack_timeout),
            ) as response:
                text = await response.text()
                status = response.status
        except TimeoutError:
            text, status = "", 0
        latency = time.monotonic() - started
        return Delivery("http", kind, status, text, parse(text), latency, payload, retry_num)

    async def _push(self, kind: Kind, payload: Json, retry_num: int, reason: str) -> Delivery:
        await self._hub.wait_connected(timeout=5.0)
        accepts = kind == "slash_commands" or payload.get("type") == "view_submission"
        ack = await self._hub.push(
            kind,
            payload,
            accepts_response_payload=accepts,
            timeout=self.ack_timeout,
            retry_attempt=retry_num,
            retry_reason=reason,
        )
        body = "" if ack.payload is None else json.dumps(ack.payload)
        status = 200 if ack.acked else 0
        return Delivery("socket", kind, status, body, ack.payload, ack.latency, payload, retry_num)
