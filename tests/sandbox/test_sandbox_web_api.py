"""The stand-in's Web API, driven by slack_sdk's own clients over a real socket, as the bot
will drive it: state is kept, Slack's error codes come back, faults are injected."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from sandbox_helpers import ALICE, BOB, CHANNEL, new_standin, running
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry import RateLimitErrorRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient

from sandbox import SlackStandIn, StandInThread
from sandbox.calls import DROP_CONNECTION, NO_ANSWER

Scenario = Callable[[SlackStandIn, AsyncWebClient], Awaitable[None]]
MODAL = {
    "type": "modal",
    "title": {"type": "plain_text", "text": "Feedback"},
    "submit": {"type": "plain_text", "text": "Send"},
    "blocks": [
        {
            "type": "input",
            "block_id": "fb",
            "label": {"type": "plain_text", "text": "What should change?"},
            "element": {"type": "plain_text_input", "action_id": "text"},
        }
    ],
}


def run(scenario: Scenario, standin: SlackStandIn | None = None, **client: Any) -> None:
    async def main() -> None:
        async with running(standin or new_standin()) as slack:
            web = AsyncWebClient(token=slack.bot_token, base_url=slack.api_url, timeout=5, **client)
            await asyncio.wait_for(scenario(slack, web), 20)

    asyncio.run(main())


async def error_of(call: Awaitable[Any]) -> dict[str, Any]:
    with pytest.raises(SlackApiError) as caught:
        await call
    data: dict[str, Any] = caught.value.response.data  # type: ignore[assignment]
    return data


def test_auth_is_required_and_checked() -> None:
    async def scenario(slack: SlackStandIn, web: AsyncWebClient) -> None:
        me = await web.auth_test()
        assert (me["user_id"], me["bot_id"], me["team_id"]) == ("UBOT", "BBOT", "T0001")
        anonymous = AsyncWebClient(base_url=slack.api_url)
        assert (await error_of(anonymous.auth_test()))["error"] == "not_authed"
        stranger = AsyncWebClient(token="xoxb-someone-else", base_url=slack.api_url)
        assert (await error_of(stranger.auth_test()))["error"] == "invalid_auth"
        app = AsyncWebClient(token=slack.app_token, base_url=slack.api_url)
        failure = await error_of(app.chat_postMessage(channel=CHANNEL, text="hi"))
        assert failure["error"] == "not_allowed_token_type"
        assert (await error_of(web.apps_connections_open(app_token=slack.bot_token)))[
            "error"
        ] == "not_allowed_token_type"
        assert [c.error for c in slack.calls("auth.test")] == [None, "not_authed", "invalid_auth"]

    run(scenario)


def test_post_message_keeps_threads_and_unique_increasing_ts() -> None:
    async def scenario(slack: SlackStandIn, web: AsyncWebClient) -> None:
        root = await web.chat_postMessage(channel=CHANNEL, text="Run started")
        replies = [
            await web.chat_postMessage(channel=CHANNEL, text=f"step {i}", thread_ts=root["ts"])
            for i in range(3)
        ]
        stamps = [root["ts"], *(r["ts"] for r in replies)]
        assert stamps == sorted(stamps, key=float)
        assert len(set(stamps)) == 4
        assert all(len(ts.split(".")[1]) == 6 for ts in stamps)
        assert root["channel"] == CHANNEL
        assert root["message"]["bot_id"] == "BBOT"
        thread = slack.thread(CHANNEL, root["ts"])
        assert [m["text"] for m in thread] == ["Run started", "step 0", "step 1", "step 2"]
        assert thread[0]["reply_count"] == 3
        assert thread[0]["latest_reply"] == stamps[-1]
        assert slack.latest_message(CHANNEL)["text"] == "step 2"  # type: ignore[index]
        missing = await error_of(
            web.chat_postMessage(channel=CHANNEL, text="x", thread_ts="1.000001")
        )
        assert missing["error"] == "thread_not_found"
        recorded = slack.calls("chat.postMessage")[1]
        assert recorded.params["thread_ts"] == root["ts"]
        assert recorded.ok

    run(scenario)


def test_invalid_blocks_get_slack_error_with_messages() -> None:
    async def scenario(slack: SlackStandIn, web: AsyncWebClient) -> None:
        blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": "x" * 3001}}]
        failure = await error_of(web.chat_postMessage(channel=CHANNEL, text="t", blocks=blocks))
        assert failure["error"] == "invalid_blocks"
        assert failure["response_metadata"]["messages"] == [
            "[ERROR] must be less than 3001 characters [json-pointer:/blocks/0/text/text]"
        ]
        assert slack.messages(CHANNEL) == []
        assert slack.calls("chat.postMessage")[0].error == "invalid_blocks"

    run(scenario)


def test_message_errors() -> None:
    async def scenario(slack: SlackStandIn, web: AsyncWebClient) -> None:
        slack.add_channel("C0ELSE", "elsewhere", [ALICE], bot_is_member=False)
        long = "x" * 40_001
        cases: list[tuple[Callable[[], Awaitable[Any]], str]] = [
            (lambda: web.chat_postMessage(channel=CHANNEL, text=long), "msg_too_long"),
            (lambda: web.chat_postMessage(channel="C0NOPE", text="hi"), "channel_not_found"),
            (lambda: web.chat_postMessage(channel="C0ELSE", text="hi"), "not_in_channel"),
            (lambda: web.api_call("chat.postMessage", json={"channel": CHANNEL}), "no_text"),
            (
                lambda: web.chat_update(channel=CHANNEL, ts="1.000001", text="x"),
                "message_not_found",
            ),
            (
                lambda: web.chat_postMessage(channel=CHANNEL, text="t", blocks="[{"),
                "invalid_blocks_format",
            ),
        ]
        for call, code in cases:
            assert (await error_of(call()))["error"] == code
        posted = await web.chat_postMessage(channel=CHANNEL, text="x" * 40_000)
        too_long = web.chat_update(channel=CHANNEL, ts=posted["ts"], text="y" * 4001)
        assert (await error_of(too_long))["error"] == "msg_too_long"
        updated = await web.chat_update(channel=CHANNEL, ts=posted["ts"], text="y" * 4000)
        assert updated["message"]["edited"]["user"] == "UBOT"
        assert slack.messages(CHANNEL)[0]["text"] == "y" * 4000

    run(scenario)


def test_ephemeral_people_groups_and_conversations() -> None:
    async def scenario(slack: SlackStandIn, web: AsyncWebClient) -> None:
        slack.add_usergroup("S0REVIEWERS", [ALICE, BOB])
        sent = await web.chat_postEphemeral(channel=CHANNEL, user=ALICE, text="only you")
        assert [e.text for e in slack.ephemerals(ALICE)] == ["only you"]
        assert slack.ephemerals(ALICE)[0].ts == sent["message_ts"]
        assert not slack.ephemerals(BOB)
        stranger = web.chat_postEphemeral(channel=CHANNEL, user="UBOT2", text="x")
        assert (await error_of(stranger))["error"] == "user_not_found"
        user = (await web.users_info(user=ALICE))["user"]
        assert (user["name"], user["real_name"], user["is_bot"]) == (
            "alice",
            "Alice Liddell",
            False,
        )
        assert (await web.usergroups_users_list(usergroup="S0REVIEWERS"))["users"] == [ALICE, BOB]
        assert (await error_of(web.usergroups_users_list(usergroup="S0NOPE")))[
            "error"
        ] == "no_such_subteam"
        members = (await web.conversations_members(channel=CHANNEL))["members"]
        assert sorted(members) == sorted([ALICE, BOB, "UBOT"])
        info = (await web.conversations_info(channel=CHANNEL))["channel"]
        assert (info["name"], info["is_member"]) == ("reviews", True)
        dm = await web.chat_postMessage(channel=ALICE, text="a direct message")
        assert slack.messages(dm["channel"])[0]["text"] == "a direct message"
        root = await web.chat_postMessage(channel=CHANNEL, text="root")
        reply = await web.chat_postMessage(channel=CHANNEL, text="r", thread_ts=root["ts"])
        link = await web.chat_getPermalink(channel=CHANNEL, message_ts=reply["ts"])
        assert f"thread_ts={root['ts']}" in link["permalink"]

    run(scenario)


def test_trigger_ids_are_single_use_and_expire_after_three_seconds() -> None:
    now = [1_700_000_000.0]
    standin = new_standin(clock=lambda: now[0])

    async def scenario(slack: SlackStandIn, web: AsyncWebClient) -> None:
        fresh = slack.workspace.issue_trigger(ALICE)
        opened = await web.views_open(trigger_id=fresh, view=MODAL)
        assert opened["view"]["id"] in [v["id"] for v in slack.open_views(ALICE)]
        assert opened["view"]["blocks"][0]["element"]["action_id"] == "text"
        assert (await error_of(web.views_open(trigger_id=fresh, view=MODAL)))[
            "error"
        ] == "exchanged_trigger_id"
        assert (await error_of(web.views_open(trigger_id="1.2.3", view=MODAL)))[
            "error"
        ] == "invalid_trigger_id"
        late = slack.workspace.issue_trigger(ALICE)
        now[0] += 3.5
        assert (await error_of(web.views_open(trigger_id=late, view=MODAL)))[
            "error"
        ] == "expired_trigger_id"

    run(scenario, standin)


def test_views_are_validated_updated_and_found() -> None:
    async def scenario(slack: SlackStandIn, web: AsyncWebClient) -> None:
        bad = {**MODAL, "title": {"type": "plain_text", "text": "t" * 25}}
        trigger = slack.workspace.issue_trigger(ALICE)
        failure = await error_of(web.views_open(trigger_id=trigger, view=bad))
        assert failure["error"] == "invalid_arguments"
        assert "json-pointer:/view/title/text" in failure["response_metadata"]["messages"][0]
        view = (await web.views_open(trigger_id=trigger, view=MODAL))["view"]
        changed = {**MODAL, "title": {"type": "plain_text", "text": "Thanks"}}
        updated = await web.views_update(view_id=view["id"], view=changed, hash=view["hash"])
        assert updated["view"]["title"]["text"] == "Thanks"
        stale = web.views_update(view_id=view["id"], view=changed, hash="0.stale")
        assert (await error_of(stale))["error"] == "hash_conflict"
        gone = web.views_update(view_id="V0NOPE", view=changed)
        assert (await error_of(gone))["error"] == "view_not_found"
        pushed = await web.views_push(trigger_id=slack.workspace.issue_trigger(ALICE), view=MODAL)
        assert pushed["view"]["previous_view_id"] == view["id"]
        assert pushed["view"]["root_view_id"] == view["id"]

    run(scenario)


def test_a_home_view_is_published_as_slack_takes_it() -> None:
    """``views.publish``: a view of type home, 100 blocks at most, to a user who exists;
    published again it keeps its id and takes a new hash, and a stale hash is refused."""
    home = {
        "type": "home",
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": "hi"}}],
    }

    async def scenario(slack: SlackStandIn, web: AsyncWebClient) -> None:
        modal = web.views_publish(user_id=ALICE, view=MODAL)
        assert (await error_of(modal))["error"] == "invalid_arguments"
        nobody = web.views_publish(user_id="UNOBODY", view=home)
        assert (await error_of(nobody))["error"] == "user_not_found"
        crowded = {"type": "home", "blocks": home["blocks"] * 101}
        too_many = await error_of(web.views_publish(user_id=ALICE, view=crowded))
        assert too_many["error"] == "invalid_arguments"
        long_text = {"type": "section", "text": {"type": "mrkdwn", "text": "x" * 3001}}
        too_long = web.views_publish(user_id=ALICE, view={"type": "home", "blocks": [long_text]})
        assert (await error_of(too_long))["error"] == "invalid_arguments"
        first = (await web.views_publish(user_id=ALICE, view=home))["view"]
        assert first["type"] == "home" and first["id"] and first["hash"]
        again = (await web.views_publish(user_id=ALICE, view=home, hash=first["hash"]))["view"]
        assert again["id"] == first["id"]
        stale = web.views_publish(user_id=ALICE, view=home, hash=first["hash"])
        assert again["hash"] != first["hash"]
        assert (await error_of(stale))["error"] == "hash_conflict"
        assert slack.home_view(ALICE) == again
        assert slack.home_view(BOB) is None and slack.open_views(ALICE) == []

    run(scenario)


def test_files_upload_v2_lands_in_the_thread() -> None:
    async def scenario(slack: SlackStandIn, web: AsyncWebClient) -> None:
        root = await web.chat_postMessage(channel=CHANNEL, text="Draft ready")
        draft = "# Draft\n" + "long line\n" * 2000
        result = await web.files_upload_v2(
            channel=CHANNEL,
            thread_ts=root["ts"],
            content=draft,
            filename="draft.md",
            title="Draft v2",
            initial_comment="Full draft",
        )
        assert result["file"]["title"] == "Draft v2"
        stored = slack.files()[0]
        assert stored.content == draft.encode()
        assert stored.filename == "draft.md"
        reply = slack.thread(CHANNEL, root["ts"])[-1]
        assert reply["text"] == "Full draft"
        assert reply["files"][0]["id"] == stored.id
        assert [c.method for c in slack.calls()][-3:] == [
            "files.getUploadURLExternal",
            "upload",
            "files.completeUploadExternal",
        ]
        never_uploaded = await web.files_getUploadURLExternal(filename="x.txt", length=3)
        incomplete = web.files_completeUploadExternal(
            files=[{"id": never_uploaded["file_id"], "title": "x"}], channel_id=CHANNEL
        )
        assert (await error_of(incomplete))["error"] == "file_not_found"

    run(scenario)


def test_injected_429_is_retried_by_the_rate_limit_handler() -> None:
    async def scenario(slack: SlackStandIn, web: AsyncWebClient) -> None:
        slack.fail_next("chat.postMessage", status=429, retry_after=1)
        started = time.monotonic()
        posted = await web.chat_postMessage(channel=CHANNEL, text="after a 429")
        assert time.monotonic() - started >= 1.0  # Retry-After was honoured
        assert posted["ok"]
        assert slack.messages(CHANNEL)[0]["text"] == "after a 429"
        first, second = slack.calls("chat.postMessage")
        assert (first.status, first.error) == (429, "ratelimited")
        assert (second.status, second.ok) == (200, True)

    run(scenario, retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=1)])


def test_429_without_a_handler_reaches_the_caller_with_retry_after() -> None:
    async def scenario(slack: SlackStandIn, web: AsyncWebClient) -> None:
        slack.fail_next("chat.postMessage", status=429, retry_after=7, times=2)
        for _ in range(2):
            with pytest.raises(SlackApiError) as caught:
                await web.chat_postMessage(channel=CHANNEL, text="x")
            assert caught.value.response.status_code == 429
            assert caught.value.response.headers["Retry-After"] == "7"
        assert (await web.chat_postMessage(channel=CHANNEL, text="third"))["ok"]

    run(scenario)


def test_injected_server_errors_and_application_errors() -> None:
    async def scenario(slack: SlackStandIn, web: AsyncWebClient) -> None:
        slack.fail_next("chat.update", status=503)
        slack.fail_next("*", status=200, error="fatal_error")
        assert (await error_of(web.auth_test()))["error"] == "fatal_error"
        posted = await web.chat_postMessage(channel=CHANNEL, text="v1")
        await web.chat_update(channel=CHANNEL, ts=posted["ts"], text="v2")
        assert [c.status for c in slack.calls("chat.update")] == [503, 200]
        assert slack.messages(CHANNEL)[0]["text"] == "v2"

    run(scenario, retry_handlers=[AsyncServerErrorRetryHandler(max_retry_count=1)])


def test_thread_wrapper_serves_the_sync_web_client() -> None:
    with StandInThread(new_standin()) as slack:
        web = WebClient(
            token="xoxb-sandbox-bot-token",
            base_url=slack.api_url,
            timeout=5,
            retry_handlers=[RateLimitErrorRetryHandler(max_retry_count=1)],
        )
        slack.fail_next("chat.postMessage", retry_after=0)
        posted = web.chat_postMessage(
            channel=CHANNEL, text="hi", blocks=json.dumps([{"type": "divider"}])
        )
        assert slack.latest_message(CHANNEL)["ts"] == posted["ts"]  # type: ignore[index]
        assert [c.error for c in slack.calls("chat.postMessage")] == ["ratelimited", None]
        assert slack.calls("chat.postMessage")[1].params["blocks"] == [{"type": "divider"}]
        assert slack.messages(CHANNEL)[0]["blocks"][0]["block_id"]  # Slack fills it in


def test_metadata_is_kept_and_listed_only_when_asked_for() -> None:
    async def scenario(slack: SlackStandIn, web: AsyncWebClient) -> None:
        tag = {"event_type": "countersign_outbox", "event_payload": {"outbox_id": 7, "step": "p"}}
        root = await web.chat_postMessage(channel=CHANNEL, text="root", metadata=tag)
        assert root["message"]["metadata"] == tag
        reply = await web.chat_postMessage(
            channel=CHANNEL, text="reply", thread_ts=root["ts"], metadata=tag
        )
        bare = await web.conversations_history(channel=CHANNEL)
        assert [m["text"] for m in bare["messages"]] == ["root"]  # replies stay in the thread
        assert "metadata" not in bare["messages"][0]
        full = await web.conversations_history(channel=CHANNEL, include_all_metadata=True)
        assert full["messages"][0]["metadata"] == tag
        thread = await web.conversations_replies(
            channel=CHANNEL, ts=root["ts"], include_all_metadata=True
        )
        assert [m.get("metadata") for m in thread["messages"]] == [tag, tag]
        assert thread["messages"][1]["ts"] == reply["ts"]
        plain = await web.conversations_replies(channel=CHANNEL, ts=root["ts"])
        assert all("metadata" not in m for m in plain["messages"])

        # Slack posts the message and drops metadata it cannot take, with a warning.
        for bad in (
            {"event_type": "countersign.outbox", "event_payload": {}},
            {"event_type": "ok", "event_payload": ["not", "an", "object"]},
            {"event_payload": {}},
        ):
            warned = await web.chat_postMessage(channel=CHANNEL, text="warned", metadata=bad)
            assert warned["warning"] == "invalid_metadata_schema"
            assert "metadata" not in warned["message"]
        refused = web.api_call(
            "chat.postMessage", data={"channel": CHANNEL, "text": "x", "metadata": "[1, 2]"}
        )
        assert (await error_of(refused))["error"] == "invalid_metadata_format"

    run(scenario)


def test_history_and_replies_are_paged_and_bounded_by_oldest() -> None:
    async def scenario(slack: SlackStandIn, web: AsyncWebClient) -> None:
        posted = [
            (await web.chat_postMessage(channel=CHANNEL, text=f"m{i}"))["ts"] for i in range(5)
        ]
        first = await web.conversations_history(channel=CHANNEL, limit=2, oldest=posted[0])
        assert [m["text"] for m in first["messages"]] == ["m4", "m3"]  # newest first
        assert first["has_more"]
        cursor = first["response_metadata"]["next_cursor"]
        second = await web.conversations_history(
            channel=CHANNEL, limit=2, oldest=posted[0], cursor=cursor
        )
        assert [m["text"] for m in second["messages"]] == ["m2", "m1"]  # m0 is not after oldest
        assert not second["has_more"] and second["response_metadata"]["next_cursor"] == ""
        inclusive = await web.conversations_history(
            channel=CHANNEL, oldest=posted[0], latest=posted[1], inclusive=True
        )
        assert [m["text"] for m in inclusive["messages"]] == ["m1", "m0"]
        bad = web.conversations_history(channel=CHANNEL, cursor="bm90LWEtY3Vyc29y")
        assert (await error_of(bad))["error"] == "invalid_cursor"

        root = posted[0]
        replies = [
            (await web.chat_postMessage(channel=CHANNEL, text=f"r{i}", thread_ts=root))["ts"]
            for i in range(3)
        ]
        page = await web.conversations_replies(channel=CHANNEL, ts=root, oldest=replies[0])
        assert [m["text"] for m in page["messages"]] == ["m0", "r1", "r2"]  # the parent first
        paged = await web.conversations_replies(channel=CHANNEL, ts=root, limit=2)
        assert [m["text"] for m in paged["messages"]] == ["m0", "r0"]
        rest = await web.conversations_replies(
            channel=CHANNEL, ts=root, limit=2, cursor=paged["response_metadata"]["next_cursor"]
        )
        assert [m["text"] for m in rest["messages"]] == ["r1", "r2"]

        slack.add_channel("C0ELSE", "elsewhere", [ALICE], bot_is_member=False)
        hidden = web.conversations_history(channel="C0ELSE")
        assert (await error_of(hidden))["error"] == "not_in_channel"

    run(scenario)


def test_files_info_says_where_a_file_is_shared() -> None:
    async def scenario(slack: SlackStandIn, web: AsyncWebClient) -> None:
        root = await web.chat_postMessage(channel=CHANNEL, text="Draft ready")
        started = await web.files_getUploadURLExternal(filename="draft.md", length=5)
        file_id = started["file_id"]
        assert (await error_of(web.files_info(file=file_id)))["error"] == "file_not_found"
        async with (
            aiohttp.ClientSession() as session,
            session.post(started["upload_url"], data=b"draft") as answer,
        ):
            assert answer.status == 200
        unshared = (await web.files_info(file=file_id))["file"]
        assert (unshared["size"], unshared["channels"], unshared["shares"]) == (5, [], {})
        await web.files_completeUploadExternal(
            files=[{"id": file_id, "title": "Draft"}], channel_id=CHANNEL, thread_ts=root["ts"]
        )
        shared = (await web.files_info(file=file_id))["file"]
        assert shared["channels"] == [CHANNEL]
        (share,) = shared["shares"]["public"][CHANNEL]
        assert share["thread_ts"] == root["ts"]
        assert share["ts"] == slack.thread(CHANNEL, root["ts"])[-1]["ts"]
        assert (await error_of(web.files_info(file="F0NOPE")))["error"] == "file_not_found"

    run(scenario)


def test_a_call_can_be_applied_and_its_answer_lost() -> None:
    async def scenario(slack: SlackStandIn, web: AsyncWebClient) -> None:
        slack.fail_next("chat.postMessage", status=500, after_applying=True)
        slack.fail_next("chat.postMessage", status=DROP_CONNECTION, after_applying=True)
        slack.fail_next("chat.postMessage", status=DROP_CONNECTION)
        with pytest.raises(SlackApiError) as caught:
            await web.chat_postMessage(channel=CHANNEL, text="one")
        assert caught.value.response.status_code == 500
        with pytest.raises(aiohttp.ServerDisconnectedError):
            await web.chat_postMessage(channel=CHANNEL, text="two")
        with pytest.raises(aiohttp.ServerDisconnectedError):
            await web.chat_postMessage(channel=CHANNEL, text="never stored")
        assert [m["text"] for m in slack.messages(CHANNEL)] == ["one", "two"]
        calls = slack.calls("chat.postMessage")
        assert [(c.error, c.applied) for c in calls] == [
            ("http_500", True),
            ("dropped", True),
            ("dropped", False),
        ]
        # A call Slack refuses is not applied, so its answer is not lost: the fault is spent.
        slack.fail_next("chat.postMessage", status=503, after_applying=True)
        assert (await error_of(web.chat_postMessage(channel="C0NOPE", text="x")))[
            "error"
        ] == "channel_not_found"
        assert (await web.chat_postMessage(channel=CHANNEL, text="three"))["ok"]
        with pytest.raises(ValueError, match="HTTP 429"):
            slack.fail_next("chat.postMessage", status=429, after_applying=True)

    run(scenario, retry_handlers=[])


def test_no_answer_leaves_the_call_hanging_after_applying_it() -> None:
    async def scenario(slack: SlackStandIn, web: AsyncWebClient) -> None:
        slack.fail_next("chat.postMessage", status=NO_ANSWER, after_applying=True)
        impatient = AsyncWebClient(
            token=slack.bot_token, base_url=slack.api_url, timeout=1, retry_handlers=[]
        )
        with pytest.raises(TimeoutError):
            await impatient.chat_postMessage(channel=CHANNEL, text="stored, never answered")
        assert [m["text"] for m in slack.messages(CHANNEL)] == ["stored, never answered"]
        (call,) = slack.calls("chat.postMessage")
        assert (call.error, call.applied) == ("no_answer", True)

    run(scenario, retry_handlers=[])


def test_a_fault_can_pick_the_calls_it_fails() -> None:
    async def scenario(slack: SlackStandIn, web: AsyncWebClient) -> None:
        slack.fail_next(
            "chat.postMessage", status=200, error="fatal_error", where=lambda p: "2" in p["text"]
        )
        await web.chat_postMessage(channel=CHANNEL, text="part 1")
        assert (await error_of(web.chat_postMessage(channel=CHANNEL, text="part 2")))[
            "error"
        ] == "fatal_error"
        await web.chat_postMessage(channel=CHANNEL, text="part 2")
        assert [c.error for c in slack.calls("chat.postMessage")] == [None, "fatal_error", None]

    run(scenario)


def test_conversations_open_gives_one_persons_dm_and_checks_who() -> None:
    async def scenario(slack: SlackStandIn, web: AsyncWebClient) -> None:
        opened = (await web.conversations_open(users=ALICE))["channel"]
        assert (await web.conversations_open(users=ALICE))["channel"]["id"] == opened["id"]
        await web.chat_postMessage(channel=opened["id"], text="a reminder")
        assert [m["text"] for m in slack.messages(opened["id"])] == ["a reminder"]
        assert (await web.conversations_info(channel=opened["id"]))["channel"]["is_im"]
        assert (await error_of(web.conversations_open(users="U0NOBODY")))[
            "error"
        ] == "user_not_found"
        assert (await error_of(web.conversations_open(users=f"{ALICE},{BOB}")))[
            "error"
        ] == "invalid_arguments"
        assert (await error_of(web.conversations_open(users=" ")))[
            "error"
        ] == "users_list_not_supplied"
        assert (await error_of(web.conversations_open(users="UBOT")))["error"] == "cannot_dm_bot"

    run(scenario)
