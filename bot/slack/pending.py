"""Whose pending reviews a person may decide, read by an index: what ``/crew pending`` lists
and what their Home tab shows, by the same rules as who may click (``bot.slack.authz``)."""

from __future__ import annotations

from bot.slack.authz import Reviewers
from bot.slack.handlers import sync
from crew_runtime.service import Countersign
from storage import PendingReviews


async def pending_for(
    service: Countersign, reviewers: Reviewers, user_id: str, limit: int
) -> PendingReviews:
    """The oldest pending reviews ``user_id`` may decide, at most ``limit``: the crews they
    review, the runs naming them as reviewer, and for a crew naming no reviewers the
    channels they are in; and the same for whoever away left their reviews to them.

    Raises:
        CheckFailed: a membership lookup failed.
    """
    people = await sync(service.acting_for, user_id)
    places: dict[str, set[str] | None] = {}
    crews = service.config.crews.values()
    named = {s.name: (s.reviewers_from_input, people) for s in crews if s.reviewers_from_input}
    open_crews = {s.name for s in crews if not s.reviewers and s.name not in named}
    for spec in crews:
        for person in people:
            if spec.reviewers and await reviewers.may_decide(person, spec.reviewers, None):
                places[spec.name] = None
                break
    if open_crews:
        channels: dict[str, set[str]] = {}
        for crew, channel in await sync(service.store.pending_channels, list(open_crews)):
            if channel and await _in_channel(reviewers, people, channel):
                channels.setdefault(crew, set()).add(channel)
        places.update(channels)
    return await sync(service.store.pending_reviews, places, named=named, limit=limit)


async def _in_channel(reviewers: Reviewers, people: tuple[str, ...], channel: str) -> bool:
    for person in people:
        if await reviewers.may_decide(person, (), channel):
            return True
    return False
