"""The one shell of the review policy (``crew_runtime.policy``): the facts it needs, from Slack.

A crew's ``reviewers`` lists Slack user ids (``U…``/``W…``) and user-group ids (``S…``); when
it is empty, anyone in the run's channel may decide; who may is the policy's to say, from the
facts :meth:`Reviewers.facts` fetches. Group and channel memberships come from the Web API and
are cached for a minute, so a burst of clicks costs one lookup. A lookup that fails is not an
answer: it is never cached, and the person is told the check could not be made (try again).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from functools import partial
from typing import Literal

from aiohttp import ClientError
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.errors import BotError
from bot.slack.links import Links
from crew_runtime.policy import Asked, Facts, needs

log = logging.getLogger(__name__)

Clock = Callable[[], float]
# Why a person named as a run's reviewer cannot be one.
NotAPerson = Literal["unknown", "deleted", "bot"]


class CheckFailed(BotError):
    """Slack did not say who is in a channel or group, so nobody can be told yes or no."""


class Reviewers:
    """Answers "may this user decide for this crew in this channel?" from Slack's data."""

    def __init__(self, client: AsyncWebClient, ttl: float = 60.0, clock: Clock = time.monotonic):
        self.client = client
        self.ttl = ttl
        self.clock = clock
        self._cache: dict[str, tuple[float, frozenset[str]]] = {}
        self._names: dict[str, tuple[float, str | None]] = {}
        self._links: Links | None = None

    async def links(self) -> Links:
        """Links into this workspace, whose URL ``auth.test`` says once.

        Raises:
            SlackApiError: ``auth.test`` failed (the next call asks again).
        """
        if self._links is None:
            found = await self.client.auth_test()
            self._links = Links(str(found["url"]))
        return self._links

    async def facts(
        self, asked: Iterable[Asked], away: Mapping[str, str], *, people: Iterable[str] = ()
    ) -> Facts:
        """What the review policy needs to answer for ``asked``: the members of the user
        groups and channels they name (cached for :attr:`ttl`; a lookup that fails is in
        ``failed``, never cached), the absences ``away`` in force, and which of ``people``
        are bots or deactivated (asked each time, as :meth:`not_a_person`; a failed lookup
        there is in ``failed`` too)."""
        groups, channels = needs(asked)
        found_groups: dict[str, frozenset[str]] = {}
        found_channels: dict[str, frozenset[str]] = {}
        failed: set[str] = set()
        for group in sorted(groups):
            try:
                found_groups[group] = await self._members(
                    f"group:{group}", partial(self._group, group)
                )
            except CheckFailed:
                failed.add(group)
        for channel in sorted(channels):
            try:
                found_channels[channel] = await self._members(
                    f"channel:{channel}", partial(self._channel, channel)
                )
            except CheckFailed:
                failed.add(channel)
        bots = set()
        for person in dict.fromkeys(people):
            try:
                # A bot, or a deactivated account; one Slack does not know is not refused
                # here (a form's users_select names only people Slack knows).
                if await self.not_a_person(person) in ("bot", "deleted"):
                    bots.add(person)
            except CheckFailed:
                failed.add(person)
        return Facts(
            groups=found_groups,
            channels=found_channels,
            failed=frozenset(failed),
            away=dict(away),
            bots=frozenset(bots),
        )

    async def name_of(self, user_id: str) -> str | None:
        """The person's name as Slack shows it (real name, else display name), kept with a
        decision for the words the model reads; None when Slack does not say, and the
        decision is made without it."""
        cached = self._names.get(user_id)
        if cached is not None and self.clock() - cached[0] < self.ttl:
            return cached[1]
        try:
            response = await self.client.users_info(user=user_id)
        except (SlackApiError, ClientError, TimeoutError) as exc:
            log.warning("the name of %s: the lookup failed: %s", user_id, _reason(exc))
            return None
        user = response.get("user") or {}
        profile = user.get("profile") or {}
        names = (profile.get("real_name"), profile.get("display_name"), user.get("name"))
        name = next((n for n in names if isinstance(n, str) and n.strip()), None)
        self._names[user_id] = (self.clock(), name)
        return name

    async def not_a_person(self, user_id: str) -> NotAPerson | None:
        """Why ``user_id`` cannot review (Slack does not know them, they were deactivated,
        it is a bot), or None when they can. Asked each time, not cached: it is asked once
        per run started, and a deactivation must count at once.

        Raises:
            CheckFailed: Slack did not answer.
        """
        try:
            response = await self.client.users_info(user=user_id)
        except (SlackApiError, ClientError, TimeoutError) as exc:
            if _reason(exc) == "user_not_found":
                return "unknown"
            log.warning("who %s is: the lookup failed: %s", user_id, _reason(exc))
            raise CheckFailed(f"user:{user_id}") from exc
        user = response.get("user") or {}
        if user.get("deleted"):
            return "deleted"
        if user.get("is_bot") or user_id == "USLACKBOT":
            return "bot"
        return None

    async def _members(
        self, key: str, fetch: Callable[[], Awaitable[frozenset[str]]]
    ) -> frozenset[str]:
        cached = self._cache.get(key)
        if cached is not None and self.clock() - cached[0] < self.ttl:
            return cached[1]
        try:
            members = await fetch()
        except (SlackApiError, ClientError, TimeoutError) as exc:
            log.warning("members of %s: the lookup failed: %s", key, _reason(exc))
            raise CheckFailed(key) from exc
        self._cache[key] = (self.clock(), members)
        return members

    async def _group(self, group_id: str) -> frozenset[str]:
        response = await self.client.usergroups_users_list(usergroup=group_id)
        return frozenset(response.get("users") or [])

    async def _channel(self, channel_id: str) -> frozenset[str]:
        members: set[str] = set()
        cursor: str | None = None
        while True:
            response = await self.client.conversations_members(
                channel=channel_id, cursor=cursor, limit=1000
            )
            members.update(response.get("members") or [])
            cursor = (response.get("response_metadata") or {}).get("next_cursor") or None
            if not cursor:
                return frozenset(members)


def _reason(exc: Exception) -> str:
    if isinstance(exc, SlackApiError):
        data = exc.response.data
        error = data.get("error") if isinstance(data, dict) else None
        return str(error or f"HTTP {exc.response.status_code}")
    return f"{type(exc).__name__}: {exc}"
