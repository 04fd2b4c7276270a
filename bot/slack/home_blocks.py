"""The app's Home tab, as a ``home`` view: a person's pending reviews (oldest first), their
runs still going, their last decisions; each with a link to its run's thread.

A Home view holds 100 blocks at most; the lists are capped well under that (20 + 10 + 10
sections, three headers, dividers and a "…and N more"), and every text from a person or a
model is escaped and cut.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.slack import home_text as t
from bot.slack.batch_blocks import batch_button
from bot.slack.block_text import action_digest
from bot.slack.elements import Block, args_line, context, ran_args, section
from bot.slack.links import Links
from bot.slack.message import header
from bot.slack.mrkdwn import link, truncate
from storage import PendingReviews, Review, ReviewKind, Run

PENDING_SHOWN = 20  # pending reviews listed; the rest are counted
RUNS_SHOWN = 10
DECISIONS_SHOWN = 10
PROMPT_SHOWN = 150  # chars of a review's prompt under its line


def home_view(
    pending: PendingReviews | None,
    going: list[Run],
    decided: list[Review],
    runs: dict[str, Run],
    links: Links,
    waiting_on: Mapping[str, list[ReviewKind]] | None = None,
) -> dict[str, Any]:
    """The Home view of one person. ``pending`` None: who may decide could not be checked
    (a Slack lookup failed); ``runs``: the runs of ``decided``; ``waiting_on``: the kinds of
    the pending reviews of the runs ``going`` that wait (what each waits for)."""
    waits = waiting_on or {}
    blocks: list[Block] = [header(t.HOME_PENDING_TITLE)]
    blocks += _pending(pending, links)
    blocks += [{"type": "divider"}, header(t.HOME_RUNS_TITLE)]
    blocks += [
        _line(t.home_run(r.crew, r.status, r.created_at, waits.get(r.id, ())), links.run(r))
        for r in going
    ]
    if not going:
        blocks.append(section(t.HOME_NO_RUNS))
    blocks += [{"type": "divider"}, header(t.HOME_DECISIONS_TITLE)]
    for review in decided:
        run = runs.get(review.run_id)
        if review.decision is not None and run is not None:
            line = t.home_decision(run.crew, review.decision)
            blocks.append(_line(line, links.review(review, run), _preview(review)))
    if not decided:
        blocks.append(section(t.HOME_NO_DECISIONS))
    return {"type": "home", "blocks": blocks}


def _pending(pending: PendingReviews | None, links: Links) -> list[Block]:
    if pending is None:
        return [section(t.HOME_CHECK_FAILED)]
    if not pending.total:
        return [section(t.HOME_NOTHING_PENDING)]
    shown = sorted(pending.reviews, key=lambda r: (r.created_at, r.id))[:PENDING_SHOWN]
    blocks: list[Block] = [context(t.home_pending_count(pending.total)), batch_button(shown)]
    for review in shown:
        run = pending.runs.get(review.run_id)
        line = t.home_waiting(run.crew if run else "", review.kind, review.created_at)
        if review.digest:
            line += " · " + action_digest(review.digest)
        blocks.append(_line(line, links.review(review, run), _preview(review)))
    if pending.total > len(shown):
        blocks.append(context(t.home_more(pending.total - len(shown))))
    return blocks


def _preview(review: Review) -> str:
    """The start of what a review is about: a tool call's arguments as it runs (a reviewer's
    edit once decided), on one line, not its JSON; else the draft or question."""
    args = ran_args(review)
    return args_line(args) if args else review.prompt


def _line(line: str, url: str | None, prompt: str | None = None) -> Block:
    """One item: its line, the link to its thread, and a quote of its prompt (escaped)."""
    if url is not None:
        line += " · " + link(url, t.HOME_OPEN)
    if prompt:
        line += "\n>" + truncate(" ".join(prompt.split()), PROMPT_SHOWN)
    return section(line)
