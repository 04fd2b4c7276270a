"""The sandbox page's routes, driven over HTTP as the page's script drives them, against a real
Bolt ``AsyncApp`` that checks the stand-in's signatures (as the bot does).

What the page does must reach the bot exactly as Slack would (a signed command, event, click
or submission), and what the page reads must be the workspace the bot changed through the
Web API; so each scenario acts through a route and asserts on what the bot received, on the
stand-in's state, and on the next ``/sandbox/state``.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import time
import urllib.request
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
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
from slack_sdk import WebClient

from sandbox import SandboxPage, SlackStandIn, StandInThread
from sandbox.web import MESSAGE_CHANGED

Json = dict[str, Any]


class Browser:
    """What the page's script does: read the state, post actions as JSON."""

    def __init__(self, session: aiohttp.ClientSession, base_url: str) -> None:
        self.session = session
        self.base_url = base_url

    async def state(self) -> Json:
        async with self.session.get(self.base_url + "sandbox/state") as response:
            assert response.status == 200
            body: Json = await response.json()
            return body

    async def post(self, route: str, body: Any, *, status: int = 200) -> Json:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        async with self.session.post(
            self.base_url + route, data=data, headers={"Content-Type": "application/json"}
        ) as response:
            answer: Json = await response.json()
            assert response.status == status, answer
            return answer


Scenario = Callable[[SlackStandIn, AsyncApp, Browser, list[Any]], Awaitable[None]]
Setup = Callable[[AsyncApp, list[Any]], None]

