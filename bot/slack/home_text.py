"""The words of the app's Home tab (``bot.slack.home_blocks``): a person's pending reviews,
their runs still going, their last decisions. Text from the configuration is escaped.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from bot.slack.block_text import REVIEW_NOUN, decision_line, run_status
from bot.slack.mrkdwn import (
    escape,
    slack_ago,
    slack_date,
)
from storage.records import Decision
from storage.status import ReviewKind, RunStatus

HOME_PENDING_TITLE = "Waiting for you"
HOME_RUNS_TITLE = "Your runs still going"
HOME_DECISIONS_TITLE = "Your last decisions"
HOME_NOTHING_PENDING = (
    "Nothing is waiting for your decision. :tada: When a crew needs you, it shows up here."
)
HOME_NO_RUNS = "No run you started is going. Start one with `/crew run NAME`."
HOME_NO_DECISIONS = "You have not decided anything yet."
HOME_OPEN = "open the thread"
HOME_CHECK_FAILED = (
    "Slack did not say which channels or groups you are in, so your pending reviews are not "
    "shown; `/crew pending` lists them."
)


def home_pending_count(count: int) -> str:
    return f"{count} review{'s' if count != 1 else ''} waiting for you"


def home_more(count: int) -> str:
    return f"…and {count} more: `/crew pending` lists them."


def home_waiting(crew: str, kind: ReviewKind, since: datetime) -> str:
    """``*crew* · a task review · waiting since 3 hours ago``."""
    return f"*{escape(crew)}* · {REVIEW_NOUN[kind]} · waiting since {slack_ago(since)}"


def home_run(
    crew: str, status: RunStatus, started: datetime, waiting_on: Collection[ReviewKind] = ()
) -> str:
    """A run still going, its status in the words of its own messages (a run waiting for a
    tool call's approval is "Waiting for approval" here too)."""
    return f"*{escape(crew)}* · {run_status(status, waiting_on)} · started {slack_date(started)}"


def home_decision(crew: str, decision: Decision) -> str:
    return f"*{escape(crew)}* · {decision_line(decision)} · {slack_date(decision.created_at)}"
