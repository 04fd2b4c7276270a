"""The stand-in's ``state_file``: the workspace written after each change and read back by a
new stand-in, as the offline demo restarts; a file it cannot read is moved aside, not fatal.

Each stand-in is driven through slack_sdk over a real socket, as the bot drives it.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from sandbox_helpers import ALICE, BOB, CHANNEL, new_standin, running
from slack_sdk.web.async_client import AsyncWebClient

from sandbox import SlackStandIn

Json = dict[str, Any]
Scenario = Callable[[SlackStandIn, AsyncWebClient], Awaitable[None]]
TITLE = {"type": "plain_text", "text": "Feedback"}
MODAL = {"type": "modal", "title": TITLE, "blocks": [{"type": "section", "text": TITLE}]}


def run(standin: SlackStandIn, scenario: Scenario) -> None:
    async def main() -> None:
        async with running(standin) as slack:
            web = AsyncWebClient(token=slack.bot_token, base_url=slack.api_url, timeout=5)
            await asyncio.wait_for(scenario(slack, web), 20)

    asyncio.run(main())


def fixed_clock(now: float) -> Callable[[], float]:
    return lambda: now


def test_a_restored_workspace_has_the_threads_ephemerals_views_and_files(tmp_path: Path) -> None:
    state_file = tmp_path / "sandbox.json"
    before = new_standin(state_file=state_file)
    assert not before.restored
    seen: dict[str, str] = {}

    async def scenario(slack: SlackStandIn, web: AsyncWebClient) -> None:
        root = await web.chat_postMessage(channel=CHANNEL, text="Run r1")
        seen["root"] = root["ts"]
        # Written after the change, not only at stop: a crash keeps what was there.
        assert root["ts"] in state_file.read_text()
        reply = await web.chat_postMessage(channel=CHANNEL, thread_ts=root["ts"], text="v1")
        await web.chat_update(channel=CHANNEL, ts=reply["ts"], text="v1, edited")
        where = slack.workspace.channel(CHANNEL)  # a person's reply; no bot here to deliver to
        slack.workspace.post(where, ALICE, {"text": "looks good"}, thread_ts=root["ts"])
        await web.chat_postEphemeral(channel=CHANNEL, user=BOB, text="only bob")
        await web.files_upload_v2(
            channel=CHANNEL, thread_ts=root["ts"], content="# Draft", filename="draft.md"
        )
        opened = await web.views_open(trigger_id=slack.workspace.issue_trigger(ALICE), view=MODAL)
        seen["view"] = opened["view"]["id"]

    run(before, scenario)
    assert not state_file.with_name("sandbox.json.tmp").exists()

    after = new_standin(state_file=state_file)  # seeding again changes nothing

    assert after.restored
    assert json.loads(after.workspace.to_json()) == json.loads(before.workspace.to_json())
    thread = after.thread(CHANNEL, seen["root"])
    assert [m["text"] for m in thread] == ["Run r1", "v1, edited", "looks good", ""]
    assert thread[0]["reply_count"] == 3 and thread[0]["reply_users"] == ["UALICE", "UBOT"]
    assert [(e.user, e.text) for e in after.ephemerals(BOB)] == [(BOB, "only bob")]
    assert [v["id"] for v in after.open_views(ALICE)] == [seen["view"]]
    [stored] = after.files()
    assert (stored.content, stored.shared_in) == (b"# Draft", [(CHANNEL, thread[-1]["ts"])])


def test_a_restored_workspace_hands_out_no_ts_or_id_twice(tmp_path: Path) -> None:
    state_file = tmp_path / "sandbox.json"
    first: dict[str, list[str]] = {"ts": [], "ids": []}
    later: dict[str, list[str]] = {"ts": [], "ids": []}

    def scenario(into: dict[str, list[str]]) -> Scenario:
        async def act(slack: SlackStandIn, web: AsyncWebClient) -> None:
            for text in ("one", "two"):
                into["ts"].append((await web.chat_postMessage(channel=CHANNEL, text=text))["ts"])
            trigger = slack.workspace.issue_trigger(ALICE)
            into["ids"].append((await web.views_open(trigger_id=trigger, view=MODAL))["view"]["id"])
            upload = await web.files_getUploadURLExternal(filename="a.md", length=1)
            into["ids"].append(upload["file_id"])

        return act

    # The second process's clock is behind the first's, as after a clock adjustment.
    run(new_standin(state_file=state_file, clock=fixed_clock(1_800_000_000.0)), scenario(first))
    restored = new_standin(state_file=state_file, clock=fixed_clock(1_700_000_000.0))
    run(restored, scenario(later))

    assert restored.restored
    assert min(map(float, later["ts"])) > max(map(float, first["ts"]))
    assert not set(later["ids"]) & set(first["ids"])
    assert len(restored.messages(CHANNEL)) == 4


def _unreadable_states() -> dict[str, Callable[[Json], Json]]:
    def version(state: Json) -> Json:
        return {**state, "version": 99}

    def other_bot(state: Json) -> Json:
        return {**state, "bot_user_id": "UOTHER"}

    def message_without_ts(state: Json) -> Json:
        return {**state, "messages": {CHANNEL: [{"text": "no ts"}]}}

    def unknown_user_field(state: Json) -> Json:
        return {**state, "users": [{**state["users"][0], "shoe_size": 43}]}

    def bad_file_content(state: Json) -> Json:
        file = {"id": "F1", "filename": "a", "length": 1, "content": "!!", "title": None}
        return {**state, "files": [{**file, "shared_in": []}]}

    return {
        f.__name__: f
        for f in (version, other_bot, message_without_ts, unknown_user_field, bad_file_content)
    }


@pytest.mark.parametrize("damage", ["not json", "a list", *_unreadable_states()])
def test_an_unreadable_state_file_is_moved_aside_and_the_workspace_starts_empty(
    tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    state_file = tmp_path / "sandbox.json"
    good = json.loads(new_standin().workspace.to_json())
    if damage == "not json":
        text = '{"format": "countersign-sandbox-workspace", "version'
    elif damage == "a list":
        text = "[]"
    else:
        text = json.dumps(_unreadable_states()[damage](good))
    state_file.write_text(text)

    with caplog.at_level(logging.WARNING, logger="countersign.sandbox"):
        standin = new_standin(state_file=state_file)

    assert not standin.restored
    assert standin.messages(CHANNEL) == [] and standin.files() == []
    assert (tmp_path / "sandbox.json.broken").read_text() == text
    assert not state_file.exists()
    assert "cannot restore the workspace" in caplog.text and "sandbox.json.broken" in caplog.text

    async def post(slack: SlackStandIn, web: AsyncWebClient) -> None:
        await web.chat_postMessage(channel=CHANNEL, text="fresh")

    run(standin, post)
    assert [m["text"] for m in new_standin(state_file=state_file).messages(CHANNEL)] == ["fresh"]