MODAL = {
    "type": "modal",
    "callback_id": "feedback",
    "notify_on_close": True,
    "title": {"type": "plain_text", "text": "Request changes"},
    "submit": {"type": "plain_text", "text": "Send"},
    "close": {"type": "plain_text", "text": "Cancel"},
    "blocks": [
        {
            "type": "input",
            "block_id": "text",
            "label": {"type": "plain_text", "text": "What should change?"},
            "element": {"type": "plain_text_input", "action_id": "value", "multiline": True},
        },
        {
            "type": "input",
            "block_id": "severity",
            "optional": True,
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
    ],
}


def run(setup: Setup, scenario: Scenario, *, bot: bool = True) -> None:
    """The stand-in serving the page for ALICE in CHANNEL, a Bolt app, and a browser."""

    async def main() -> None:
        standin = new_standin()
        page = SandboxPage(standin, user=ALICE, channel=CHANNEL)
        async with running(standin, page) as slack, aiohttp.ClientSession() as session:
            app = bolt_app(slack)
            seen: list[Any] = []
            setup(app, seen)
            browser = Browser(session, slack.base_url)
            async with serving(app, slack):
                await asyncio.wait_for(scenario(slack, app, browser, seen), 20)

    asyncio.run(main())


def no_listeners(app: AsyncApp, seen: list[Any]) -> None:
    """A bot that answers nothing (Bolt says 404 to what no listener handles)."""


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_the_page_and_its_assets_are_served() -> None:
    async def scenario(slack: SlackStandIn, app: AsyncApp, browser: Browser, _: Any) -> None:
        async with browser.session.get(slack.base_url) as response:
            assert response.status == 200
            assert response.content_type == "text/html"
            html = await response.text()
        assert '<script src="/sandbox/page/app.js"' in html
        assert 'href="/sandbox/page/style.css"' in html
        async with browser.session.get(slack.base_url + "favicon.ico") as response:
            assert response.status == 204  # not a 404 in the browser's console
        served = {}
        for asset, kind in [("app.js", "javascript"), ("style.css", "text/css")]:
            async with browser.session.get(f"{slack.base_url}sandbox/page/{asset}") as response:
                assert response.status == 200
                assert kind in response.content_type
                served[asset] = await response.text()
        # Message text is untrusted (an LLM wrote it): the DOM is built from text nodes.
        assert not re.search(
            r"\.(inner|outer)HTML\b|insertAdjacentHTML|document\.write", served["app.js"]
        )
        assert "new EventSource(" in served["app.js"]
        assert "url(http" not in served["style.css"]  # offline: no external fonts or images

    run(no_listeners, scenario)


def test_state_shows_the_channel_as_the_person_sees_it() -> None:
    async def scenario(slack: SlackStandIn, app: AsyncApp, browser: Browser, _: Any) -> None:
        client = app.client
        root = await client.chat_postMessage(channel=CHANNEL, text="Run r1", blocks=APPROVAL_BLOCKS)
        reply = await client.chat_postMessage(channel=CHANNEL, thread_ts=root["ts"], text="v2")
        await client.chat_update(channel=CHANNEL, ts=reply["ts"], text="v2, edited")
        await client.chat_postEphemeral(channel=CHANNEL, user=ALICE, text="only you")
        await client.chat_postEphemeral(channel=CHANNEL, user=BOB, text="only bob")
        await client.files_upload_v2(
            channel=CHANNEL, thread_ts=root["ts"], content="# Draft", filename="draft.md"
        )
        await slack.send_message(BOB, CHANNEL, "hi all")

        state = await browser.state()

        assert state["version"] == slack.version > 0
        assert state["channel"] == {"id": CHANNEL, "name": "reviews"}
        assert state["me"] == {"id": ALICE, "name": "Alice Liddell"}
        assert state["users"][ALICE] == "Alice Liddell"
        assert state["users"]["UBOT"] == "bot"
        root_shown, bobs = state["messages"]
        assert (root_shown["ts"], root_shown["is_bot"]) == (root["ts"], True)
        assert root_shown["blocks"][0]["text"]["text"] == "*Draft v1* is ready"
        assert root_shown["reply_count"] == 2
        edited, upload = root_shown["replies"]
        assert (edited["ts"], edited["text"], edited["edited"]) == (reply["ts"], "v2, edited", True)
        file_id = upload["files"][0]["id"]
        assert upload["files"][0]["url"] == f"/files/{file_id}"
        assert (bobs["user"], bobs["text"], bobs["reply_count"]) == (BOB, "hi all", 0)
        assert [(e["text"], e["user"], e["ephemeral"]) for e in state["ephemerals"]] == [
            ("only you", "UBOT", True)
        ]
        assert state["files"] == [{**upload["files"][0], "ts": upload["ts"]}]
        async with browser.session.get(slack.base_url + f"files/{file_id}") as response:
            assert await response.read() == b"# Draft"
        assert state["views"] == []

    run(no_listeners, scenario)


def test_send_runs_commands_and_posts_messages_and_thread_replies() -> None:
    def setup(app: AsyncApp, seen: list[Any]) -> None:
        @app.command("/crew")
        async def command(ack: Any, command: Json) -> None:
            seen.append(command)
            await ack(f"Starting *{command['text']}*")

        @app.event("message")
        async def message(event: Json) -> None:
            seen.append(event)

    async def scenario(slack: SlackStandIn, app: AsyncApp, browser: Browser, seen: Any) -> None:
        assert await browser.post("sandbox/send", {"text": "/crew run writer topic=otters"}) == {
            "ok": True
        }
        command = seen[0]
        assert (command["command"], command["text"]) == ("/crew", "run writer topic=otters")
        assert (command["user_id"], command["channel_id"]) == (ALICE, CHANNEL)
        state = await browser.state()
        assert [e["text"] for e in state["ephemerals"]] == ["Starting *run writer topic=otters*"]
        assert state["messages"] == []  # Slack does not post the command itself

        assert await browser.post("sandbox/send", {"text": "hello\nbot"}) == {"ok": True}
        event = await slack.wait_for(lambda: seen[1] if len(seen) > 1 else None)
        assert (event["text"], event["user"], event.get("thread_ts")) == ("hello\nbot", ALICE, None)
        parent = event["ts"]
        answer = await browser.post("sandbox/send", {"text": "in thread", "thread_ts": parent})
        assert answer == {"ok": True}
        reply = await slack.wait_for(lambda: seen[2] if len(seen) > 2 else None)
        assert (reply["text"], reply["thread_ts"]) == ("in thread", parent)
        state = await browser.state()
        assert [m["text"] for m in state["messages"]] == ["hello\nbot"]
        assert [r["text"] for r in state["messages"][0]["replies"]] == ["in thread"]

        # A command typed in a thread runs as a channel command (its payload has no thread).
        answer = await browser.post("sandbox/send", {"text": "/crew list", "thread_ts": parent})
        assert answer == {"ok": True}
        assert (seen[3]["text"], seen[3]["channel_id"]) == ("list", CHANNEL)

        refused = await browser.post("sandbox/send", {"text": "x", "thread_ts": "1.000100"})
        assert refused["ok"] is False
        assert "thread_not_found" in refused["error"]

    run(setup, scenario)


def test_a_command_the_bot_fails_is_shown_as_slack_shows_it() -> None:
    def setup(app: AsyncApp, seen: list[Any]) -> None:
        @app.command("/slow")
        async def slow(ack: Any) -> None:
            await asyncio.sleep(0.6)
            await ack()

    async def scenario(slack: SlackStandIn, app: AsyncApp, browser: Browser, _: Any) -> None:
        failed = await browser.post("sandbox/send", {"text": "/crew help"})
        assert failed == {"ok": False, "error": '/crew failed with the error "dispatch_failed"'}
        slack.ack_timeout = 0.3
        slow = await browser.post("sandbox/send", {"text": "/slow"})
        assert slow["error"] == '/slow failed with the error "operation_timeout"'
        state = await browser.state()
        assert [(e["user"], e["text"]) for e in state["ephemerals"]] == [
            ("USLACKBOT", '/crew failed with the error "dispatch_failed"'),
            ("USLACKBOT", '/slow failed with the error "operation_timeout"'),
        ]
        assert state["users"]["USLACKBOT"] == "Slackbot"
        # A message reaches the channel even when the bot does not take the event.
        unheard = await browser.post("sandbox/send", {"text": "anyone?"})
        assert unheard["ok"] is True
        assert "HTTP 404" in unheard["warning"]
        assert [m["text"] for m in (await browser.state())["messages"]] == ["anyone?"]

        slack.bot_endpoint = f"http://127.0.0.1:{closed_port()}/slack/events"
        down = await browser.post("sandbox/send", {"text": "/crew run writer"})
        assert down["error"] == '/crew failed with the error "dispatch_failed"'
        unsent = await browser.post("sandbox/send", {"text": "still there?"})
        assert (unsent["ok"], "could not be reached" in unsent["warning"]) == (True, True)

    run(setup, scenario)


def test_click_reaches_the_bot_and_its_update_shows() -> None:
    def setup(app: AsyncApp, seen: list[Any]) -> None:
        @app.action("approve")
        async def approve(ack: Any, body: Json, client: Any) -> None:
            seen.append(body["actions"][0])  # before the ack, which ends the click's request
            await ack()
            container = body["container"]
            await client.chat_update(
                channel=container["channel_id"], ts=container["message_ts"], text="Approved"
            )

        @app.action("verdict")
        async def verdict(ack: Any, action: Json) -> None:
            seen.append(action)
            await ack()

    async def scenario(slack: SlackStandIn, app: AsyncApp, browser: Browser, seen: Any) -> None:
        posted = await app.client.chat_postMessage(
            channel=CHANNEL, text="d", blocks=APPROVAL_BLOCKS
        )
        ts = posted["ts"]
        click = {"ts": ts, "action_id": "approve", "block_id": "review"}
        assert await browser.post("sandbox/click", click) == {"ok": True}
        assert (seen[0]["value"], seen[0]["block_id"]) == ("review:r1:v1", "review")
        await slack.wait_for(lambda: slack.calls("chat.update"))
        assert (await browser.state())["messages"][0]["text"] == "Approved"

        choose = {"ts": ts, "action_id": "verdict", "block_id": "review", "value": "bad"}
        assert await browser.post("sandbox/click", choose) == {"ok": True}
        assert seen[1]["selected_option"]["value"] == "bad"

        missing = await browser.post("sandbox/click", {"ts": ts, "action_id": "reject"})
        assert missing == {"ok": False, "error": MESSAGE_CHANGED}
        slack.bot_endpoint = f"http://127.0.0.1:{closed_port()}/slack/events"
        down = await browser.post("sandbox/click", click)
        assert down["ok"] is False
        assert "could not be reached" in down["error"]

    run(setup, scenario)


def test_opening_home_reaches_the_bot_and_its_published_view_shows() -> None:
    """The page's Home link sends ``app_home_opened``; what the bot publishes is the state's
    ``home``, not one of the modals."""
    home = {
        "type": "home",
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": "hi"}}],
    }

    def setup(app: AsyncApp, seen: list[Any]) -> None:
        @app.event("app_home_opened")
        async def opened(event: Json, client: Any) -> None:
            seen.append(event)
            await client.views_publish(user_id=event["user"], view=home)

    async def scenario(slack: SlackStandIn, app: AsyncApp, browser: Browser, seen: Any) -> None:
        assert (await browser.state())["home"] is None
        assert await browser.post("sandbox/home", {}) == {"ok": True}
        assert (seen[0]["user"], seen[0]["tab"]) == (ALICE, "home")
        await slack.wait_for(lambda: slack.calls("views.publish"))
        state = await browser.state()
        assert state["home"]["blocks"][0]["text"]["text"] == "hi" and state["views"] == []
        await browser.post("sandbox/home", {})
        assert seen[1]["view"]["id"] == state["home"]["id"]  # opened again: the view shown

    run(setup, scenario)


def test_a_click_from_a_stale_page_says_the_message_changed_and_reaches_nobody() -> None:
    """A tab that missed an update still shows the buttons the bot has taken away (or a
    message it deleted): its click reaches no bot, and the person is told in words."""

    def setup(app: AsyncApp, seen: list[Any]) -> None:
        @app.action("approve")
        async def approve(ack: Any, body: Json) -> None:
            seen.append(body)
            await ack()

    async def scenario(slack: SlackStandIn, app: AsyncApp, browser: Browser, seen: Any) -> None:
        posted = await app.client.chat_postMessage(
            channel=CHANNEL, text="d", blocks=APPROVAL_BLOCKS
        )
        decided = [{"type": "section", "text": {"type": "mrkdwn", "text": "Approved by Bob"}}]
        await app.client.chat_update(channel=CHANNEL, ts=posted["ts"], text="A", blocks=decided)
        click = {"ts": posted["ts"], "action_id": "approve", "block_id": "review"}
        stale = await browser.post("sandbox/click", click)
        assert stale == {"ok": False, "error": MESSAGE_CHANGED}
        assert "action_id" not in stale["error"]
        await app.client.chat_delete(channel=CHANNEL, ts=posted["ts"])
        assert await browser.post("sandbox/click", click) == stale
        assert seen == []

    run(setup, scenario)


def test_submit_shows_the_bots_errors_then_closes_and_close_notifies() -> None:
    def setup(app: AsyncApp, seen: list[Any]) -> None:
        @app.command("/crew")
        async def command(ack: Any, body: Json, client: Any) -> None:
            await ack()
            await client.views_open(trigger_id=body["trigger_id"], view=MODAL)

        @app.view("feedback")
        async def submitted(ack: Any, view: Json) -> None:
            values = view["state"]["values"]
            seen.append(values)
            if len(values["text"]["value"]["value"]) < 5:
                await ack(response_action="errors", errors={"text": "Say a little more"})
            else:
                await ack()

        @app.view_closed("feedback")
        async def closed(ack: Any, view: Json) -> None:
            seen.append(("closed", view["id"]))
            await ack()

    async def scenario(slack: SlackStandIn, app: AsyncApp, browser: Browser, seen: Any) -> None:
        await browser.post("sandbox/send", {"text": "/crew changes r1"})
        await slack.wait_for(lambda: slack.open_views(ALICE))
        (view,) = (await browser.state())["views"]
        assert view["title"]["text"] == "Request changes"
        view_id = view["id"]

        short = await browser.post(
            "sandbox/submit", {"view_id": view_id, "values": {"text": "meh"}}
        )
        assert short["ok"] is False
        assert short["errors"] == {"text": "Say a little more"}
        assert [v["id"] for v in (await browser.state())["views"]] == [view_id]

        empty = await browser.post("sandbox/submit", {"view_id": view_id, "values": {"text": ""}})
        assert empty["ok"] is False
        assert "required" in empty["error"]
        assert len(seen) == 1  # Slack's client does not send an empty required field

        values = {"text": "Cite your sources", "severity": "major"}
        assert await browser.post("sandbox/submit", {"view_id": view_id, "values": values}) == {
            "ok": True
        }
        assert seen[-1]["severity"]["pick"]["selected_option"]["value"] == "major"
        assert (await browser.state())["views"] == []
        gone = await browser.post("sandbox/submit", {"view_id": view_id, "values": values})
        assert "no open modal" in gone["error"]

        await browser.post("sandbox/send", {"text": "/crew changes r2"})
        (again,) = await slack.wait_for(lambda: slack.open_views(ALICE))
        assert await browser.post("sandbox/close", {"view_id": again["id"]}) == {"ok": True}
        assert (await browser.state())["views"] == []
        await slack.wait_for(lambda: ("closed", again["id"]) in seen)

    run(setup, scenario)


def test_events_stream_a_version_on_each_change_and_end_when_the_standin_stops() -> None:
    async def next_version(response: aiohttp.ClientResponse) -> int:
        async for line in response.content:
            if line.startswith(b"data: "):
                version: int = json.loads(line[len(b"data: ") :])["version"]
                return version
        raise AssertionError("the stream ended")

    async def scenario(slack: SlackStandIn, app: AsyncApp, browser: Browser, _: Any) -> None:
        async with browser.session.get(slack.base_url + "sandbox/events") as response:
            assert response.content_type == "text/event-stream"
            first = await asyncio.wait_for(next_version(response), 2)
            assert first == slack.version
            await app.client.chat_postMessage(channel=CHANNEL, text="news")
            second = await asyncio.wait_for(next_version(response), 2)
            assert second > first
            assert (await browser.state())["version"] == second

            started = time.monotonic()
            await asyncio.wait_for(slack.stop(), 5)
            assert time.monotonic() - started < 2  # no wait for aiohttp's shutdown timeout
            rest = await asyncio.wait_for(response.content.read(), 2)  # returns at the end
            assert rest.strip() == b""

    run(no_listeners, scenario)


@pytest.mark.parametrize(
    ("route", "body", "words"),
    [
        ("sandbox/send", b"{not json", "JSON"),
        ("sandbox/send", b"\xff\xfe", "JSON"),
        ("sandbox/send", [1, 2], "object"),
        ("sandbox/send", {}, "'text'"),
        ("sandbox/send", {"text": 5}, "'text'"),
        ("sandbox/send", {"text": "  "}, "empty"),
        ("sandbox/send", {"text": "hi", "thread_ts": 1.5}, "'thread_ts'"),
        ("sandbox/click", {"ts": "1.000100"}, "'action_id'"),
        ("sandbox/click", {"ts": "1.000100", "action_id": "a", "value": ["x"]}, "'value'"),
        ("sandbox/submit", {"values": {}}, "'view_id'"),
        ("sandbox/submit", {"view_id": "V1", "values": ["x"]}, "'values'"),
        ("sandbox/submit", {"view_id": "V1", "values": {"fb": 3}}, "'fb'"),
        ("sandbox/close", {"view": "V1"}, "'view_id'"),
    ],
)
def test_a_malformed_request_is_a_400_that_says_why(route: str, body: Any, words: str) -> None:
    async def scenario(slack: SlackStandIn, app: AsyncApp, browser: Browser, _: Any) -> None:
        answer = await browser.post(route, body, status=400)
        assert answer["ok"] is False
        assert words in answer["error"]
        assert slack.calls() == []  # nothing reached the bot or changed the workspace

    run(no_listeners, scenario)


def test_the_threaded_standin_serves_the_page_too() -> None:
    standin = new_standin()
    page = SandboxPage(standin, user=BOB, channel=CHANNEL, title="Team")
    with StandInThread(standin, page=page) as slack:
        bot = WebClient(token=standin.bot_token, base_url=slack.api_url, timeout=5)
        bot.chat_postMessage(channel=CHANNEL, text="hi bob")
        with urllib.request.urlopen(slack.base_url + "sandbox/state", timeout=5) as response:
            state = json.load(response)
    assert (state["workspace"]["name"], state["me"]["id"]) == ("Team", BOB)
    assert [m["text"] for m in state["messages"]] == ["hi bob"]
