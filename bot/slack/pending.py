"""Whose pending reviews a person may decide, read by an index: what ``/crew pending`` lists
and what their Home tab shows, by the same rules as who may click (``bot.slack.authz``).

A review with an approval chain (``stages``) is listed for its current stage's reviewers
only. Which stage a review is at is in its row but which chain it follows is configuration,
so the crews with a chain are read apart: their pending reviews, at most :data:`CHAIN_READ`
of them, are kept where the person (or whoever away left their reviews to them) is asked now.
"""

from __future__ import annotations

from collections.abc import Iterable

from bot.slack.authz import Reviewers
from bot.slack.handlers import sync
from crew_runtime.reviewers import chains_of, current, stage_people, stages_of
from crew_runtime.service import Countersign
from crew_runtime.specs import CrewSpec
from storage import PendingReviews, Review, Run

# How many pending reviews of the crews with an approval chain a person's list reads to pick
# theirs from (beyond it, the count is of those read: at least that many wait for them).
CHAIN_READ = 500


async def pending_for(
    service: Countersign, reviewers: Reviewers, user_id: str, limit: int
) -> PendingReviews:
    """The oldest pending reviews ``user_id`` may decide now, at most ``limit``: the crews
    they review, the runs naming them as reviewer, and for a crew naming no reviewers the
    channels they are in; for a review with an approval chain, the stage it is at naming
    them; and the same for whoever away left their reviews to them.

    Raises:
        CheckFailed: a membership lookup failed.
    """
    people = await sync(service.acting_for, user_id)
    places: dict[str, set[str] | None] = {}
    crews = [s for s in service.config.crews.values() if not chains_of(s)]
    named = {s.name: (s.reviewers_from_input, people) for s in crews if s.reviewers_from_input}
    open_crews = {s.name for s in crews if not s.reviewers and s.name not in named}
    for spec in crews:
        if spec.reviewers and await _any_of(reviewers, people, spec.reviewers, None):
            places[spec.name] = None
    if open_crews:
        channels: dict[str, set[str]] = {}
        for crew, channel in await sync(service.store.pending_channels, list(open_crews)):
            if channel and await _any_of(reviewers, people, (), channel):
                channels.setdefault(crew, set()).add(channel)
        places.update(channels)
    found = await sync(service.store.pending_reviews, places, named=named, limit=limit)
    chained = await _chained(service, reviewers, people)
    if not chained.total:
        return found
    merged = sorted([*found.reviews, *chained.reviews], key=lambda r: (r.created_at, r.id))
    runs = {**found.runs, **chained.runs}
    shown = merged[:limit]
    return PendingReviews(
        shown, {r.run_id: runs[r.run_id] for r in shown}, found.total + chained.total
    )


async def _chained(
    service: Countersign, reviewers: Reviewers, people: tuple[str, ...]
) -> PendingReviews:
    """The pending reviews of the crews with an approval chain that one of ``people`` may
    decide now: the chain's current stage names them, or (a review outside the crew's
    chains) the crew's rule does, as for any crew."""
    crews = {}
    for spec in service.config.crews.values():
        if not chains_of(spec):
            continue
        if (
            not spec.reviewers
            or await _any_of(reviewers, people, spec.reviewers, None)
            or await _any_of(reviewers, people, stage_people(spec), None)
        ):
            crews[spec.name] = spec
    if not crews:
        return PendingReviews([], {}, 0)
    read = await sync(service.store.pending_reviews, dict.fromkeys(crews), limit=CHAIN_READ)
    kept = []
    for review in read.reviews:
        run = read.runs[review.run_id]
        if await _asked_now(reviewers, people, crews[run.crew], review, run):
            kept.append(review)
    return PendingReviews(kept, read.runs, len(kept))


async def _asked_now(
    reviewers: Reviewers, people: tuple[str, ...], spec: CrewSpec, review: Review, run: Run
) -> bool:
    chain = stages_of(spec, review)
    if chain:
        return await _any_of(reviewers, people, current(chain, review).reviewers, None)
    return await _any_of(reviewers, people, spec.reviewers_of(run.inputs), run.channel)


async def _any_of(
    reviewers: Reviewers, people: Iterable[str], named: tuple[str, ...], channel: str | None
) -> bool:
    """Whether one of ``people`` is one of ``named`` (none: in ``channel``)."""
    for person in people:
        if await reviewers.may_decide(person, named, channel):
            return True
    return False
