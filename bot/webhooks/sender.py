"""The webhook sender: POSTs each webhook event to the crew's webhooks that want it, signed,
at least once.

An event (``storage.webhooks``) is claimed for a while, its body fixed in the row before the
first POST (so a retry, even after a crash, sends the same bytes with the same id), then sent
to each of its webhooks at once. Each webhook's delivery is recorded in the event's
``progress``: delivered, refused, given up, or due again at a time of its own (exponential
backoff with jitter, ``storage.leases.Backoff``, or the receiver's ``Retry-After``). A network
error, a timeout, a 408, a 429 and a 5xx are tried again; any other answer is final. A
webhook is given up on after :data:`MAX_ATTEMPTS` attempts or once the event is
:data:`GIVE_UP_AFTER` old, with a log line and a count (``countersign_webhook_deliveries``).

Events are sent as tasks of their own, many at once: a slow receiver holds its own events,
never another's, nor the Slack dispatcher, which has its own table and loop. A sender that
dies lets its events go when their claims run out; one that finished a POST but died before
recording it sends that event again (receivers deduplicate by its id).
"""

from __future__ import annotations

import asyncio
import email.utils
import functools
import logging
import math
import secrets
import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from aiohttp import ClientError, ClientSession, ClientTimeout

from bot.slack.handlers import sync
from bot.waking import Waking
from bot.webhooks.body import DELIVERY_HEADER, EVENT_HEADER, SIGNATURE_HEADER, body_of, signature
from crew_runtime import metrics
from crew_runtime.config import Config
from crew_runtime.specs import WebhookSpec
from storage import Backoff, Store, WebhookEvent

log = logging.getLogger(__name__)

CLAIM = timedelta(seconds=30)
TIMEOUT = timedelta(seconds=10)
MAX_ATTEMPTS = 12
GIVE_UP_AFTER = timedelta(hours=24)
# 2 s, then twice as long each time, at most 10 minutes; each wait a random half to all of it.
BACKOFF = Backoff(first=timedelta(seconds=2), most=timedelta(minutes=10))
# Events in flight at once, whatever the backlog.
IN_FLIGHT = 64
RETRIED = frozenset({408, 429})
MOST_RETRY_AFTER = 3600.0
"""The longest wait a receiver's ``Retry-After`` gets (seconds)."""


