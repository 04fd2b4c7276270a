"""``/metrics`` (Prometheus' text format) and ``/healthz`` (is the database reachable?).

``serve`` answers both on its HTTP port, beside ``/slack/events``, and on ``--metrics-port``
(the only way in Socket Mode, where it has no HTTP endpoint of its own); a worker on its
``--metrics-port``, from a thread of its own. What each process's ``/metrics`` holds is said
in ``crew_runtime.metrics``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from collections.abc import Callable, Sequence

from aiohttp import web

from bot.errors import BotError
from bot.log_format import quiet_unparsable_requests
from bot.slack.handlers import sync
from crew_runtime.metrics import CONTENT_TYPE, Registry, exposition
from storage import Store
from storage.stats import ping

__all__ = ["HEALTH_TIMEOUT", "CannotListen", "Endpoints", "listen", "serve_in_thread", "start_site"]

HEALTH_TIMEOUT = 2.0
"""How long ``/healthz`` waits for the database before it answers 503."""


class CannotListen(BotError):
    """A port serve or a worker was told to listen on cannot be listened on (in use, say)."""

    def __init__(self, host: str, port: int, exc: OSError) -> None:
        # asyncio's own strerror is a sentence with the address in it again
        why = os.strerror(exc.errno) if exc.errno else str(exc)
        super().__init__(f"cannot listen on {host}:{port}: {why}")


async def listen(runner: web.AppRunner, host: str, port: int) -> None:
    """Serve ``runner`` on ``host:port``, or raise :class:`CannotListen`. A request that is
    not valid HTTP is logged without what it sent (it may hold a token)."""
    quiet_unparsable_requests()
    try:
        await web.TCPSite(runner, host, port).start()
    except OSError as exc:
        raise CannotListen(host, port, exc) from None


class Endpoints:
    """The handlers of ``/metrics`` and ``/healthz`` for one process.

    ``registries``: what ``/metrics`` shows. ``extra``: more fields for a healthy
    ``/healthz`` answer (serve's says whether its worker process is alive).
    """

    def __init__(
        self,
        store: Store,
        registries: Sequence[Registry],
        extra: Callable[[], dict[str, bool]] | None = None,
    ) -> None:
        self.store = store
        self.registries = registries
        self.extra = extra

    def add_routes(self, app: web.Application) -> None:
        app.router.add_get("/metrics", self.metrics)
        app.router.add_get("/healthz", self.healthz)

    def app(self) -> web.Application:
        app = web.Application()
        self.add_routes(app)
        return app

    async def metrics(self, _request: web.Request) -> web.Response:
        body = await sync(exposition, self.registries)  # reads the database: off the loop
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})

    async def healthz(self, _request: web.Request) -> web.Response:
        """200 ``{"ok": true, "database": "ok", …}`` when a trivial query answers within
        :data:`HEALTH_TIMEOUT`, else 503 with the failure's class (never its message, which
        may quote the database's address)."""
        try:
            await asyncio.wait_for(sync(ping, self.store), HEALTH_TIMEOUT)
        except Exception as exc:  # the database's failure, whatever the driver calls it
            failure = "timeout" if isinstance(exc, TimeoutError) else type(exc).__name__
            return web.json_response(
                {"ok": False, "database": "unreachable", "error": failure}, status=503
            )
        return web.json_response({"ok": True, "database": "ok", **(self.extra or dict)()})


async def start_site(app: web.Application, host: str, port: int) -> web.AppRunner:
    """Serve ``app`` on ``host:port`` from this event loop; clean up the runner after."""
    runner = web.AppRunner(app, handle_signals=False, access_log=None)
    await runner.setup()
    try:
        await listen(runner, host, port)
    except BaseException:
        await runner.cleanup()
        raise
    return runner


def serve_in_thread(endpoints: Endpoints, host: str, port: int) -> None:
    """Serve ``endpoints`` from a daemon thread with an event loop of its own (a worker is
    not async), for as long as the process lives.

    Raises:
        CannotListen: the port cannot be listened on (in use, say); raised here, at start.
    """
    bound: concurrent.futures.Future[None] = concurrent.futures.Future()

    async def serve() -> None:
        try:
            await start_site(endpoints.app(), host, port)
        except BaseException as exc:
            bound.set_exception(exc)
            return
        bound.set_result(None)
        await asyncio.Event().wait()  # until the process ends

    threading.Thread(
        target=asyncio.run, args=(serve(),), name="countersign-metrics", daemon=True
    ).start()
    bound.result()
