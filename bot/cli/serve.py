"""``countersign serve``: the bot, the dispatcher, the scheduler and a worker pool in one process.

HTTP by default (Slack's requests on ``/slack/events``, the HTTP API on ``/api/v1``, plus
``/healthz`` and ``/metrics``),
or Socket Mode with ``--socket-mode`` for development without a public URL (``--metrics-port``
then serves ``/healthz`` and ``/metrics``). Missing Slack
credentials, or a webhook's secret missing from the environment, stop it at start with one
line saying which and where to find them.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from datetime import timedelta
from typing import TYPE_CHECKING

from bot.cli.context import CliError, Context, stderr_logging, where
from bot.cli.worker import fork_server
from crew_runtime.config import ConfigError
from crew_runtime.webhooks import webhook_secrets

if TYPE_CHECKING:
    from bot.hosting.server import Deployment

log = logging.getLogger("countersign.serve")


def run_serve(ctx: Context) -> int:
    from bot.hosting.server import Deployment, SlackSettings, SlackSettingsError

    args = ctx.args
    try:
        slack = SlackSettings.from_settings(ctx.settings, socket_mode=args.socket_mode)
    except SlackSettingsError as exc:
        raise CliError(str(exc)) from None
    config = ctx.config()
    try:
        secrets = webhook_secrets(config, ctx.settings.environ)
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    # Before the store, the log handlers and asyncio: the fork server must not share them.
    with fork_server(args.workers, args.workers_in_process) as forks:
        store = ctx.store()
        with stderr_logging(ctx.settings):
            log.info(
                "serving: database %s, config %s, %d worker(s), %s",
                where(ctx.database_url),
                config.path,
                args.workers,
                "Socket Mode"
                if args.socket_mode
                else f"http://{args.host}:{args.port}/slack/events",
            )
            deployment = Deployment(
                slack,
                config,
                store,
                workers=args.workers,
                lease=timedelta(seconds=args.lease),
                workers_in_process=args.workers_in_process,
                metrics_at=(args.host, args.metrics_port) if args.metrics_port else None,
                worker_metrics=(args.host, args.worker_metrics_port)
                if args.worker_metrics_port
                else None,
                webhook_secrets=secrets,
                forks=forks,
            )
            asyncio.run(_serve(deployment, args.socket_mode, args.host, args.port))
    return 0


async def _serve(deployment: Deployment, socket_mode: bool, host: str, port: int) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    if socket_mode:
        await deployment.serve_socket_mode(stop)
    else:
        await deployment.serve_http(host, port, stop)
    log.info("stopped")
