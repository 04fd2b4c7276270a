"""The CLI's commands on what is kept: ``prune`` and ``audit export``.

``prune`` deletes what the configuration's retention no longer keeps (the same sweep ``serve``
runs daily). ``audit export`` writes one record per decision, streamed: its memory does not
grow with the number of decisions.

Its CSV is read by spreadsheets, which run a cell that starts with ``=``, ``+``, ``-``, ``@``,
a tab or a carriage return as a formula ("CSV injection"), and what the cells hold came from
reviewers and models (feedback, reasons, drafts, edits, ``--by``). Such a cell is written with
a ``'`` before it and every cell is quoted, as OWASP's rule has it; the JSONL export stays
exact.
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, TextIO

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.cli.context import CliError, Context
from bot.slack.links import message_link
from storage.audit import AuditRecord
from storage.retention import Pruned

FIELDS = (
    "run_id",
    "crew",
    "review_id",
    "review_kind",
    "decided_by",
    "decided_at",
    "decision",
    "feedback",
    "approved_by",
    "approval_stages",
    "proposed_args",
    "approved_args",
    "executed_args",
    "assigned_to",
    "edit_diff",
    "digest",
    "rule",
    "permalink",
    "details",
)


def prune(ctx: Context) -> int:
    policy = ctx.config().retention_policy()
    pruned = ctx.store().prune(policy, dry_run=ctx.args.dry_run)
    if ctx.args.json:
        print(json.dumps({crew: dict(tables) for crew, tables in sorted(pruned.items())}))
        return 0
    print(prune_summary(pruned, dry_run=ctx.args.dry_run))
    return 0


def prune_summary(pruned: Pruned, *, dry_run: bool) -> str:
    """One line per crew: the rows of each table deleted (or that a real prune would)."""
    verb = "would delete" if dry_run else "deleted"
    if not pruned:
        return f"nothing to prune ({verb} nothing)"
    return "\n".join(
        f"{crew}: {verb} " + ", ".join(f"{count} {table}" for table, count in sorted(t.items()))
        for crew, t in sorted(pruned.items())
    )


def audit_export(ctx: Context) -> int:
    args = ctx.args
    since, until = parse_day(args.since, "--since"), parse_day(args.until, "--until")
    if since >= until:
        raise CliError(f"--since ({args.since}) must be before --until ({args.until})")
    workspace = args.workspace or workspace_url(ctx)
    records = ctx.store().audit_records(since=since, until=until, crew=args.crew)
    write_records(records, args.format, workspace, sys.stdout)
    return 0


def workspace_url(ctx: Context) -> str | None:
    """The workspace's address, as Slack's ``auth.test`` gives it to the bot's token; None
    without a token (the records then carry no permalink)."""
    settings = ctx.settings
    if not settings.slack_bot_token:
        return None
    base = settings.slack_api_url or WebClient.BASE_URL
    try:
        found = WebClient(token=settings.slack_bot_token, base_url=base).auth_test()
    except SlackApiError as exc:
        raise CliError(
            f"Slack's auth.test failed ({exc.response.get('error')}): "
            "pass --workspace https://YOURS.slack.com for the permalinks"
        ) from None
    url = found.get("url")
    return url if isinstance(url, str) else None


def parse_day(text: str, option: str) -> datetime:
    """An ISO date or date and time (UTC unless it says otherwise), as naive UTC."""
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise CliError(
            f"{option} {text!r} is not an ISO date: use e.g. 2026-01-31 or 2026-01-31T12:00"
        ) from None
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(UTC).replace(tzinfo=None)
    return parsed


def permalink(workspace: str | None, channel: str | None, ts: str | None) -> str | None:
    """Slack's link to a run's thread: ``https://acme.slack.com/archives/C…/p1700000000000100``."""
    if not (workspace and channel and ts):
        return None
    return message_link(workspace, channel, ts)


def write_records(
    records: Iterator[AuditRecord], fmt: str, workspace: str | None, out: TextIO
) -> None:
    """Write each record as it comes: a JSON line, or a CSV row (arguments and approvers as
    JSON)."""
    writer = csv.DictWriter(out, fieldnames=FIELDS, quoting=csv.QUOTE_ALL) if fmt == "csv" else None
    if writer is not None:
        writer.writeheader()
    for record in records:
        row = _row(record, workspace)
        if writer is None:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
        else:
            writer.writerow({k: _cell(v) for k, v in row.items()})


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""What makes a spreadsheet read a cell as a formula (OWASP's list)."""


def _cell(value: Any) -> Any:
    """A CSV cell: arguments and approvers as JSON, and a ``'`` before a cell a spreadsheet
    would take for a formula."""
    if isinstance(value, dict | list):
        value = json.dumps(value)
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def _row(record: AuditRecord, workspace: str | None) -> dict[str, Any]:
    return {
        "run_id": record.run_id or None,  # a delegation's record is of no run
        "crew": record.crew or None,
        "review_id": record.review_id or None,
        "review_kind": record.review_kind or None,
        "decided_by": record.decided_by,
        "decided_at": record.decided_at.isoformat() + "Z",
        "decision": record.decision,
        "feedback": record.feedback,
        "approved_by": record.approved_by,
        "approval_stages": record.approval_stages,
        "proposed_args": record.proposed_args,
        "approved_args": record.approved_args,
        "executed_args": record.executed_args,
        "assigned_to": record.assigned_to,
        "edit_diff": record.edit_diff,
        "digest": record.digest,
        "rule": record.rule,
        "permalink": permalink(workspace, record.channel, record.thread_ts),
        "details": record.details,
    }
