"""What a real workspace grants the app: the stand-in grants the scopes and sends the events
``manifest.yml`` asks for, no more (``sandbox.scopes``), and a run started in the app's DM
is decided there, by a click and by a reply, with those grants alone."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from crew_runtime.config import Config
from sandbox import StandInThread
from sandbox.scopes import Grants, read_manifest
from storage import RunStatus, Store
from tests.support.harness import ON_SQLITE
from tests.support.slack_harness import (
    ALICE,
    BOB,
    CHANNEL,
    buttons,
    new_standin,
    slack_and_bot,
    text_of,
    wait_until,
)

Json = dict[str, object]

CONFIG = """
[crews.solo]
factory = "tests.support.crews:writer"
description = "No channel, no reviewers: whoever can see the run decides"
"""

pytestmark = pytest.mark.bot_config(CONFIG)


def without(
    grants: Grants, *, scopes: frozenset[str] = frozenset(), events: frozenset[str] = frozenset()
) -> Grants:
    return Grants(grants.scopes - scopes, grants.events - events)


@pytest.fixture
def slack() -> Iterator[StandInThread]:
    with StandInThread(new_standin()) as running:
        yield running


def client(slack: StandInThread) -> WebClient:
    return WebClient(token=slack.standin.bot_token, base_url=slack.api_url)


def test_a_method_without_its_scope_is_missing_scope_as_slack_says(slack: StandInThread) -> None:
    manifest = read_manifest()
    dm = slack.standin.workspace.channel(ALICE).id
    assert client(slack).conversations_members(channel=dm)["members"]  # the manifest's grants

    slack.standin.grants = without(manifest, scopes=frozenset({"im:read"}))
    with pytest.raises(SlackApiError) as refused:
        client(slack).conversations_members(channel=dm)
    answer = refused.value.response.data
    assert isinstance(answer, dict)
    assert answer["error"] == "missing_scope"
    assert answer["needed"] == "im:read"
    assert set(answer["provided"].split(",")) == manifest.scopes - {"im:read"}
    # The scope is that of the conversation's kind: a channel needs channels:read only.
    assert client(slack).conversations_members(channel=CHANNEL)["members"]

    slack.standin.grants = without(manifest, scopes=frozenset({"chat:write"}))
    with pytest.raises(SlackApiError) as refused:
        client(slack).chat_postMessage(channel=CHANNEL, text="hello")
    assert refused.value.response["needed"] == "chat:write"
    assert slack.messages(CHANNEL) == []


def test_an_event_the_manifest_does_not_subscribe_to_is_not_sent(slack: StandInThread) -> None:
    dm = slack.standin.workspace.channel(ALICE).id
    slack.standin.grants = without(read_manifest(), events=frozenset({"message.im"}))
    posted = client(slack).chat_postMessage(channel=dm, text="a root")
    delivery = slack.reply_in_thread(ALICE, dm, posted["ts"], "lgtm")
    assert delivery.unsubscribed == "message.im"
    assert not delivery.ok and not delivery.timed_out
    # Subscribed as manifest.yml is, the same reply is sent (the DM run's test, below).
    assert "message.im" in read_manifest().events


def in_dm(slack: StandInThread, dm: str, root_ts: str, after: str = "0") -> Json:
    """The first message of the DM thread posted after ``after`` that shows buttons."""
    return wait_until(
        lambda: next(
            (m for m in slack.thread(dm, root_ts) if float(m["ts"]) > float(after) and buttons(m)),
            None,
        ),
        what=f"a review in the DM after {after}",
    )


@pytest.mark.slow
@ON_SQLITE
def test_a_run_started_in_the_apps_dm_is_decided_there(setup: tuple[Config, Store]) -> None:
    """A crew with no channel and no reviewers, started by /crew run in the app's DM: its
    thread is in the DM, and the person there decides by a click (``conversations.members``
    of a DM: ``im:read``) and by a reply (``message.im``), with only the manifest's grants."""
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        dm = slack.standin.workspace.channel(ALICE).id
        assert slack.slash_command(ALICE, dm, "/crew", "run solo topic=otters").status == 200
        root = wait_until(
            lambda: next((m for m in slack.messages(dm) if m.get("bot_id")), None),
            what="the run's root message in the DM",
        )
        first = in_dm(slack, dm, str(root["ts"]))
        slack.click_button(ALICE, dm, str(first["ts"]), "countersign:approve")
        second = in_dm(slack, dm, str(root["ts"]), after=str(first["ts"]))
        slack.reply_in_thread(ALICE, dm, str(root["ts"]), "lgtm")
        run = wait_until(
            lambda: next((r for r in store.list_runs() if r.status == RunStatus.SUCCEEDED), None),
            what="the run to succeed",
        )
        decisions = [r.decision for r in store.list_reviews(status=None) if r.decision]
        assert [(d.kind, d.decided_by) for d in decisions] == [("approve", ALICE)] * 2
        assert run.channel == dm
        refused = [c for c in slack.calls() if c.error == "missing_scope"]
        assert refused == [] and second
        assert BOB not in text_of(root)
