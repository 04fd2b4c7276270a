"""``countersign serve``: one command is a whole deployment.

The Bolt ``AsyncApp`` (HTTP on ``/slack/events`` through aiohttp, or Socket Mode), the
HTTP API on ``/api/v1`` (``bot.hosting.api``; in Socket Mode on the metrics port), the
outbox dispatcher, the webhook sender, APScheduler's housekeeping jobs and an embedded worker
pool (a child ``countersign worker`` process by default, see ``bot.hosting.pool``) share one
store. Nothing here blocks the event loop, so Slack's acks stay fast whatever the crews are
doing.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from aiohttp import ClientSession, web
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from bot.hosting.api import Api
from bot.hosting.forkserver import ForkServer
from bot.hosting.http import SlackEndpoint
from bot.hosting.metrics import Endpoints, listen, start_site
from bot.hosting.pool import NoWorkers, ProcessPool, ThreadPool, WorkerPool
from bot.hosting.socket_mode import DurableSocketModeHandler
from bot.settings import Settings, SettingsError
from bot.slack.authz import Reviewers
from bot.slack.dispatcher import Dispatcher
from bot.slack.handlers import sync
from bot.slack.intake import Intake
from bot.slack.listeners import Listeners
from bot.slack.slack_errors import api_error, explanation
from bot.webhooks.sender import WebhookSender
from crew_runtime import metrics
from crew_runtime.config import Config
from crew_runtime.service import Countersign
from storage import Backoff, InboxStore, Store

log = logging.getLogger(__name__)


class _NotOurToken(logging.Filter):
    """Bolt reads ``SLACK_BOT_TOKEN`` itself and, given our client too, warns at every start
    that it will not use it: the client carries that very token, so the line says nothing."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "`token` will be unused" not in record.getMessage()


_BOLT_LOG = logging.getLogger("slack_bolt.AsyncApp")
_BOLT_LOG.addFilter(_NotOurToken())

SLACK_DEFAULT_API = "https://slack.com/api/"


class SlackSettingsError(SettingsError):
    """A Slack credential is missing; the message names it and where to find it."""


@dataclass(frozen=True, repr=False)
class SlackSettings:
    """Slack credentials from the environment. ``repr`` never shows them."""

    bot_token: str
    signing_secret: str
    app_token: str | None
    api_url: str

    @classmethod
    def from_settings(cls, settings: Settings, *, socket_mode: bool) -> SlackSettings:
        """Check the credentials once, at start.

        Raises:
            SlackSettingsError: a needed variable is missing or empty, so the
                process refuses to start instead of failing every request.
        """
        needed = {
            "SLACK_BOT_TOKEN": (
                settings.slack_bot_token,
                "the Bot User OAuth Token (xoxb-…) from OAuth & Permissions",
            ),
        }
        if not socket_mode:  # Socket Mode receives nothing over HTTP: nothing to verify
            needed["SLACK_SIGNING_SECRET"] = (
                settings.slack_signing_secret,
                "the Signing Secret from Basic Information",
            )
        else:
            needed["SLACK_APP_TOKEN"] = (
                settings.slack_app_token,
                "an app-level token (xapp-…) with connections:write",
            )
        missing = [f"{name} ({where})" for name, (value, where) in needed.items() if not value]
        if missing:
            raise SlackSettingsError("missing Slack settings: " + "; ".join(missing))
        api_url = settings.slack_api_url or SLACK_DEFAULT_API
        return cls(
            bot_token=settings.slack_bot_token or "",
            signing_secret=settings.slack_signing_secret or "",
            app_token=settings.slack_app_token,
            api_url=api_url if api_url.endswith("/") else api_url + "/",
        )

    def __repr__(self) -> str:
        return f"SlackSettings(api_url={self.api_url!r}, credentials=<hidden>)"


class CountingWebClient(AsyncWebClient):
    """Slack's Web API client, counting the calls that fail (``countersign_slack_api_errors``)
    once its retries are spent, by method and Slack's error code; a refusal Slack explains
    (``response_metadata.messages``: which block broke, and how; ``missing_scope``'s
    ``needed``) is logged with its code, whoever made the call."""

    async def api_call(self, api_method: str, **kwargs: Any) -> AsyncSlackResponse:
        try:
            return await super().api_call(api_method, **kwargs)
        except SlackApiError as exc:
            # A body that is not JSON (an HTTP 5xx page) has no error code: its status says it.
            data = exc.response.data
            error = data.get("error") if isinstance(data, dict) else None
            metrics.count_slack_error(api_method, str(error or f"http_{exc.response.status_code}"))
            explained = explanation(exc)
            if explained != api_error(exc):
                log.warning("slack refused %s: %s", api_method, explained)
            raise
        except Exception as exc:  # no answer: a connection refused or dropped, a timeout
            metrics.count_slack_error(api_method, type(exc).__name__)
            raise


