"""``countersign demo``: the whole product on one machine, with no Slack workspace and no key.

One process runs the local Slack sandbox (``sandbox``: the Web API, and a page that
looks and behaves like a Slack channel), the bot exactly as ``countersign serve`` runs it,
its worker pool, dispatcher and scheduler, with the example crews of
``examples/countersign.toml``. The sandbox talks to the bot the way Slack does (signed
requests to ``/slack/events``; the bot answers through the Web API), so what works here
works in Slack. It prints the page's URL and stops cleanly on Ctrl+C or SIGTERM.

State survives a restart, to show the product's promise: stop the demo while a review
waits, start it again, click Approve, and the run carries on. ``--state-dir`` (by default
``.countersign-demo/`` in the working directory) keeps the SQLite database ``demo.db``
(unless ``DATABASE_URL`` or ``--database-url`` names another) and the sandbox's workspace
``sandbox.json``. The two go together: a run whose thread is gone could never be reviewed,
so when either is missing, or the sandbox's file cannot be read, both start over, as they
do with ``--fresh``.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import secrets
import signal
import socket
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from bot.cli.context import CliError, Context, stderr_logging
from bot.cli.worker import fork_server
from bot.settings import mask_url
from bot.slack.text import demo_welcome
from crew_runtime.config import Config, load_config
from storage import DEFAULT_URL

if TYPE_CHECKING:
    from bot.hosting.forkserver import ForkServer
    from bot.hosting.server import Deployment
    from sandbox import SlackStandIn

__all__ = ["DEMO_CHANNEL", "DEMO_USER", "STATE_DIR", "run_demo"]

log = logging.getLogger("countersign.demo")

EXAMPLES_CONFIG = Path("examples") / "countersign.toml"
DEMO_CHANNEL = ("C0DEMO", "crew-demo")
DEMO_USER = ("U0YOU", "you", "You")
DEMO_TEAMMATE = ("U0PRIYA", "priya", "Priya Raman")
STATE_DIR = Path(".countersign-demo")
DATABASE_FILE = "demo.db"
SANDBOX_FILE = "sandbox.json"
# What the demo writes in the state directory. --fresh removes these and nothing else, so
# that a --state-dir naming a folder with other files in it loses none of them.
DATABASE_FILES = tuple(DATABASE_FILE + suffix for suffix in ("", "-wal", "-shm", "-journal"))
SANDBOX_FILES = tuple(SANDBOX_FILE + suffix for suffix in ("", ".tmp", ".broken"))
SENT_FILE = "sent-emails.jsonl"
OUTBOX_ENV_VAR = "COUNTERSIGN_OUTBOX_FILE"  # read by examples/example_crews.py

RESTARTED = (
    "Demo restarted: runs waiting for review carry on where they stopped. "
    "To start over, stop the demo and run `make demo ARGS=--fresh`."
)


def run_demo(ctx: Context) -> int:
    config = _demo_config(ctx)
    # As serve's: before the database is opened and anything starts a thread.
    with (
        fork_server(ctx.args.workers, ctx.args.workers_in_process) as forks,
        stderr_logging(ctx.settings),
    ):
        standin, secret = _restore(ctx)
        try:
            asyncio.run(_demo(ctx, config, standin, secret, forks))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            raise CliError(
                f"{exc}: another program uses the port; choose free ones with --port "
                '(make demo ARGS="--port 8080": the bot takes the next, or --bot-port), '
                "or --port 0 for any"
            ) from None
    ctx.close()
    return 0


def _restore(ctx: Context) -> tuple[SlackStandIn, str]:
    """The sandbox as the last start left it, and the database that goes with it, opened.

    Returns the stand-in, not started, and the signing secret it shares with the bot.
    """
    from sandbox import SlackStandIn

    args = ctx.args
    state_dir: Path = args.state_dir
    try:
        if args.fresh:
            _remove(state_dir, DATABASE_FILES + SANDBOX_FILES + (SENT_FILE,))
        state_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CliError(f"cannot keep the demo's state in {state_dir}: {exc}") from None
    database = state_dir / DATABASE_FILE
    own_database = (
        getattr(args, "database_url", None) is None and ctx.settings.database_url == DEFAULT_URL
    )
    if own_database and not database.exists():
        _remove(state_dir, (SANDBOX_FILE,))  # its threads' runs are gone: nothing to review
    secret = secrets.token_hex(16)
    standin = SlackStandIn(signing_secret=secret, state_file=state_dir / SANDBOX_FILE)
    if own_database and not standin.restored and database.exists():
        log.warning("demo: the sandbox's threads are gone, so its runs go too: starting over")
        _remove(state_dir, DATABASE_FILES)
    if own_database:
        args.database_url = f"sqlite:///{database.resolve()}"
    # What the example outreach crew "sends" is part of the demo's state: its workers (child
    # processes, which inherit this environment) write it there, and --fresh clears it.
    os.environ.setdefault(OUTBOX_ENV_VAR, str((state_dir / SENT_FILE).resolve()))
    if standin.restored:
        log.info("demo: continuing from %s (--fresh starts over)", state_dir)
    try:
        ctx.store()  # fails here, with one line, if the database cannot be opened
    except CliError as exc:
        hint = ' (make demo ARGS="--fresh" starts over)' if own_database else ""
        raise type(exc)(f"{exc}{hint}") from exc
    return standin, secret


def _remove(folder: Path, names: tuple[str, ...]) -> None:
    for name in names:
        (folder / name).unlink(missing_ok=True)


def _demo_config(ctx: Context) -> Config:
    explicit: Path | None = getattr(ctx.args, "config", None) or ctx.settings.config_path
    path = explicit or EXAMPLES_CONFIG
    if explicit is None and not path.is_file():
        raise CliError(
            f"no {EXAMPLES_CONFIG} here: run the demo from the repository's root "
            "(or pass --config PATH)"
        )
    return load_config(path, environ={})


async def _demo(
    ctx: Context, config: Config, standin: SlackStandIn, secret: str, forks: ForkServer | None
) -> None:
    # Imported here, like serve's: Bolt and aiohttp are not needed by the other commands.
    from bot.hosting.server import Deployment, SlackSettings
    from sandbox import SandboxPage

    args = ctx.args
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)

    bot_port = demo_bot_port(args.port, args.bot_port) or _free_port(args.host)
    standin.bot_endpoint = f"http://{args.host}:{bot_port}/slack/events"
    _seed(standin)
    page = SandboxPage(standin, user=DEMO_USER[0], channel=DEMO_CHANNEL[0])
    url = await standin.start(args.host, args.port, page=page)
    slack = SlackSettings(
        bot_token=standin.bot_token,
        signing_secret=secret,
        app_token=None,
        api_url=standin.api_url,
    )
    deployment = Deployment(
        slack,
        config,
        ctx.store(),
        workers=args.workers,
        lease=timedelta(seconds=30),
        sweep_every=5.0,
        workers_in_process=args.workers_in_process,
        forks=forks,
    )
    log.info("demo: database %s, config %s", mask_url(ctx.database_url), config.path)
    log.info(
        "demo: the bot on http://%s:%d: Slack's /slack/events and the HTTP API, /api/v1/ "
        "(docs/guide/http-api.md; tokens from `countersign tokens create`)",
        args.host,
        bot_port,
    )
    serving = asyncio.create_task(deployment.serve_http(args.host, bot_port, stop))
    try:
        await _welcome(standin, deployment, config)
        # The one line a newcomer needs; tests wait for it too.
        print(f"Countersign demo: open {url} in your browser (Ctrl+C to stop)", flush=True)
        await serving
    finally:
        stop.set()
        await serving
        await standin.stop()
    log.info("demo stopped")


def _seed(standin: SlackStandIn) -> None:
    """The people and the channel; again on a restored workspace, which it leaves as it was."""
    bot = standin.workspace.users[standin.workspace.bot_user_id]
    bot.name, bot.real_name = "countersign", "Countersign"  # as manifest.yml names the app
    you, teammate = DEMO_USER, DEMO_TEAMMATE
    standin.add_user(*you)
    standin.add_user(*teammate)
    standin.add_channel(DEMO_CHANNEL[0], DEMO_CHANNEL[1], [you[0], teammate[0]])


async def _welcome(standin: SlackStandIn, deployment: Deployment, config: Config) -> None:
    """Once the bot answers, welcome a newcomer with a start of the configuration's first
    crew (the examples' or your own), or say that the demo restarted.

    The Web API call is the bot's own client.
    """
    for _ in range(100):
        if await _healthy(standin, deployment):
            break
        await asyncio.sleep(0.05)
    if standin.restored:
        note = [{"type": "context", "elements": [{"type": "mrkdwn", "text": RESTARTED}]}]
        await deployment.client.chat_postMessage(
            channel=DEMO_CHANNEL[0], text=RESTARTED, blocks=note
        )
    else:
        first = next(iter(config.crews.values()), None)
        words = demo_welcome(first.name if first else None, first.required_inputs if first else ())
        await deployment.client.chat_postMessage(channel=DEMO_CHANNEL[0], text=words)


async def _healthy(standin: SlackStandIn, deployment: Deployment) -> bool:
    session = deployment.client.session
    if session is None:
        return False
    endpoint = standin.bot_endpoint.removesuffix("/slack/events") + "/healthz"
    try:
        async with session.get(endpoint) as response:
            return response.status == 200
    except OSError:
        return False


def demo_bot_port(port: int, bot_port: int | None) -> int:
    """The bot's port (0: any free one): ``--bot-port``, else the one after the page's, so
    that the HTTP API is where it was at the last start."""
    if bot_port is not None:
        return bot_port
    return port + 1 if port else 0


def _free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port
