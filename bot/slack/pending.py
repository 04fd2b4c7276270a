"""Whose pending reviews a person may decide, read by an index: what ``/crew pending`` lists
and what their Home tab shows, by the review policy every click asks (``crew_runtime.policy``,
its facts fetched by ``Reviewers.facts``).

A review with an approval chain (``stages``) is listed for its current stage's reviewers
only. Which stage a review is at is in its row but which chain it follows is configuration
(or, for a review a rule raised, its own: ``Review.raised``), so the crews with a chain or
a rule naming reviewers (``chains_of``) are read apart: their pending reviews, at most
:data:`CHAIN_READ` of them, are kept where the person (or whoever away left their reviews to
them) is asked now.
"""

from __future__ import annotations

from bot.slack.authz import CheckFailed, Reviewers
from bot.slack.handlers import sync
from crew_runtime import policy
from crew_runtime.policy import Asked, Facts, Reason
from crew_runtime.reviewers import chains_of, stage_people
from crew_runtime.service import Countersign
from storage import PendingReviews

# How many pending reviews of the crews with an approval chain a person's list reads to pick
# theirs from (beyond it, the count is of those read: at least that many wait for them).
CHAIN_READ = 500


async def pending_for(
    service: Countersign, reviewers: Reviewers, user_id: str, limit: int
) -> PendingReviews:
    """The oldest pending reviews ``user_id`` may decide now, at most ``limit``, as the
    review policy says (``policy.one_of``, ``policy.decide``): the crews they review, the
    runs naming them as reviewer, and for a crew naming no reviewers the channels they are
    in; for a review with an approval chain, the stage it is at naming them; and the same
    for whoever away left their reviews to them.

    Raises:
        CheckFailed: a membership lookup failed (the one treatment: they are asked to try
            again).
    """
    away = await sync(service.store.delegates)
    people = Facts(away=away).acting(user_id)
    places: dict[str, set[str] | None] = {}
    crews = [s for s in service.config.crews.values() if not chains_of(s)]
    named = {s.name: (s.reviewers_from_input, people) for s in crews if s.reviewers_from_input}
    open_crews = {s.name for s in crews if not s.reviewers and s.name not in named}
    facts = await reviewers.facts([Asked(s.reviewers) for s in crews if s.reviewers], away)
    for spec in crews:
        if spec.reviewers and _yes(policy.one_of(user_id, [Asked(spec.reviewers)], facts)):
            places[spec.name] = None
    if open_crews:
        pairs = await sync(service.store.pending_channels, list(open_crews))
        facts = await reviewers.facts([Asked(channel=c) for _, c in pairs if c], away)
        channels: dict[str, set[str]] = {}
        for crew, channel in pairs:
            if channel and _yes(policy.one_of(user_id, [Asked(channel=channel)], facts)):
                channels.setdefault(crew, set()).add(channel)
        places.update(channels)
    found = await sync(service.store.pending_reviews, places, named=named, limit=limit)
    chained = await _chained(service, reviewers, user_id, away)
    if not chained.total:
        return found
    merged = sorted([*found.reviews, *chained.reviews], key=lambda r: (r.created_at, r.id))
    runs = {**found.runs, **chained.runs}
    shown = merged[:limit]
    return PendingReviews(
        shown, {r.run_id: runs[r.run_id] for r in shown}, found.total + chained.total
    )


async def _chained(
    service: Countersign, reviewers: Reviewers, user_id: str, away: dict[str, str]
) -> PendingReviews:
    """The pending reviews of the crews with an approval chain that ``user_id`` may decide
    now by the review policy: the chain's current stage names them, or (a review outside
    the crew's chains) the crew's rule does, as for any crew."""
    chained = [s for s in service.config.crews.values() if chains_of(s)]
    wide = [Asked(s.reviewers) for s in chained if s.reviewers]
    wide += [Asked(stage_people(s)) for s in chained]
    facts = await reviewers.facts(wide, away)
    crews = {}
    for spec in chained:
        asked = [Asked(spec.reviewers), Asked(stage_people(spec))]
        if not spec.reviewers or _yes(policy.one_of(user_id, asked, facts)):
            crews[spec.name] = spec
    if not crews:
        return PendingReviews([], {}, 0)
    read = await sync(service.store.pending_reviews, dict.fromkeys(crews), limit=CHAIN_READ)
    channels = [Asked(channel=r.channel) for r in read.runs.values() if r.channel]
    facts = await reviewers.facts([*wide, *channels], away)
    kept = []
    for review in read.reviews:
        run = read.runs[review.run_id]
        refused = policy.decide(crews[run.crew], run, review, user_id, None, facts)
        if refused is None:
            kept.append(review)
        elif refused.reason is Reason.COULD_NOT_CHECK:
            raise CheckFailed(user_id)
    return PendingReviews(kept, read.runs, len(kept))


def _yes(answer: bool | None) -> bool:
    """The policy's yes or no; a lookup that failed is no answer."""
    if answer is None:
        raise CheckFailed("a membership")
    return answer