def slack_client(settings: SlackSettings, *, retry_lost_answers: bool = True) -> AsyncWebClient:
    """A Web API client that waits out rate limits (Retry-After) and retries 5xx and dropped
    connections, unless ``retry_lost_answers`` is False.

    Slack may have applied a call whose answer was a 5xx or a dropped connection, so the
    outbox dispatcher's client must not retry those: the dispatcher looks for a post it
    may have made before making it again (``bot.slack.dispatcher``). A 429 is never applied.
    """
    handlers: list[AsyncRetryHandler] = [AsyncRateLimitErrorRetryHandler(max_retry_count=5)]
    if retry_lost_answers:
        handlers += [
            AsyncServerErrorRetryHandler(max_retry_count=2),
            AsyncConnectionErrorRetryHandler(max_retry_count=2),
        ]
    return CountingWebClient(
        token=settings.bot_token, base_url=settings.api_url, retry_handlers=handlers
    )


class Deployment:
    """Everything ``countersign serve`` runs, built in one place (the composition root).

    ``slack_backoff`` replaces the waits of the outbox's and the Home tabs' retries (1 s and
    2 s at first, doubling): the tests' bots retry in milliseconds."""

    def __init__(
        self,
        slack: SlackSettings,
        config: Config,
        store: Store,
        *,
        workers: int = 2,
        lease: timedelta = timedelta(seconds=30),
        poll: timedelta = timedelta(seconds=0.5),
        sweep_every: float = 15.0,
        workers_in_process: bool = False,
        inbox_claim: timedelta = timedelta(seconds=10),
        metrics_at: tuple[str, int] | None = None,
        worker_metrics: tuple[str, int] | None = None,
        webhook_secrets: Mapping[str, bytes] | None = None,
        forks: ForkServer | None = None,
        slack_backoff: Backoff | None = None,
    ) -> None:
        self.store = store
        self.client = slack_client(slack)
        # A worker's lease is also how long a dead process holds its outbox row (or webhook
        # event).
        self.dispatch_client = slack_client(slack, retry_lost_answers=False)
        service = Countersign(store, config)
        self.dispatcher = Dispatcher(
            self.dispatch_client, service, claim=lease, backoff=slack_backoff
        )
        self.webhooks = WebhookSender(store, config, webhook_secrets or {}, claim=lease)
        self.pool: WorkerPool
        if workers == 0:
            self.pool = NoWorkers()
        elif workers_in_process:
            self.pool = ThreadPool(
                store,
                config,
                concurrency=workers,
                lease=lease,
                poll=poll,
                on_settled=self.announce,
            )
        else:
            database_url = store.engine.url.render_as_string(hide_password=False)
            self.pool = ProcessPool(
                database_url,
                config,
                concurrency=workers,
                lease=lease,
                poll=poll,
                on_settled=self.announce,
                metrics_at=worker_metrics,
                forks=forks,
            )
        reviewers = Reviewers(self.client)
        self.listeners = Listeners(service, reviewers, self.wake)
        self.api = Api(service, reviewers, self.wake)
        # process_before_response: a dispatch returns once its listener is done and says
        # whether it failed, so the intake knows when a recorded request is handled.
        self.app = AsyncApp(
            client=self.client,
            signing_secret=slack.signing_secret,
            process_before_response=True,
            logger=_BOLT_LOG,
        )
        self.listeners.register(self.app)
        self.intake = Intake(
            self.app, InboxStore(store, claim=inbox_claim), early=self.listeners.early_step
        )
        self.slack = slack
        self.retention = config.retention_policy()
        self.sweep_every = sweep_every
        # What this process counted, and the database's gauges read at each scrape.
        self.endpoints = Endpoints(
            store,
            (metrics.REGISTRY, metrics.database_registry(store)),
            extra=lambda: {"worker": self.pool.alive()},
        )
        self.metrics_at = metrics_at
        self._metrics_site: web.AppRunner | None = None
        self._scheduler: AsyncIOScheduler | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._stop = asyncio.Event()

    def wake(self) -> None:
        self.pool.wake()
        self.announce()

    def announce(self) -> None:
        """Look at the outbox and the webhook events now: something committed."""
        self.dispatcher.wake()
        self.webhooks.wake()

    def web_app(self) -> web.Application:
        app = web.Application()
        endpoint = SlackEndpoint(self.intake, self.slack.signing_secret)  # HTTP only
        app.router.add_post("/slack/events", endpoint.handle)
        self.api.add_routes(app)
        self.endpoints.add_routes(app)
        return app

    async def start_background(self, *, api_on_metrics_port: bool = False) -> None:
        """Worker threads, the dispatcher, the housekeeping jobs and the metrics port (with
        ``api_on_metrics_port``, the HTTP API's too: Socket Mode has no port of its own)."""
        self._stop.clear()
        if self.metrics_at is not None:
            app = self.endpoints.app()
            if api_on_metrics_port:
                self.api.add_routes(app)
            self._metrics_site = await start_site(app, *self.metrics_at)
            log.info("metrics on http://%s:%d/metrics", *self.metrics_at)
            if api_on_metrics_port:
                log.info("HTTP API on http://%s:%d/api/v1", *self.metrics_at)
        # One pooled HTTP session for every Web API call (slack_sdk opens a new
        # connection per call otherwise). It belongs to this loop, hence made here.
        self.client.session = ClientSession()
        self.dispatch_client.session = self.client.session
        self.pool.start()
        self._tasks.append(asyncio.create_task(self.dispatcher.run(self._stop)))
        self._tasks.append(asyncio.create_task(self.webhooks.run(self._stop)))
        self._scheduler = AsyncIOScheduler()
        self._scheduler.add_job(
            self._sweep, "interval", seconds=self.sweep_every, max_instances=1, coalesce=True
        )
        self._scheduler.add_job(
            self.intake.forget, "interval", minutes=10, max_instances=1, coalesce=True
        )
        self._scheduler.add_job(
            self._checkpoint, "interval", seconds=5, max_instances=1, coalesce=True
        )
        # Daily, and once as serve starts: a deployment restarted every day still prunes.
        self._scheduler.add_job(
            self._prune,
            "interval",
            days=1,
            next_run_time=datetime.now(UTC),
            max_instances=1,
            coalesce=True,
        )
        self._scheduler.start()

    async def _checkpoint(self) -> None:
        """SQLite's log folded into the database here, never by a commit a person waits on."""
        await sync(self.store.checkpoint)

    async def _sweep(self) -> None:
        """Reminders, escalations and expiries that are due (compare-and-set: safe twice)."""
        done = await sync(self.store.sweep_reviews)
        metrics.count_sweep(done)
        if any(done.values()):
            log.info("review sweep: %s", done)
            self.wake()

    async def _prune(self) -> None:
        """What retention no longer keeps, deleted in small batches (``countersign prune``)."""
        pruned = await sync(self.store.prune, self.retention)
        if pruned:
            log.info("pruned: %s", {crew: dict(tables) for crew, tables in pruned.items()})

    async def stop_background(self) -> None:
        self._stop.set()
        self.announce()
        if self._scheduler is not None:
            self._scheduler.shutdown(wait=False)
        for task in self._tasks:
            await task
        self._tasks.clear()
        await self.pool.stop()
        if self.client.session is not None:
            await self.client.session.close()
            self.client.session = self.dispatch_client.session = None
        if self._metrics_site is not None:
            await self._metrics_site.cleanup()
            self._metrics_site = None

    async def serve_http(self, host: str, port: int, stop: asyncio.Event) -> None:
        # No access log: a line per request on the event loop, and nothing an operator needs.
        runner = web.AppRunner(self.web_app(), handle_signals=False, access_log=None)
        await runner.setup()
        self.intake.start()
        # Everything built so far lives as long as the process: keep it out of the
        # collector's full passes, which otherwise stall the loop (and a burst of acks).
        gc.freeze()
        await listen(runner, host, port)
        log.info("listening on http://%s:%d/slack/events", host, port)
        await self.start_background()
        try:
            await stop.wait()
        finally:
            for site in list(runner.sites):  # no new requests; those in hand finish
                await site.stop()
            await self.intake.stop()
            await self.stop_background()
            await runner.cleanup()

    async def serve_socket_mode(self, stop: asyncio.Event) -> None:
        handler = DurableSocketModeHandler(self.app, self.slack.app_token or "", self.intake)
        self.intake.start()
        await self.start_background(api_on_metrics_port=True)
        try:
            # Connecting retries for as long as Slack cannot be reached: a stop must end it.
            log.info("connecting to Slack over Socket Mode")
            connecting = asyncio.create_task(handler.connect_async())  # type: ignore[no-untyped-call]
            stopping = asyncio.create_task(stop.wait())
            await asyncio.wait({connecting, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if connecting.done():
                connecting.result()
                log.info("connected to Slack over Socket Mode")
                await stopping
            else:
                connecting.cancel()
                log.info("stopped before Slack could be reached")
        finally:
            await handler.close_async()  # type: ignore[no-untyped-call]
            await self.intake.stop()
            await self.stop_background()