class WebhookSender(Waking):
    """Sends webhook events; wake it from any thread after a commit.

    Args:
        store: where the events are.
        config: the crews' webhooks.
        secrets: each webhook's secret by the name of its variable
            (``crew_runtime.webhooks.webhook_secrets``).
        claim: how long an event is held for this sender; one that died lets it go after
            that long. Longer than ``timeout``, or a slow POST may be made twice.
        timeout: how long a receiver has to answer.
        backoff, max_attempts, give_up_after: when to try again, and when to stop.
    """

    def __init__(
        self,
        store: Store,
        config: Config,
        secrets: Mapping[str, bytes],
        *,
        claim: timedelta = CLAIM,
        timeout: timedelta = TIMEOUT,
        backoff: Backoff = BACKOFF,
        max_attempts: int = MAX_ATTEMPTS,
        give_up_after: timedelta = GIVE_UP_AFTER,
    ) -> None:
        super().__init__()
        self.store = store
        self.secrets = secrets
        self.claim = claim
        self.timeout = timeout
        self.backoff = backoff
        self.max_attempts = max_attempts
        self.give_up_after = give_up_after
        self.webhooks = {
            name: spec.webhooks for name, spec in config.crews.items() if spec.webhooks
        }
        self.watched = {
            (crew, event.value)
            for crew, webhooks in self.webhooks.items()
            for webhook in webhooks
            for event in webhook.events
        }
        self._flying: dict[str, asyncio.Task[None]] = {}

    async def run(self, stop: asyncio.Event, interval: float = 1.0) -> None:
        """Send events until ``stop``: when woken (a commit in this process, or on
        PostgreSQL one in any process: the outbox's wake-up) and every ``interval`` seconds
        anyway; at the end, let the POSTs under way finish (each within ``timeout``)."""
        timeout = ClientTimeout(total=self.timeout.total_seconds())
        async with self.listening(self.store), ClientSession(timeout=timeout) as session:
            while not stop.is_set():
                try:
                    await self._launch(session)
                except Exception:
                    log.exception("webhook sending failed; retrying")
                await self.doze(interval)
            await asyncio.gather(*self._flying.values(), return_exceptions=True)

    async def _launch(self, session: ClientSession) -> None:
        """Claim the due events not in flight and send each in a task of its own; mark done
        those no webhook wants."""
        due = await sync(self.store.due_webhook_events, 2 * IN_FLIGHT)
        if any((event.crew, event.type.value) not in self.watched for event in due):
            await sync(self.store.close_unwatched_events, self.watched)
        for listed in due:
            if len(self._flying) >= IN_FLIGHT:
                return
            if listed.id in self._flying or (listed.crew, listed.type.value) not in self.watched:
                continue
            token = secrets.token_hex(8)
            event = await sync(self.store.claim_webhook_event, listed.id, token, self.claim)
            if event is None:  # another sender has it
                continue
            task = asyncio.create_task(self._send(session, event, token))
            self._flying[event.id] = task
            task.add_done_callback(functools.partial(self._landed, event.id))

    def _landed(self, event_id: str, _: asyncio.Task[None]) -> None:
        self._flying.pop(event_id, None)

    async def _send(self, session: ClientSession, event: WebhookEvent, token: str) -> None:
        try:
            body = event.body
            if body is None:
                body = await body_of(self.store, event)
                if not await sync(self.store.fix_webhook_body, event.id, token, body):
                    log.warning("webhook event %s: taken over by another sender", event.id)
                    return
            progress = dict(event.progress)
            # The crew's webhooks that want the event now (one dropped from the file since
            # keeps its record, and holds the event back no more).
            wanted = [w for w in self.webhooks.get(event.crew, ()) if event.type in w.events]
            due = [w for w in wanted if _due(progress.get(w.url, {}), time.time())]
            tried = await asyncio.gather(
                *(self._attempt(session, event, body, w, progress.get(w.url, {})) for w in due)
            )
            progress.update({w.url: state for w, state in zip(due, tried, strict=True)})
            waits = [
                progress[w.url]["next"]
                for w in wanted
                if progress.get(w.url, {}).get("state") == "retry"
            ]
            retry_in = None if not waits else timedelta(seconds=_clamped(min(waits) - time.time()))
            if not await sync(self.store.settle_webhook_event, event.id, token, progress, retry_in):
                log.warning("webhook event %s: taken over by another sender", event.id)
        except Exception:
            log.exception("webhook event %s: not sent; its claim will run out", event.id)

    async def _attempt(
        self,
        session: ClientSession,
        event: WebhookEvent,
        body: str,
        webhook: WebhookSpec,
        before: Mapping[str, Any],
    ) -> dict[str, Any]:
        """:meth:`_post`, whatever happens in it: an error of one webhook's attempt is that
        webhook's to retry, and never undoes what the event's other webhooks recorded."""
        try:
            return await self._post(session, event, body, webhook, before)
        except Exception as exc:
            log.exception("webhook %s: event %s not sent; tried again", _where(webhook), event.id)
            attempts = int(before.get("attempts", 0)) + 1
            delay = self.backoff.after(attempts).total_seconds()
            error = type(exc).__name__
            return {
                "state": "retry",
                "attempts": attempts,
                "error": error,
                "next": time.time() + delay,
            }

    async def _post(
        self,
        session: ClientSession,
        event: WebhookEvent,
        body: str,
        webhook: WebhookSpec,
        before: Mapping[str, Any],
    ) -> dict[str, Any]:
        """One attempt at one webhook; its new state: ``delivered``, ``refused``,
        ``gave_up``, or ``retry`` at ``next`` (unix time)."""
        attempts = int(before.get("attempts", 0)) + 1
        stamp = int(time.time())
        headers = {
            "Content-Type": "application/json",
            SIGNATURE_HEADER: signature(self.secrets[webhook.secret_env], stamp, body),
            DELIVERY_HEADER: event.id,
            EVENT_HEADER: event.type.value,
        }
        wait: float | None = None
        try:
            async with session.post(
                webhook.url, data=body.encode(), headers=headers, allow_redirects=False
            ) as answer:
                status = answer.status
                if 200 <= status < 300:
                    metrics.count_webhook(event.crew, "delivered")
                    return {"state": "delivered", "attempts": attempts, "status": status}
                error = f"HTTP {status}"
                if status not in RETRIED and status < 500:
                    metrics.count_webhook(event.crew, "refused")
                    log.warning(
                        "webhook %s refused event %s (%s): %s; not tried again",
                        _where(webhook),
                        event.id,
                        event.type.value,
                        error,
                    )
                    return {"state": "refused", "attempts": attempts, "error": error}
                wait = _retry_after(answer.headers.get("Retry-After"))
        except (ClientError, TimeoutError) as exc:
            error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            error = _scrubbed(error, webhook)
        age = datetime.now(UTC).replace(tzinfo=None) - event.created_at
        if attempts >= self.max_attempts or age >= self.give_up_after:
            metrics.count_webhook(event.crew, "gave_up")
            log.error(
                "webhook %s: gave up on event %s (%s) after %d attempts over %s: %s",
                _where(webhook),
                event.id,
                event.type.value,
                attempts,
                age,
                error,
            )
            return {"state": "gave_up", "attempts": attempts, "error": error}
        metrics.count_webhook(event.crew, "retry")
        delay = self.backoff.after(attempts).total_seconds() if wait is None else wait
        log.warning(
            "webhook %s: event %s (%s) not delivered (attempt %d): %s; retry in %.1fs",
            _where(webhook),
            event.id,
            event.type.value,
            attempts,
            error,
            delay,
        )
        return {"state": "retry", "attempts": attempts, "error": error, "next": time.time() + delay}


