"""The stand-in acting as people against a real Bolt ``AsyncApp`` over HTTP.

Bolt's own signature check is the judge of our signing; the payloads must be shaped well
enough for Bolt to route them to the right listener with the right arguments.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from sandbox_helpers import (
    ALICE,
    APPROVAL_BLOCKS,
    BOB,
    CHANNEL,
    bolt_app,
    new_standin,
    running,
    serving,
)
from slack_bolt.async_app import AsyncApp
from slack_sdk.signature import SignatureVerifier

from sandbox import PersonActionRefused, SlackStandIn, Tamper, sign

Scenario = Callable[[SlackStandIn, AsyncApp, list[Any]], Awaitable[None]]
Setup = Callable[[AsyncApp, list[Any]], None]

FEEDBACK_MODAL = {
    "type": "modal",
    "callback_id": "feedback",
    "private_metadata": "r1",
    "title": {"type": "plain_text", "text": "Request changes"},
    "submit": {"type": "plain_text", "text": "Send"},
    "blocks": [
        {
            "type": "input",
            "block_id": "fb",
            "label": {"type": "plain_text", "text": "What should change?"},
            "element": {"type": "plain_text_input", "action_id": "text", "multiline": True},
        },
        {
            "type": "input",
            "block_id": "severity",
            "label": {"type": "plain_text", "text": "Severity"},
            "element": {
                "type": "static_select",
                "action_id": "pick",
                "options": [
                    {"text": {"type": "plain_text", "text": "Minor"}, "value": "minor"},
                    {"text": {"type": "plain_text", "text": "Major"}, "value": "major"},
                ],
            },
        },
        {
            "type": "input",
            "block_id": "cc",
            "optional": True,
            "label": {"type": "plain_text", "text": "Copy"},
            "element": {"type": "multi_users_select", "action_id": "people"},
        },
    ],
}


def run(setup: Setup, scenario: Scenario) -> None:
    """Start the stand-in and a Bolt app whose listeners record into a list."""

    async def main() -> None:
        async with running(new_standin()) as slack:
            app = bolt_app(slack)
            seen: list[Any] = []
            setup(app, seen)
            async with serving(app, slack):
                await asyncio.wait_for(scenario(slack, app, seen), 20)

    asyncio.run(main())


def test_our_signature_matches_slack_sdks() -> None:
    body = "token=x&text=hello+world"
    expected = SignatureVerifier("s3cret").generate_signature(timestamp="1700000000", body=body)
    assert sign("s3cret", 1700000000, body) == expected


def test_signed_slash_command_is_accepted_and_its_reply_shown() -> None:
    def setup(app: AsyncApp, seen: list[Any]) -> None:
        @app.command("/crew")
        async def command(ack: Any, command: dict[str, Any]) -> None:
            seen.append(command)
            await ack(f"Starting run: {command['text']}")

    async def scenario(slack: SlackStandIn, app: AsyncApp, seen: list[Any]) -> None:
        delivery = await slack.slash_command(ALICE, CHANNEL, "/crew", 'run blog topic="x"')
        assert (delivery.status, delivery.body) == (200, 'Starting run: run blog topic="x"')
        assert delivery.latency < 3.0
        assert seen[0]["user_id"] == ALICE
        assert seen[0]["channel_id"] == CHANNEL
        assert seen[0]["response_url"].startswith(slack.base_url)
        assert [e.text for e in slack.ephemerals(ALICE)] == [delivery.body]
        assert [c.method for c in slack.calls()] == ["auth.test"]  # Bolt's authorization

    run(setup, scenario)


@pytest.mark.parametrize(
    "tamper", [Tamper.BAD_SIGNATURE, Tamper.STALE_TIMESTAMP, Tamper.NO_SIGNATURE]
)
def test_spoiled_signatures_are_refused_by_bolt(tamper: Tamper) -> None:
    def setup(app: AsyncApp, seen: list[Any]) -> None:
        @app.command("/crew")
        async def command(ack: Any) -> None:
            seen.append("ran")
            await ack()

        @app.event("message")
        async def message(event: dict[str, Any]) -> None:
            seen.append("ran")

    async def scenario(slack: SlackStandIn, app: AsyncApp, seen: list[Any]) -> None:
        refused = await slack.slash_command(ALICE, CHANNEL, "/crew", "run", tamper=tamper)
        assert refused.status == 401
        event = await slack.send_message(ALICE, CHANNEL, "hello", tamper=tamper)
        assert event.status == 401
        accepted = await slack.slash_command(ALICE, CHANNEL, "/crew", "run")
        assert accepted.status == 200
        assert seen == ["ran"]

    run(setup, scenario)


def test_button_click_on_a_posted_message_round_trips() -> None:
    def setup(app: AsyncApp, seen: list[Any]) -> None:
        @app.action("approve")
        async def approve(ack: Any, body: dict[str, Any], client: Any) -> None:
            seen.append(body)
            await ack()
            container = body["container"]
            await client.chat_update(
                channel=container["channel_id"], ts=container["message_ts"], text="Approved"
            )

        @app.action("verdict")
        async def verdict(ack: Any, action: dict[str, Any]) -> None:
            seen.append(action["selected_option"]["value"])
            await ack()

    async def scenario(slack: SlackStandIn, app: AsyncApp, seen: list[Any]) -> None:
        root = await app.client.chat_postMessage(channel=CHANNEL, text="Run r1")
        draft = await app.client.chat_postMessage(
            channel=CHANNEL, thread_ts=root["ts"], text="Draft v1", blocks=APPROVAL_BLOCKS
        )
        delivery = await slack.click_button(BOB, CHANNEL, draft["ts"], "approve")
        assert delivery.status == 200
        assert delivery.body == ""
        await slack.wait_for(lambda: slack.calls("chat.update"))
        body = seen[0]
        assert body["actions"][0]["value"] == "review:r1:v1"
        assert body["container"]["message_ts"] == draft["ts"]
        assert body["message"]["thread_ts"] == root["ts"]
        assert body["user"]["id"] == BOB
        assert slack.thread(CHANNEL, root["ts"])[1]["text"] == "Approved"
        await slack.click_button(BOB, CHANNEL, draft["ts"], "verdict", value="bad")
        assert seen[1] == "bad"
        with pytest.raises(PersonActionRefused):
            await slack.click_button(BOB, CHANNEL, draft["ts"], "verdict", value="meh")

    run(setup, scenario)


def test_click_on_a_button_the_bot_did_not_post_is_refused() -> None:
    def setup(app: AsyncApp, seen: list[Any]) -> None:
        @app.action("reject")
        async def reject(ack: Any) -> None:
            seen.append("clicked")
            await ack()

    async def scenario(slack: SlackStandIn, app: AsyncApp, seen: list[Any]) -> None:
        posted = await app.client.chat_postMessage(
            channel=CHANNEL, text="Draft", blocks=APPROVAL_BLOCKS
        )
        with pytest.raises(PersonActionRefused, match="reject"):
            await slack.click_button(BOB, CHANNEL, posted["ts"], "reject")
        with pytest.raises(PersonActionRefused, match="no message"):
            await slack.click_button(BOB, CHANNEL, "1700000000.000100", "approve")
        assert seen == []

    run(setup, scenario)


def test_view_submission_round_trip_with_errors_then_success() -> None:
    def setup(app: AsyncApp, seen: list[Any]) -> None:
        @app.command("/crew")
        async def command(ack: Any, body: dict[str, Any], client: Any) -> None:
            await ack()
            await client.views_open(trigger_id=body["trigger_id"], view=FEEDBACK_MODAL)

        @app.view("feedback")
        async def submitted(ack: Any, view: dict[str, Any]) -> None:
            values = view["state"]["values"]
            seen.append(values)
            if len(values["fb"]["text"]["value"]) < 5:
                await ack(response_action="errors", errors={"fb": "Say a little more"})
            else:
                await ack()

    async def scenario(slack: SlackStandIn, app: AsyncApp, seen: list[Any]) -> None:
        await slack.slash_command(ALICE, CHANNEL, "/crew", "feedback r1")
        views = await slack.wait_for(lambda: slack.open_views(ALICE))
        view_id = views[0]["id"]
        with pytest.raises(PersonActionRefused, match="required"):
            await slack.submit_view(ALICE, view_id, {"fb": "short"})
        short = await slack.submit_view(ALICE, view_id, {"fb": "meh", "severity": "minor"})
        assert short.json == {"response_action": "errors", "errors": {"fb": "Say a little more"}}
        assert short.problems == []
        assert slack.open_views(ALICE)
        done = await slack.submit_view(
            ALICE, view_id, {"text": "Cite sources", "pick": "major", "cc": [BOB]}
        )
        assert done.status == 200
        assert done.body == ""
        assert slack.open_views(ALICE) == []
        values = seen[-1]
        assert values["fb"]["text"] == {"type": "plain_text_input", "value": "Cite sources"}
        assert values["severity"]["pick"]["selected_option"]["value"] == "major"
        assert values["cc"]["people"] == {"type": "multi_users_select", "selected_users": [BOB]}
        with pytest.raises(PersonActionRefused, match="no open modal"):
            await slack.submit_view(ALICE, view_id, {"fb": "again", "severity": "minor"})

    run(setup, scenario)


def test_thread_reply_retry_and_app_mention_events() -> None:
    def setup(app: AsyncApp, seen: list[Any]) -> None:
        @app.event("message")
        async def message(body: dict[str, Any], request: Any) -> None:
            seen.append((body, request.headers.get("x-slack-retry-num")))

        @app.event("app_mention")
        async def mention(event: dict[str, Any]) -> None:
            seen.append(event)

    async def scenario(slack: SlackStandIn, app: AsyncApp, seen: list[Any]) -> None:
        root = await app.client.chat_postMessage(channel=CHANNEL, text="Draft v1")
        first = await slack.reply_in_thread(ALICE, CHANNEL, root["ts"], "make it shorter")
        await slack.wait_for(lambda: seen)
        retried = await slack.retry(first, num=1, reason="http_timeout")
        assert (first.status, retried.status) == (200, 200)
        await slack.wait_for(lambda: len(seen) == 2)
        (body, retry_header), (again, retry_again) = seen
        assert body["event_id"] == again["event_id"] == first.event_id
        assert (retry_header, retry_again) == (None, ["1"])
        event = body["event"]
        assert event["thread_ts"] == root["ts"]
        assert event["text"] == "make it shorter"
        assert event["user"] == ALICE
        assert event["channel_type"] == "channel"
        assert body["authorizations"][0]["user_id"] == "UBOT"
        assert slack.thread(CHANNEL, root["ts"])[0]["reply_count"] == 1
        mentioned = await slack.mention_bot(BOB, CHANNEL, "status?")
        assert mentioned.ok
        event = await slack.wait_for(lambda: seen[2] if len(seen) > 2 else None)
        assert event["type"] == "app_mention"
        assert event["text"] == "<@UBOT> status?"
        twin = await slack.resend_as_message_event(CHANNEL, event["ts"])
        assert twin.event_id != mentioned.event_id
        with pytest.raises(PersonActionRefused, match="thread_not_found"):
            await slack.reply_in_thread(ALICE, CHANNEL, "1.000001", "hello?")

    run(setup, scenario)


def test_response_url_posts_replace_and_ephemeral() -> None:
    def setup(app: AsyncApp, seen: list[Any]) -> None:
        @app.command("/crew")
        async def command(ack: Any, respond: Any) -> None:
            await ack()
            await respond(text="working on it")
            await respond(text="done", response_type="in_channel")

        @app.action("approve")
        async def approve(ack: Any, respond: Any) -> None:
            await ack()
            await respond(text="Approved by you", replace_original=True)

    async def scenario(slack: SlackStandIn, app: AsyncApp, seen: list[Any]) -> None:
        await slack.slash_command(ALICE, CHANNEL, "/crew", "run")
        await slack.wait_for(lambda: len(slack.calls("response_url")) == 2)
        assert [e.text for e in slack.ephemerals(ALICE)] == ["working on it"]
        assert slack.latest_message(CHANNEL)["text"] == "done"  # type: ignore[index]
        draft = await app.client.chat_postMessage(channel=CHANNEL, text="d", blocks=APPROVAL_BLOCKS)
        await slack.click_button(ALICE, CHANNEL, draft["ts"], "approve")
        await slack.wait_for(lambda: len(slack.calls("response_url")) == 3)
        assert slack.messages(CHANNEL)[-1]["text"] == "Approved by you"

    run(setup, scenario)


def test_slow_ack_is_reported_as_a_timeout() -> None:
    def setup(app: AsyncApp, seen: list[Any]) -> None:
        @app.command("/slow")
        async def slow(ack: Any) -> None:
            await asyncio.sleep(0.6)
            await ack()

    async def scenario(slack: SlackStandIn, app: AsyncApp, seen: list[Any]) -> None:
        slack.ack_timeout = 0.3
        delivery = await slack.slash_command(ALICE, CHANNEL, "/slow")
        assert delivery.timed_out
        assert not delivery.ok
        assert 0.3 <= delivery.latency < 1.0

    run(setup, scenario)
