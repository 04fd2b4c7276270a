"""Runs and reviews as the CLI shows them: JSON documents (``bot.documents``, shared with the
HTTP API), plain-text tables and blocks.

Pure functions from storage records to strings or JSON-ready dicts, so the shapes are
tested without a database and the CLI's commands stay a few lines each.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from bot.documents import delegation_json, iso, review_json, run_json
from crew_runtime.config import CrewSpec
from crew_runtime.reviewers import stage_at
from crew_runtime.rules import Match
from crew_runtime.specs import Chain
from storage import AlreadyDecided, CountersignError, Review, ReviewStatus, Run, StandingApproval

__all__ = [
    "crews_table",
    "delegation_json",
    "iso",
    "review_block",
    "review_json",
    "reviews_table",
    "run_block",
    "run_json",
    "runs_table",
    "table",
]

# Prompts and drafts can be pages long; a table row shows the start of the first line.
_CELL_WIDTH = 60


# --- tables -------------------------------------------------------------------------------


def table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """Left-aligned columns separated by two spaces, without trailing blanks."""
    body = [list(headers), *([cell for cell in row] for row in rows)]
    widths = [max(len(line[i]) for line in body) for i in range(len(headers))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in body
    )


def runs_table(runs: Iterable[Run], pending: dict[str, int]) -> str:
    """One line per run; ``pending`` counts each run's pending reviews."""
    return table(
        ["ID", "CREW", "STATUS", "PENDING", "CREATED", "STARTED BY"],
        (
            [
                run.id,
                run.crew,
                run.status.value,
                str(pending.get(run.id, 0)),
                iso(run.created_at) or "",
                run.started_by or "",
            ]
            for run in runs
        ),
    )


def reviews_table(reviews: Iterable[Review]) -> str:
    return table(
        ["ID", "RUN", "KIND", "STATUS", "CREATED", "PROMPT"],
        (
            [
                review.id,
                review.run_id,
                review.kind.value,
                review.status.value,
                iso(review.created_at) or "",
                _excerpt(review.prompt),
            ]
            for review in reviews
        ),
    )


def crews_table(specs: Iterable[CrewSpec]) -> str:
    return table(
        ["NAME", "KIND", "INPUTS", "DESCRIPTION"],
        (
            [spec.name, spec.kind, ",".join(spec.required_inputs), spec.description]
            for spec in specs
        ),
    )


# --- blocks -------------------------------------------------------------------------------


def run_block(
    run: Run, reviews: Sequence[Review], standing: Sequence[StandingApproval] = ()
) -> str:
    """The run, its inputs and outcome, then each review with its decision, then its
    standing approvals."""
    lines = [
        f"run      {run.id}",
        f"crew     {run.crew}",
        f"status   {run.status.value}",
        f"started  {iso(run.created_at)}" + (f" by {run.started_by}" if run.started_by else ""),
        f"updated  {iso(run.updated_at)}",
        "inputs   " + (" ".join(f"{k}={v}" for k, v in run.inputs.items()) or "(none)"),
    ]
    if run.output is not None:
        lines += _field("output", run.output, 0)
    if run.error is not None:
        lines += _field("error", run.error, 0)
    if run.divergence is not None:
        lines += _field("diverged", run.divergence, 0)
    lines.append("")
    lines.append(f"reviews ({len(reviews)})" if reviews else "reviews  (none)")
    for review in reviews:
        lines.append("")
        lines += _review_lines(review, indent=2)
    if standing:
        lines += ["", f"standing approvals ({len(standing)})"]
    for given in standing:
        lines.append(
            f"  {given.id}  {standing_calls(given)}, by {given.granted_by} "
            f"at {iso(given.created_at)}"
            + (
                f"; revoked by {given.revoked_by} at {iso(given.revoked_at)}"
                if given.revoked_by
                else ""
            )
        )
    return "\n".join(lines)


def standing_calls(standing: StandingApproval) -> str:
    """The calls a standing approval approves: ``later calls of pay with to="ACME"``."""
    values = ", ".join(
        f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in standing.match.items()
    )
    return f"later calls of {standing.tool}" + (f" with {values}" if values else "")


