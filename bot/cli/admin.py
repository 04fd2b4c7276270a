"""The CLI's commands on runs, reviews, the database and the configuration.

Each handler validates everything it can before the first write (the runtime's service
does the rest, also before writing), prints its result to stdout and returns the exit
code. Errors are raised, and :func:`bot.cli.main` turns them into one ``error:`` line.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from collections.abc import Sequence
from typing import Any

from bot.cli import render
from bot.cli.context import CliError, Context
from bot.settings import mask_url
from crew_runtime import policy
from crew_runtime.config import ConfigError
from crew_runtime.policy import Facts
from crew_runtime.reviewers import stage_at, stages_of
from crew_runtime.service import Countersign, parse_decision
from crew_runtime.specs import Chain
from storage import (
    ALLOWED_DECISIONS,
    HUMAN_DECISIONS,
    CountersignError,
    DecisionKind,
    Review,
    ReviewStatus,
    RunStatus,
    ToolApprovalDetails,
)
from storage.migrate import current_revision

# The names crewai interpolates as {placeholders} in task descriptions (same rule as the
# configuration's ``inputs``): anything else could never be used by a crew.
_INPUT_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def parse_inputs(tokens: Sequence[str]) -> dict[str, str]:
    """``["topic=durable agents", "q=a=b"]`` → ``{"topic": "durable agents", "q": "a=b"}``.

    The value is everything after the first ``=`` and may be empty (``note=``); whether
    an input is required is the crew's business, checked by the runtime.

    Raises:
        CliError: a token without ``=``, an empty or invalid name, or a name given twice.
    """
    inputs: dict[str, str] = {}
    for token in tokens:
        name, eq, value = token.partition("=")
        if not eq:
            raise CliError(f"malformed input {token!r}: expected key=value, e.g. topic=otters")
        if not name:
            raise CliError(f"malformed input {token!r}: the name before '=' is empty")
        if not _INPUT_NAME_RE.fullmatch(name):
            raise CliError(
                f"malformed input {token!r}: a name is letters, digits and '_', "
                "not starting with a digit"
            )
        if name in inputs:
            raise CliError(f"input {name!r} is given twice")
        inputs[name] = value
    return inputs


def _print_json(document: Any) -> None:
    print(json.dumps(document, indent=2, ensure_ascii=False))


# --- runs ---------------------------------------------------------------------------------


def runs_start(ctx: Context) -> int:
    inputs = parse_inputs(ctx.args.inputs)
    config = ctx.config()
    by = (ctx.args.by or "").strip() or ctx.settings.default_user
    spec = config.get(ctx.args.crew)  # an unknown crew is reported before the database is opened
    run = ctx.service(config).start_run(ctx.args.crew, inputs, started_by=by)
    print(run.id)
    nobody = policy.start_refusal(spec, inputs, run.channel)
    if nobody is not None:  # the operator's door: decided here, where Slack could not
        print(
            f"note: nobody in Slack could decide its reviews ({nobody.configure}); "
            "decide them with countersign reviews decide",
            file=sys.stderr,
        )
    return 0


def runs_list(ctx: Context) -> int:
    args = ctx.args
    store = ctx.store()
    status = RunStatus(args.status) if args.status else None
    runs = store.list_runs(status=status, crew=args.crew, limit=args.limit)
    if args.json:
        _print_json(
            [render.run_json(run, store.list_reviews(status=None, run_id=run.id)) for run in runs]
        )
        return 0
    if not runs:
        print("no runs")
        return 0
    pending = Counter(review.run_id for review in store.list_reviews())
    print(render.runs_table(runs, dict(pending)))
    return 0


def runs_show(ctx: Context) -> int:
    store = ctx.store()
    run = store.get_run(ctx.args.run_id)
    reviews = store.list_reviews(status=None, run_id=run.id)
    if ctx.args.json:
        _print_json(render.run_json(run, reviews))
    else:
        print(render.run_block(run, reviews, store.standing_approvals(run.id)))
    return 0


def runs_cancel(ctx: Context) -> int:
    by = (ctx.args.by or "").strip() or ctx.settings.default_user
    run = ctx.service().cancel(ctx.args.run_id, by=by)
    print(f"{run.id}: {run.status.value} by {by}")
    return 0


def runs_revise(ctx: Context) -> int:
    """Reopen an approved task (numbered from 1, as people count) with new feedback."""
    args = ctx.args
    feedback: str = sys.stdin.read() if args.feedback == "-" else args.feedback
    by = (args.by or "").strip() or ctx.settings.default_user
    review = ctx.service().revise(args.run_id, args.task - 1, feedback, by=by)
    print(f"{review.run_id}: task {args.task} reopened by {by}; later tasks will run again")
    return 0


# --- reviews ------------------------------------------------------------------------------


def reviews_list(ctx: Context) -> int:
    args = ctx.args
    store = ctx.store()
    if args.run is not None:
        store.get_run(args.run)  # an unknown id is an error, not an empty list
    status = None if args.all else ReviewStatus.PENDING
    reviews = store.list_reviews(status=status, run_id=args.run)
    if args.json:
        _print_json([render.review_json(review) for review in reviews])
    elif not reviews:
        print("no reviews" if args.all else "no pending reviews")
    else:
        print(render.reviews_table(reviews))
    return 0


def reviews_show(ctx: Context) -> int:
    store = ctx.store()
    review = store.get_review(ctx.args.review_id)
    if ctx.args.json:
        _print_json(render.review_json(review))
        return 0
    run = store.get_run(review.run_id)
    print(render.review_block(review, run, _chain(ctx, run.crew, review)))
    return 0


def _chain(ctx: Context, crew: str, review: Review) -> Chain:
    """The approval chain ``review`` follows, where the configuration can be read (``reviews
    show`` needs none: without it, the stage is not shown)."""
    try:
        spec = ctx.config().crews.get(crew)
    except ConfigError:
        return ()
    return () if spec is None else stages_of(spec, review)


def reviews_decide(ctx: Context) -> int:
    """One review decided (its line, and a standing approval's), or several approved or
    rejected (``REVIEW_ID…``, ``--all-pending``): each its own decision by the one path,
    one line each, in order; exit 2 if any was refused."""
    args = ctx.args
    picks, kind, text = _decide_words(args.words)
    if text == "-":
        text = sys.stdin.read()
    service = ctx.service(ctx.config())  # the crew's review rules: quorum, self-approval
    if args.crew is not None and not args.all_pending:
        raise CliError("--crew chooses among --all-pending")
    if len(picks) == 1 and not args.all_pending:
        review_id, digest = picks[0]
        if digest is not None and args.digest is not None:
            raise CliError(f"{review_id}'s digest is given twice (@ and --digest)")
        return _decide_one(ctx, service, review_id, kind, text, digest or args.digest)
    if kind not in BATCH_DECISIONS:
        raise CliError("several reviews are approved or rejected together; decide others alone")
    if args.digest is not None or args.standing or args.outcome is not None:
        raise CliError("with several reviews give each its digest as REVIEW_ID@DIGEST, alone")
    if args.all_pending:
        mine = _pending_for(service, args.by, kind, args.crew)
        known = {review_id for review_id, _ in picks}
        picks += [(r.id, None) for r in mine if r.id not in known]
    if not picks:
        print(f"no pending reviews {args.by} may {kind.value}")
        return 0
    failed = 0
    for review_id, digest in picks:
        try:
            review = service.decide(review_id, kind, text, by=args.by, expected_digest=digest)
        except CountersignError as exc:
            failed += 1
            print(f"{review_id}: error: {render.error_words(exc)}")
        else:
            print(_decided_line(ctx, service, review))
    return 2 if failed else 0


BATCH_DECISIONS = (DecisionKind.APPROVE, DecisionKind.REJECT)


def _decide_words(
    words: Sequence[str],
) -> tuple[list[tuple[str, str | None]], DecisionKind, str | None]:
    """``REVIEW_ID[@DIGEST]… DECISION [TEXT]`` read: the reviews (each with the digest its
    decider was shown, if given), the decision and its text. A review id is never a
    decision's word, so the first word that is one ends the ids."""
    at = next((i for i, w in enumerate(words) if w.strip().lower() in _DECISION_WORDS), None)
    if at is None and len(words) > 1:
        parse_decision(words[1])  # not one: says so, and which are
    if at is None or len(words) > at + 2:
        raise CliError("expected REVIEW_ID... DECISION [TEXT]: the decision, then at most its text")
    picks = []
    for word in words[:at]:
        review_id, mark, digest = word.partition("@")
        if not review_id or (mark and not digest):
            raise CliError(f"malformed review {word!r}: expected REVIEW_ID or REVIEW_ID@DIGEST")
        picks.append((review_id, digest or None))
    return picks, parse_decision(words[at]), words[at + 1] if len(words) > at + 1 else None


_DECISION_WORDS = frozenset(k.value for k in HUMAN_DECISIONS)


def _pending_for(
    service: Countersign, by: str, kind: DecisionKind, crew: str | None
) -> list[Review]:
    """The pending reviews ``by`` may ``kind`` now by the review policy (as the operator's
    door asks it), oldest first; only ``crew``'s if given."""
    store = service.store
    if crew is not None and crew not in service.config.crews:
        raise CliError(f"unknown crew {crew!r}")
    facts = Facts(away=store.delegates(), vouched=True)
    mine = []
    for review in store.list_reviews(status=ReviewStatus.PENDING):
        run = store.get_run(review.run_id)
        if crew is not None and run.crew != crew:
            continue
        if kind not in ALLOWED_DECISIONS[review.kind]:
            continue
        spec = service.config.crews.get(run.crew)
        if policy.decide(spec, run, review, by.strip(), kind, facts) is None:
            mine.append(review)
    return mine


def _decide_one(
    ctx: Context,
    service: Countersign,
    review_id: str,
    kind: DecisionKind,
    text: str | None,
    digest: str | None,
) -> int:
    args = ctx.args
    if kind is DecisionKind.EDIT and text is not None:
        text = _over_proposed(service.store.get_review(review_id), text)
    review = service.decide(
        review_id,
        kind,
        text,
        by=args.by,
        standing=args.standing,
        outcome=args.outcome,
        expected_digest=digest,
    )
    print(_decided_line(ctx, service, review))
    for standing in service.store.standing_approvals(review.run_id):
        if standing.review_id == review.id:
            print(f"{standing.id}: approves {render.standing_calls(standing)}")
    return 0


def _decided_line(ctx: Context, service: Countersign, review: Review) -> str:
    """``rev_…: approve by alice; run run_… is queued`` (or how far its approvals are)."""
    run = service.store.get_run(review.run_id)
    decision = review.decision
    how = f"{decision.kind.value} by {decision.decided_by}" if decision else review.status.value
    chain = _chain(ctx, run.crew, review)
    if decision is None and chain:
        how = _counted_at_stage(chain, review)
    elif decision is None and review.approvals:
        given = ", ".join(a.decided_by for a in review.approvals)
        required = service.approvals_required(review)
        how = f"approval counted, {len(review.approvals)} of {required} ({given})"
    return f"{review.id}: {how}; run {run.id} is {run.status.value}"


def _counted_at_stage(chain: Chain, review: Review) -> str:
    """``approval counted, legal stage passed (lea); stage 2 of 2, manager: …``, or
    ``approval counted at stage 1 of 2, legal: 1 of 2 (lea)``."""
    index = stage_at(chain, review)
    if index > 0 and not review.approvals_at(chain[index].name):
        passed = chain[index - 1]
        given = ", ".join(a.decided_by for a in review.approvals_at(passed.name))
        return (
            f"approval counted, {passed.name} stage passed ({given}); "
            f"stage {render.stage_line(chain, review)}"
        )
    stage = chain[index]
    given = ", ".join(a.decided_by for a in review.approvals_at(stage.name))
    return (
        f"approval counted at stage {index + 1} of {len(chain)}, {stage.name}: "
        f"{len(review.approvals_at(stage.name))} of {stage.approvals_required} ({given})"
    )


def reviews_revoke(ctx: Context) -> int:
    args = ctx.args
    standing = ctx.service(ctx.config()).revoke_standing(args.standing_id, by=args.by)
    print(f"{standing.id}: revoked by {standing.revoked_by}; {standing.tool} is reviewed again")
    return 0


def reviews_claim(ctx: Context) -> int:
    review = ctx.service(ctx.config()).claim(ctx.args.review_id, by=ctx.args.by)
    print(f"{review.id}: claimed by {review.claimed_by}")
    return 0


def reviews_reassign(ctx: Context) -> int:
    args = ctx.args
    review = ctx.service(ctx.config()).claim(args.review_id, by=args.by, to=args.to)
    print(f"{review.id}: reassigned to {review.claimed_by} by {args.by}")
    return 0


def _over_proposed(review: Review, text: str) -> str:
    """On the command line a tool call's edit names only the arguments it changes.

    (The Slack modal sends every field, and leaves out an optional one the reviewer
    emptied, so the service itself does not merge.) Anything but a JSON object is left
    for the service to refuse with its own message.
    """
    details = review.details
    if not isinstance(details, ToolApprovalDetails) or details.args is None:
        return text
    try:
        edited = json.loads(text)
    except json.JSONDecodeError:
        return text
    if not isinstance(edited, dict):
        return text
    return json.dumps({**details.args, **edited}, ensure_ascii=False)


# --- reviewers away -------------------------------------------------------------------------


def reviewers_away(ctx: Context) -> int:
    """While someone is away, their reviews go to a delegate (``Countersign.away``)."""
    args = ctx.args
    by = (args.by or "").strip() or args.person
    made = ctx.service().away(args.person, args.to, args.until, by=by)
    print(f"{made.person} is away until {render.iso(made.until)}: reviews go to {made.delegate}")
    return 0


def reviewers_back(ctx: Context) -> int:
    args = ctx.args
    by = (args.by or "").strip() or args.person
    ended = ctx.service().back(args.person, by=by)
    if ended is None:
        print(f"{args.person} was not away")
    else:
        print(f"{ended.person} is back: reviews no longer go to {ended.delegate}")
    return 0


def reviewers_list(ctx: Context) -> int:
    away = ctx.store().active_delegations()
    if ctx.args.json:
        _print_json([render.delegation_json(d) for d in away])
    elif not away:
        print("nobody is away")
    else:
        for d in away:
            print(f"{d.person} away until {render.iso(d.until)}: reviews go to {d.delegate}")
    return 0


# --- database and configuration -----------------------------------------------------------


def db_upgrade(ctx: Context) -> int:
    store = ctx.store(upgrade=False)  # opens no connection yet: the first one is here
    try:
        before = current_revision(store.engine)
        store.upgrade()
        after = current_revision(store.engine)
    except Exception as exc:  # any driver error: one line, as for every other command
        raise ctx.unavailable(exc) from exc
    note = "already up to date" if before == after else f"upgraded from {before or 'empty'}"
    print(f"{mask_url(ctx.database_url)}: {note}", file=sys.stderr)
    print(after)
    return 0


def crews_list(ctx: Context) -> int:
    specs = sorted(ctx.config().crews.values(), key=lambda spec: spec.name)
    print(render.crews_table(specs) if specs else "no crews configured")
    return 0


def rules_test(ctx: Context) -> int:
    """``countersign rules test CREW --tool pay --args '{"amount": 250}'``: the rule that
    would decide the call, what it would do and what matched; or that a person reviews it."""
    spec = ctx.config().get(ctx.args.crew)
    args = _json_object(ctx.args.args, "--args")
    inputs = _json_object(ctx.args.inputs, "--inputs")
    if not all(isinstance(value, str) for value in inputs.values()):
        raise CliError("--inputs: a run's inputs are strings")
    run = {"id": "", "crew": spec.name, "started_by": ctx.args.by}
    match = spec.rules.match(ctx.args.tool, args, inputs=inputs, run=run)
    print(render.rule_match(ctx.args.tool, match))
    return 0


def _json_object(text: str, flag: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise CliError(f"{flag}: not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise CliError(f"{flag}: expected a JSON object like '{{\"amount\": 250}}'")
    return value
