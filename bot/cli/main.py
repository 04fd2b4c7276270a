"""``countersign``: the admin command line, and the composition root of the commands.

Commands::

    countersign runs start NAME key=value...      queue a run; prints its id
    countersign runs list [--status S] [--crew NAME] [--limit N] [--json]
    countersign runs show RUN_ID [--json]
    countersign runs cancel RUN_ID [--by USER]
    countersign runs revise RUN_ID TASK "feedback" [--by USER]
    countersign reviews list [--all] [--run RUN_ID] [--json]
    countersign reviews show REVIEW_ID [--json]
    countersign reviews decide REVIEW_ID approve|edit|changes|reject|answer [TEXT|-] --by USER
                               [--standing] [--digest HEX]
    countersign reviews decide REVIEW_ID[@DIGEST]... [--all-pending [--crew NAME]]
                               approve|reject [TEXT|-] --by USER   one line each
    countersign reviews revoke STANDING_ID --by USER
    countersign reviews claim REVIEW_ID --by USER
    countersign reviews reassign REVIEW_ID --to USER --by USER
    countersign reviewers away USER --until YYYY-MM-DD --to USER [--by USER]
    countersign reviewers back USER [--by USER]
    countersign reviewers list [--json]           who is away, until when, and for whom
    countersign tokens create NAME --scopes start,read,decide [--by USER]   prints it once
    countersign tokens list [--json]
    countersign tokens revoke NAME [--by USER]
    countersign worker [--until-idle] [--concurrency N] [--lease SECONDS] [--poll SECONDS]
                       [--no-listen] [--metrics-port P [--metrics-host H]]
    countersign serve [--host H] [--port P] [--socket-mode] [--workers N | --no-workers]
                      [--metrics-port P] [--worker-metrics-port P]
    countersign demo [--port P] [--state-dir DIR] [--fresh]   the bot and a Slack sandbox page
    countersign db upgrade
    countersign crews list

``--config PATH`` and ``--database-url URL`` go before or after the command and override
``COUNTERSIGN_CONFIG`` and ``DATABASE_URL``. Every command brings the schema up to date.

Exit codes: 0 done; 2 the request was wrong (one ``error: ...`` line on stderr, and nothing
changed: validation happens before any write); 1 the database could not be opened.

``import crewai`` takes seconds, so only ``worker`` imports it (the configuration and the
runtime's service do not); ``tests/cli/test_cli.py`` checks it in a fresh process.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from bot.cli import admin as c
from bot.cli import render, retention, tokens
from bot.cli.context import Context
from bot.cli.demo import STATE_DIR, run_demo
from bot.cli.serve import run_serve
from bot.cli.worker import run_worker
from bot.settings import Settings
from crew_runtime.sizing import DEFAULT_CONCURRENCY
from storage import HUMAN_DECISIONS, CountersignError, RunStatus

__all__ = ["build_parser", "main"]

DECISIONS = "|".join(HUMAN_DECISIONS)


class _Handler(Protocol):
    def __call__(self, ctx: Context) -> int: ...


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    """Run one command and return its exit code (the ``countersign`` entry point).

    Args:
        argv: The arguments after the program name; ``sys.argv[1:]`` when None.
        environ: Where settings are read from; ``os.environ`` when None.
    """
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2): argparse printed it
        return exc.code if isinstance(exc.code, int) else 0
    try:
        ctx = Context(args, Settings.from_env(os.environ if environ is None else environ))
        handler: _Handler = args.handler
        try:
            return handler(ctx)
        finally:
            ctx.close()
    except BrokenPipeError:
        # `countersign runs list | head`: the reader is gone, which is no error of ours.
        _detach_stdout()
        return 1
    except CountersignError as exc:  # bad input, settings, not found, refused, unreachable
        return _fail(render.error_words(exc), 2)


def _fail(message: str, code: int) -> int:
    # One line, whatever the message holds, so scripts can show it as it is.
    print("error: " + " ".join(message.splitlines()), file=sys.stderr)
    return code


def _detach_stdout() -> None:
    """Point stdout at /dev/null so flushing it at exit does not raise again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):
        pass  # not a real file (a test's capture): nothing will be flushed to a pipe