def review_block(review: Review, run: Run, chain: Chain = ()) -> str:
    """A review, with where its approval chain (``chain``: its rule's stages) stands."""
    lines = [f"run      {run.id} ({run.crew}, {run.status.value})", *_review_lines(review)]
    if chain and review.status == ReviewStatus.PENDING:
        lines.append(f"stage    {stage_line(chain, review)}")
    return "\n".join(lines)


def stage_line(chain: Chain, review: Review) -> str:
    """``2 of 2, manager: U0MAX or U0MIA (1 of 1 approvals needed)``."""
    index = stage_at(chain, review)
    stage = chain[index]
    return (
        f"{index + 1} of {len(chain)}, {stage.name}: {' or '.join(stage.reviewers)} "
        f"({stage.approvals_required} approval{'s' if stage.approvals_required > 1 else ''} "
        "needed)"
    )


def _review_lines(review: Review, indent: int = 0) -> list[str]:
    pad = " " * indent
    lines = [
        f"{pad}review   {review.id}",
        f"{pad}kind     {review.kind.value}",
        f"{pad}status   {review.status.value}",
        f"{pad}opened   {iso(review.created_at)}",
    ]
    lines += _field("prompt", review.prompt, indent)
    lines += [
        f"{pad}approval {a.decided_by} at {iso(a.created_at)}"
        + ("" if a.stage is None else f" ({a.stage})")
        for a in review.approvals
    ]
    if review.claimed_by is not None:
        lines.append(f"{pad}claimed  by {review.claimed_by} at {iso(review.claimed_at)}")
    decision = review.decision
    if decision is not None:
        lines.append(
            f"{pad}decided  {decision.kind.value} by {decision.decided_by} "
            f"at {iso(decision.created_at)}"
        )
        if decision.text is not None:
            lines += _field("text", decision.text, indent)
        if decision.original is not None:
            lines += _field("original", decision.original, indent)
    elif review.status != ReviewStatus.PENDING:
        lines.append(f"{pad}closed   {iso(review.decided_at) or '-'} (no decision)")
    return lines


def _field(label: str, text: str, indent: int) -> list[str]:
    """A labelled value; multi-line text continues under the value, not under the label."""
    pad = " " * indent
    first, *rest = text.splitlines() or [""]
    return [f"{pad}{label:<8} {first}", *(f"{pad}{'':<8} {line}".rstrip() for line in rest)]


def _excerpt(text: str) -> str:
    first = text.strip().splitlines()[0] if text.strip() else ""
    more = len(first) > _CELL_WIDTH or "\n" in text.strip()
    return first[: _CELL_WIDTH - 1] + "…" if more else first


def rule_match(tool: str, match: Match | None) -> str:
    """What ``rules test`` says: ``rule small-payments: approve (amount 42 < 100)``; where no
    rule applies, that a person reviews the call as its gate says."""
    if match is None:
        return f"no rule matches: a person reviews this {tool} call as its gate says"
    rule = match.rule
    if rule.decide == "approve":
        does = "approve: the call runs, nobody is asked"
    elif rule.decide == "reject":
        does = f"reject: the call does not run; the model is told {rule.reason!r}"
    else:
        raised = []
        if rule.approvals is not None:
            raised.append(f"{rule.approvals} approvals")
        if rule.expire_after is not None:
            raised.append(f"expires after {rule.expire_after}")
        if rule.reviewers:
            raised.append(f"reviewers {', '.join(rule.reviewers)} (in the gate's place)")
        if rule.stages:
            chain = " then ".join(
                f"{s.name} ({', '.join(s.reviewers)}; {s.approvals_required} "
                f"{'approval' if s.approvals_required == 1 else 'approvals'})"
                for s in rule.stages
            )
            raised.append(f"stages {chain} (in the gate's place)")
        does = "a person reviews it, with " + ", ".join(raised)
    return f"rule {rule.name} ({rule.key}) matches: {match.why}\n{does}"


def error_words(exc: CountersignError) -> str:
    """What an ``error:`` line says of ``exc`` (a decision recorded already: and when)."""
    if isinstance(exc, AlreadyDecided) and exc.at:
        return f"{exc} at {iso(exc.at)}"
    return str(exc)
