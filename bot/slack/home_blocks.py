"""The app's Home tab, as a ``home`` view: a person's pending reviews (oldest first), their
runs still going, their last decisions; each with a link to its run's thread.

A Home view holds 100 blocks at most; the lists are capped well under that (20 + 10 + 10
sections, three headers, dividers and a "…and N more"), and every text from a person or a
model is escaped and cut.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.slack import home_text as t
from bot.slack.elements import Block, context, section
from bot.slack.message import header
from bot.slack.mrkdwn import link, truncate
from storage import PendingReviews, Review, Run

PENDING_SHOWN = 20  # pending reviews listed; the rest are counted
RUNS_SHOWN = 10
DECISIONS_SHOWN = 10
PROMPT_SHOWN = 150  # chars of a review's prompt under its line


@dataclass(frozen=True)
class Links:
    """Links into the workspace, built as Slack builds permalinks (no call per message):
    ``{workspace URL}archives/{channel}/p{ts without the dot}``, and for a thread reply
    ``?thread_ts=…&cid=…``. ``workspace`` is ``auth.test``'s ``url``."""

    workspace: str

    def run(self, run: Run) -> str | None:
        if run.channel is None or run.thread_ts is None:
            return None
        return self._message(run.channel, run.thread_ts)

    def review(self, review: Review, run: Run | None) -> str | None:
        """The review's message in its run's thread; the thread when it is not posted yet."""
        if review.channel is not None and review.message_ts is not None:
            url = self._message(review.channel, review.message_ts)
            if run is not None and run.thread_ts not in (None, review.message_ts):
                url += f"?thread_ts={run.thread_ts}&cid={review.channel}"
            return url
        return None if run is None else self.run(run)

    def _message(self, channel: str, ts: str) -> str:
        base = self.workspace if self.workspace.endswith("/") else self.workspace + "/"
        return f"{base}archives/{channel}/p{ts.replace('.', '')}"


def home_view(
    pending: PendingReviews | None,
    going: list[Run],
    decided: list[Review],
    runs: dict[str, Run],
    links: Links,
) -> dict[str, Any]:
    """The Home view of one person. ``pending`` None: who may decide could not be checked
    (a Slack lookup failed); ``runs``: the runs of ``decided``."""
    blocks: list[Block] = [header(t.HOME_PENDING_TITLE)]
    blocks += _pending(pending, links)
    blocks += [{"type": "divider"}, header(t.HOME_RUNS_TITLE)]
    blocks += [_line(t.home_run(r.crew, r.status, r.created_at), links.run(r)) for r in going]
    if not going:
        blocks.append(section(t.HOME_NO_RUNS))
    blocks += [{"type": "divider"}, header(t.HOME_DECISIONS_TITLE)]
    for review in decided:
        run = runs.get(review.run_id)
        if review.decision is not None and run is not None:
            line = t.home_decision(run.crew, review.decision)
            blocks.append(_line(line, links.review(review, run), review.prompt))
    if not decided:
        blocks.append(section(t.HOME_NO_DECISIONS))
    return {"type": "home", "blocks": blocks}


def _pending(pending: PendingReviews | None, links: Links) -> list[Block]:
    if pending is None:
        return [section(t.HOME_CHECK_FAILED)]
    if not pending.total:
        return [section(t.HOME_NOTHING_PENDING)]
    shown = sorted(pending.reviews, key=lambda r: (r.created_at, r.id))[:PENDING_SHOWN]
    blocks: list[Block] = [context(t.home_pending_count(pending.total))]
    for review in shown:
        run = pending.runs.get(review.run_id)
        line = t.home_waiting(run.crew if run else "", review.kind, review.created_at)
        blocks.append(_line(line, links.review(review, run), review.prompt))
    if pending.total > len(shown):
        blocks.append(context(t.home_more(pending.total - len(shown))))
    return blocks


def _line(line: str, url: str | None, prompt: str | None = None) -> Block:
    """One item: its line, the link to its thread, and a quote of its prompt (escaped)."""
    if url is not None:
        line += " · " + link(url, t.HOME_OPEN)
    if prompt:
        line += "\n>" + truncate(" ".join(prompt.split()), PROMPT_SHOWN)
    return section(line)