def _due(state: Mapping[str, Any], now: float) -> bool:
    """Whether a webhook's delivery (``state``, none yet: empty) is to be tried now."""
    return bool(state.get("state", "retry") == "retry" and float(state.get("next", 0)) <= now)


def _retry_after(value: str | None) -> float | None:
    """A ``Retry-After`` in seconds (a number, or an HTTP date), from 0 to
    :data:`MOST_RETRY_AFTER`; None when absent or unreadable (NaN and garbage among them)."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
            if when.tzinfo is None:
                when = when.replace(tzinfo=UTC)
            seconds = (when - datetime.now(UTC)).total_seconds()
        except (TypeError, ValueError, OverflowError, IndexError):
            return None
    if math.isnan(seconds):
        return None
    return _clamped(seconds)


def _clamped(seconds: float) -> float:
    """``seconds`` from 0 to :data:`MOST_RETRY_AFTER` (a NaN is 0)."""
    return min(max(seconds, 0.0), MOST_RETRY_AFTER) if not math.isnan(seconds) else 0.0


def _scrubbed(text: str, webhook: WebhookSpec) -> str:
    """``text`` (an error's) with the webhook's URL as :func:`_where` shows it, and no trace
    of its ``user:password@`` or its query however the error quoted them."""
    text = text.replace(webhook.url, _where(webhook))
    parts = urlsplit(webhook.url)
    userinfo = parts.netloc.rpartition("@")[0]
    for secret in (userinfo, parts.password, parts.query):
        if secret:
            text = text.replace(secret, "***")
    return text


def _where(webhook: WebhookSpec) -> str:
    """The webhook's address for a log line: no ``user:password@``, no query (either may hold
    a secret)."""
    parts = urlsplit(webhook.url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    return f"{parts.scheme}://{host}{'' if port is None else f':{port}'}{parts.path}"