# --- the parser ---------------------------------------------------------------------------


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a number above 0, got {text!r}")
    return value


def _count(text: str) -> int:
    """A whole number, 0 included."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, got {text!r}")
    return value


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number from 0 to 65535, got {text!r}")
    return value


MOST_SECONDS = 86_400
"""The longest ``--lease`` or ``--poll``."""


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not value > 0:  # also rejects nan
        raise argparse.ArgumentTypeError(f"expected seconds above 0, got {text!r}")
    if value > MOST_SECONDS:  # inf among them, which no timedelta holds
        raise argparse.ArgumentTypeError(
            f"expected seconds up to {MOST_SECONDS} (a day), got {text!r}"
        )
    return value


def build_parser() -> argparse.ArgumentParser:
    """The whole command tree; each command's handler lives in its group's module."""

    # Global options are accepted before and after the command; SUPPRESS keeps a
    # subcommand's unset copy from overwriting a value given before it.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--config",
        metavar="PATH",
        type=Path,
        default=argparse.SUPPRESS,
        help="countersign.toml to use (default: $COUNTERSIGN_CONFIG, else ./countersign.toml)",
    )
    common.add_argument(
        "--database-url",
        metavar="URL",
        default=argparse.SUPPRESS,
        help="database to use (default: $DATABASE_URL, else sqlite:///countersign.db)",
    )
    parser = argparse.ArgumentParser(
        prog="countersign",
        description="Administer Countersign: runs, reviews, workers and the database.",
        parents=[common],
    )
    groups = parser.add_subparsers(metavar="COMMAND", required=True)

    def command(
        parent: argparse._SubParsersAction[argparse.ArgumentParser],
        name: str,
        handler: _Handler,
        text: str,
    ) -> argparse.ArgumentParser:
        sub = parent.add_parser(name, parents=[common], help=text, description=text)
        sub.set_defaults(handler=handler)
        return sub

    def group(name: str, text: str) -> argparse._SubParsersAction[argparse.ArgumentParser]:
        sub = groups.add_parser(name, help=text, description=text)
        return sub.add_subparsers(metavar="COMMAND", required=True)

    runs = group("runs", "start, list, show and cancel runs")
    start = command(runs, "start", c.runs_start, "queue a run of a crew; prints the run id")
    start.add_argument("crew", metavar="NAME", help="a crew or flow from the configuration")
    start.add_argument("inputs", metavar="key=value", nargs="*", help="the run's inputs")
    start.add_argument("--by", metavar="USER", help="who starts it (default: $USER)")

    listing = command(runs, "list", c.runs_list, "list runs, newest first")
    listing.add_argument("--status", choices=[s.value for s in RunStatus])
    listing.add_argument("--crew", metavar="NAME")
    listing.add_argument("--limit", metavar="N", type=_positive_int, default=50)
    listing.add_argument("--json", action="store_true", help="print JSON")

    show = command(runs, "show", c.runs_show, "a run with its reviews and their decisions")
    show.add_argument("run_id", metavar="RUN_ID")
    show.add_argument("--json", action="store_true", help="print JSON")

    cancel = command(runs, "cancel", c.runs_cancel, "cancel a run and its pending reviews")
    cancel.add_argument("run_id", metavar="RUN_ID")
    cancel.add_argument("--by", metavar="USER", help="who cancels it (default: $USER)")

    revise = command(
        runs, "revise", c.runs_revise, "reopen an approved task of a waiting run with feedback"
    )
    revise.add_argument("run_id", metavar="RUN_ID")
    revise.add_argument("task", metavar="TASK", type=_positive_int, help="task number, from 1")
    revise.add_argument("feedback", metavar="FEEDBACK", help="for the task's agent; - reads stdin")
    revise.add_argument("--by", metavar="USER", help="who reopens it (default: $USER)")

    reviews = group("reviews", "list, show, decide and claim reviews")
    rlist = command(reviews, "list", c.reviews_list, "list pending reviews, oldest first")
    rlist.add_argument("--all", action="store_true", help="also decided and closed reviews")
    rlist.add_argument("--run", metavar="RUN_ID", help="only this run's reviews")
    rlist.add_argument("--json", action="store_true", help="print JSON")

    rshow = command(reviews, "show", c.reviews_show, "a review with its decision")
    rshow.add_argument("review_id", metavar="REVIEW_ID")
    rshow.add_argument("--json", action="store_true", help="print JSON")

    decide = command(reviews, "decide", c.reviews_decide, "record a decision on a review")
    decide.add_argument(
        "words",
        metavar="WORD",
        nargs="+",
        help=(
            f"REVIEW_ID[@DIGEST]... then {DECISIONS}, then TEXT: needed by edit, changes and "
            "answer; optional reason for reject; - reads stdin. Several reviews (or "
            "--all-pending) are approved or rejected, each its own decision"
        ),
    )
    decide.add_argument(
        "--all-pending",
        action="store_true",
        help="also every pending review --by may decide now (approve or reject)",
    )
    decide.add_argument("--crew", metavar="CREW", help="with --all-pending: only this crew's")
    decide.add_argument("--by", metavar="USER", required=True, help="who decides")
    decide.add_argument(
        "--standing",
        action="store_true",
        help="approve this call and the tool's later calls in the run (the gate's allow_standing)",
    )
    decide.add_argument(
        "--digest",
        metavar="HEX",
        help="the action digest you reviewed (8+ hex digits): refused if the review's is another",
    )
    decide.add_argument(
        "--outcome",
        metavar="OUTCOME",
        help="the outcome a flow's @human_feedback(emit=[...]) takes (one of the review's)",
    )

    revoke = command(
        reviews, "revoke", c.reviews_revoke, "revoke a standing approval of a tool's calls"
    )
    revoke.add_argument("standing_id", metavar="STANDING_ID")
    revoke.add_argument("--by", metavar="USER", required=True, help="who revokes it")

    claim = command(reviews, "claim", c.reviews_claim, "say you handle a pending review")
    claim.add_argument("review_id", metavar="REVIEW_ID")
    claim.add_argument("--by", metavar="USER", required=True, help="who claims it")

    reassign = command(reviews, "reassign", c.reviews_reassign, "give a review to a reviewer")
    reassign.add_argument("review_id", metavar="REVIEW_ID")
    reassign.add_argument("--to", metavar="USER", required=True, help="who handles it now")
    reassign.add_argument("--by", metavar="USER", required=True, help="who reassigns it")

    people = group("reviewers", "reviewers away: whose reviews go to whom, until when")
    away = command(people, "away", c.reviewers_away, "hand someone's reviews to a delegate")
    away.add_argument("person", metavar="USER", help="who is away")
    away.add_argument("--until", metavar="YYYY-MM-DD", required=True, help="through that day, UTC")
    away.add_argument("--to", metavar="USER", required=True, help="who reviews for them")
    away.add_argument("--by", metavar="USER", help="who says so (default: USER)")
    back = command(people, "back", c.reviewers_back, "end someone's absence now")
    back.add_argument("person", metavar="USER")
    back.add_argument("--by", metavar="USER", help="who says so (default: USER)")
    plist = command(people, "list", c.reviewers_list, "who is away now")
    plist.add_argument("--json", action="store_true", help="print JSON")

    api = group("tokens", "bearer tokens of the HTTP API that serve answers on /api/v1")
    tcreate = command(api, "create", tokens.tokens_create, "make a token; prints it once")
    tcreate.add_argument("name", metavar="NAME", help="letters, digits, '.', '_' and '-'")
    tcreate.add_argument(
        "--scopes",
        metavar="SCOPES",
        required=True,
        help="what it may do, comma-separated: start (runs), read (runs, reviews), decide",
    )
    tcreate.add_argument("--by", metavar="USER", help="who makes it (default: $USER)")
    tlist = command(api, "list", tokens.tokens_list, "the tokens, never their secrets")
    tlist.add_argument("--json", action="store_true", help="print JSON")
    trevoke = command(api, "revoke", tokens.tokens_revoke, "refuse a token from now on")
    trevoke.add_argument("name", metavar="NAME")
    trevoke.add_argument("--by", metavar="USER", help="who revokes it (default: $USER)")

    worker = command(groups, "worker", run_worker, "execute runs until stopped")
    worker.add_argument("--until-idle", action="store_true", help="exit when no run is left")
    worker.add_argument(
        "--concurrency",
        metavar="N",
        type=_positive_int,
        help=(
            f"runs executed at once (default {DEFAULT_CONCURRENCY}). LLM-bound runs wait on "
            "the model on a thread each: one more costs about 2 threads, a few MiB and CPU "
            "only when its model answers; database connections stay at most 20. Raise it for "
            "slow models, lower it where memory is short"
        ),
    )
    worker.add_argument("--lease", metavar="SECONDS", type=_positive_seconds)
    worker.add_argument("--poll", metavar="SECONDS", type=_positive_seconds)
    worker.add_argument(
        "--no-listen",
        action="store_true",
        help="poll only: no LISTEN connection on PostgreSQL (behind a pooler that cannot keep one)",
    )
    worker.add_argument(
        "--nice",
        metavar="N",
        type=_positive_int,
        help="lower this process's CPU priority by N (serve uses 10, to keep acks fast)",
    )
    worker.add_argument(
        "--parent-pid",
        metavar="PID",
        type=_positive_int,
        help="stop when process PID, this one's parent, dies (how serve runs its worker pool)",
    )
    worker.add_argument(
        "--metrics-port",
        metavar="PORT",
        type=_port,
        default=0,
        help="serve /metrics and /healthz on this port (default 0: not served)",
    )
    worker.add_argument(
        "--metrics-host", default="127.0.0.1", help="address of --metrics-port (127.0.0.1)"
    )
    # Pipes from serve's worker pool (bot.hosting.pool.ProcessPool); not for people.
    worker.add_argument("--wake-fd", type=int, help=argparse.SUPPRESS)
    worker.add_argument("--settled-fd", type=int, help=argparse.SUPPRESS)

    serve = command(
        groups,
        "serve",
        run_serve,
        "the Slack bot with its dispatcher, scheduler and workers, and the HTTP API on /api/v1",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (HTTP mode)")
    serve.add_argument("--port", type=_positive_int, default=3000, help="port (HTTP mode)")
    serve.add_argument(
        "--socket-mode", action="store_true", help="connect over Socket Mode (SLACK_APP_TOKEN)"
    )
    serve.add_argument(
        "--workers",
        metavar="N",
        type=_count,
        default=DEFAULT_CONCURRENCY,
        help=(
            f"runs its own workers execute at once (default {DEFAULT_CONCURRENCY}; 0: none, "
            "the Slack side alone); the trade-off is the worker's --concurrency"
        ),
    )
    serve.add_argument(
        "--no-workers",
        dest="workers",
        action="store_const",
        const=0,
        help="the Slack side alone (as --workers 0): workers run as `countersign worker`",
    )
    serve.add_argument(
        "--workers-in-process",
        action="store_true",
        help="run the worker pool on threads of this process instead of a child process",
    )
    serve.add_argument("--lease", metavar="SECONDS", type=_positive_seconds, default=30.0)
    serve.add_argument(
        "--metrics-port",
        metavar="PORT",
        type=_port,
        default=0,
        help="also serve /metrics and /healthz on this port, on --host (Socket Mode has no "
        "other; default 0: only on --port, in HTTP mode)",
    )
    serve.add_argument(
        "--worker-metrics-port",
        metavar="PORT",
        type=_port,
        default=0,
        help="the worker process's own /metrics and /healthz, on --host (default 0: none)",
    )

    # The demo's own defaults for the global options: the example crews, its own database.
    demo_common = argparse.ArgumentParser(add_help=False)
    demo_common.add_argument(
        "--config",
        metavar="PATH",
        type=Path,
        default=argparse.SUPPRESS,
        help="countersign.toml of the crews to try (default: $COUNTERSIGN_CONFIG, else "
        "examples/countersign.toml)",
    )
    demo_common.add_argument(
        "--database-url",
        metavar="URL",
        default=argparse.SUPPRESS,
        help="database to use (default: $DATABASE_URL, else demo.db in --state-dir)",
    )
    demo_text = "the bot, its workers and a local Slack sandbox page with your crews, offline"
    demo = groups.add_parser("demo", parents=[demo_common], help=demo_text, description=demo_text)
    demo.set_defaults(handler=run_demo)
    demo.epilog = (
        f"Runs and the sandbox's messages are kept in --state-dir ({STATE_DIR}/ by default: "
        "its demo.db, unless --database-url or $DATABASE_URL names another database, and "
        "sandbox.json), so a run waiting for review when the demo stops carries on when it "
        "starts again. --fresh starts over. The crews come from examples/countersign.toml "
        "unless --config or $COUNTERSIGN_CONFIG names another file."
    )
    demo.add_argument(
        "--host",
        default="127.0.0.1",
        help="address of the sandbox and the bot (default: %(default)s)",
    )
    demo.add_argument(
        "--port",
        type=_port,
        default=8000,
        help="port of the sandbox page (default: %(default)s; 0: any free port)",
    )
    demo.add_argument(
        "--bot-port",
        metavar="PORT",
        type=_port,
        default=None,
        help="port of the bot: its /slack/events and the HTTP API, /api/v1/ (default: --port "
        "+ 1, so 8001; with --port 0, any free port)",
    )
    demo.add_argument(
        "--workers",
        metavar="N",
        type=_positive_int,
        default=2,
        help="runs executed at once (default: %(default)s)",
    )
    demo.add_argument(
        "--workers-in-process",
        action="store_true",
        help="run the worker pool on threads of this process instead of a child process",
    )
    demo.add_argument(
        "--state-dir",
        metavar="DIR",
        type=Path,
        default=STATE_DIR,
        help="where runs and the sandbox's messages are kept between starts (default: %(default)s)",
    )
    demo.add_argument(
        "--fresh",
        action="store_true",
        help="start over: delete the runs and messages kept in the state directory first",
    )

    db = group("db", "the database schema")
    command(db, "upgrade", c.db_upgrade, "apply pending migrations; prints the revision")

    prune = command(
        groups,
        "prune",
        retention.prune,
        "delete what the configuration's retention no longer keeps",
    )
    prune.add_argument(
        "--dry-run", action="store_true", help="print what would be deleted; delete nothing"
    )
    prune.add_argument("--json", action="store_true", help="print JSON")

    audit = group("audit", "the audit trail: who decided what, when")
    export = command(
        audit,
        "export",
        retention.audit_export,
        "one record per decision, claim, standing approval and delegation, oldest first",
    )
    export.add_argument("--since", metavar="DATE", required=True, help="ISO date, UTC, from")
    export.add_argument("--until", metavar="DATE", required=True, help="ISO date, UTC, before")
    export.add_argument(
        "--crew", metavar="NAME", help="only this crew's runs (no delegations, which have none)"
    )
    export.add_argument("--format", choices=["jsonl", "csv"], default="jsonl")
    export.add_argument(
        "--workspace",
        metavar="URL",
        help="e.g. https://acme.slack.com, for the threads' permalinks "
        "(default: what Slack's auth.test says for $SLACK_BOT_TOKEN)",
    )

    crews = group("crews", "the configured crews")
    command(crews, "list", c.crews_list, "crews and flows in the configuration")

    rules = group("rules", "the rules that decide gated tool calls (crew_runtime.rules)")
    rtest = command(rules, "test", c.rules_test, "which rule a call would match, and what it does")
    rtest.add_argument("crew", metavar="CREW")
    rtest.add_argument("--tool", metavar="TOOL", required=True, help="the gated tool called")
    rtest.add_argument("--args", metavar="JSON", default="{}", help="its arguments, a JSON object")
    rtest.add_argument(
        "--inputs", metavar="JSON", default="{}", help="the run's inputs, a JSON object of strings"
    )
    rtest.add_argument("--by", metavar="USER", default="", help="who would start the run")
    return parser


if __name__ == "__main__":  # pragma: no cover - `python -m bot` is the supported way
    sys.exit(main())
