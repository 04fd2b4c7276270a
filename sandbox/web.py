"""``SandboxPage``: a web page, served by the stand-in, that looks and behaves like a Slack channel.

Why: a newcomer with no Slack workspace can use the bot from a browser. The page changes
nothing itself: each thing a person does goes through the person-side actions
(``person.py``), so the bot is reached exactly as Slack reaches it (signed requests to its
endpoint), and what the page shows is the workspace the bot changed through the Web API.

Routes, added to the stand-in's server by ``SlackStandIn.start(page=...)``:

- ``GET /``: the page; ``GET /sandbox/page/...``: its script and style (``page/``).
- ``GET /sandbox/state``: what the page's person sees (:func:`snapshot`).
- ``GET /sandbox/events``: Server-Sent Events, ``{"version": n}`` after each change.
- ``POST /sandbox/send`` ``{text, thread_ts?}``: a message, or a slash command when
  ``text`` starts with ``/``.
- ``POST /sandbox/click`` ``{ts, action_id, block_id?, value?}``: a button or a menu.
- ``POST /sandbox/submit`` ``{view_id, values: {block_id: value}}``: a modal's submit.
- ``POST /sandbox/close`` ``{view_id}``: a modal's close button.

Actions answer ``{"ok": true}`` or ``{"ok": false, "error": "words for a person"}`` (and
``errors`` by ``block_id`` when the bot refused a modal's fields); a malformed request is
answered 400 with the same shape, never a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import aiohttp
from aiohttp import web

from sandbox.delivery import Delivery
from sandbox.errors import MessageChanged, PersonActionRefused, SlackApiFailure
from sandbox.pagestate import snapshot

if TYPE_CHECKING:
    from sandbox.standin import SlackStandIn

__all__ = ["PAGE_DIR", "SandboxPage"]

Json = dict[str, Any]

PAGE_DIR = Path(__file__).parent / "page"
KEEP_ALIVE = 15.0  # seconds between comments on an idle event stream, to notice gone browsers
CLOSE_TIMEOUT = 2.0  # how long stop() waits for the event streams to end
COMMAND = re.compile(r"(/[^\s/]+)(?:\s+(.*))?", re.DOTALL)
# What the transport raises when the bot's endpoint is down (refused, reset), or when no
# Socket Mode client connects in time.
UNREACHABLE = (aiohttp.ClientError, OSError, TimeoutError)
MODAL_TROUBLE = "We had some trouble connecting. Try again?"  # Slack's words in a modal
# A click from a page that showed an old copy of the message (a tab that missed updates).
MESSAGE_CHANGED = (
    "This message has changed since your page showed it, so your click was not sent. "
    "It now shows as it is: look again, then try."
)


class SandboxPage:
    """The routes of the sandbox page, acting as ``user`` in ``channel``.

    Args:
        standin: the stand-in that serves the page and whose workspace it shows.
        user: the person at the browser (a user id seeded in the workspace).
        channel: the channel the page shows (seeded, with ``user`` a member).
        title: the workspace name in the sidebar.

    Example:
        >>> page = SandboxPage(standin, user="U0YOU", channel="C0DEMO")  # doctest: +SKIP
        >>> url = await standin.start(page=page)  # doctest: +SKIP
    """

    def __init__(
        self,
        standin: SlackStandIn,
        *,
        user: str,
        channel: str,
        title: str = "Countersign sandbox",
    ) -> None:
        self.standin = standin
        self.user = user
        self.channel = channel
        self.title = title
        self._streams: set[asyncio.Future[None]] = set()

    def routes(self) -> list[web.AbstractRouteDef]:
        return [
            web.get("/", self._on_index),
            web.get("/favicon.ico", self._on_favicon),
            web.static("/sandbox/page", PAGE_DIR),
            web.get("/sandbox/state", self._on_state),
            web.get("/sandbox/events", self._on_events),
            web.post("/sandbox/send", self._on_send),
            web.post("/sandbox/click", self._on_click),
            web.post("/sandbox/submit", self._on_submit),
            web.post("/sandbox/close", self._on_close),
            web.post("/sandbox/home", self._on_home),
        ]

    async def close(self) -> None:
        """Wait, briefly, for the event streams to end (``SlackStandIn.stop`` woke them)."""
        if self._streams:
            await asyncio.wait(list(self._streams), timeout=CLOSE_TIMEOUT)

    # -- reading ---------------------------------------------------------------------------

    async def _on_index(self, request: web.Request) -> web.StreamResponse:
        return web.FileResponse(PAGE_DIR / "index.html", headers={"Cache-Control": "no-cache"})

    async def _on_favicon(self, request: web.Request) -> web.Response:
        return web.Response(status=204)  # none; a 404 would be an error in the browser's console

    async def _on_state(self, request: web.Request) -> web.Response:
        try:
            state = snapshot(
                self.standin.workspace,
                user=self.user,
                channel=self.channel,
                version=self.standin.version,
                title=self.title,
            )
        except SlackApiFailure as failure:
            return _answer(f"the sandbox is not seeded: {failure.code}", status=404)
        return web.json_response(state, headers={"Cache-Control": "no-store"})

    async def _on_events(self, request: web.Request) -> web.StreamResponse:
        """``data: {"version": n}`` now and after each change, until the stand-in stops."""
        standin = self.standin
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store"}
        )
        await response.prepare(request)
        ended = asyncio.get_running_loop().create_future()
        self._streams.add(ended)
        seen: int | None = None

        def moved() -> bool:
            return standin.stopping or standin.version != seen

        try:
            await response.write(b"retry: 1000\n\n")
            while not standin.stopping:
                if standin.version != seen:
                    seen = standin.version
                    await response.write(f"data: {json.dumps({'version': seen})}\n\n".encode())
                else:
                    await response.write(b": keep-alive\n\n")
                with contextlib.suppress(TimeoutError):
                    await standin.wait_for(moved, KEEP_ALIVE)
        except ConnectionResetError:
            pass  # the browser went away
        finally:
            ended.set_result(None)
            self._streams.discard(ended)
        return response

    # -- acting ----------------------------------------------------------------------------

    async def _on_send(self, request: web.Request) -> web.Response:
        body = await _body(request)
        text = _string(body, "text")
        thread_ts = _optional(body, "thread_ts")
        if not text.strip():
            _bad("'text' is empty")
        command = COMMAND.fullmatch(text.strip())
        if command is not None:
            return await self._command(command[1], command[2] or "")
        try:
            delivery = await self.standin.send_message(
                self.user, self.channel, text, thread_ts=thread_ts
            )
        except PersonActionRefused as refused:
            return _answer(str(refused))
        except UNREACHABLE:
            return _answer(warning=_unanswered(None))
        # Slack shows the message whatever the bot answered (it retries the event later).
        return _answer(warning=_unanswered(delivery))

    async def _command(self, command: str, text: str) -> web.Response:
        """Run ``/command text`` in the channel; a failure is shown the way Slack shows it.

        Slack also runs a command typed in a thread's composer, but its payload names only
        the channel, so it runs (and answers) as a channel command.
        """
        try:
            delivery: Delivery | None = await self.standin.slash_command(
                self.user, self.channel, command, text
            )
        except PersonActionRefused as refused:
            return _answer(str(refused))
        except UNREACHABLE:
            delivery = None
        code = _error_code(delivery)
        if code is None and delivery is not None and delivery.problems:
            code = "invalid_blocks"
        if code is None:
            return _answer()
        words = f'{command} failed with the error "{code}"'
        await self.standin.slack_says(self.user, self.channel, words)
        return _answer(words)

    async def _on_click(self, request: web.Request) -> web.Response:
        body = await _body(request)
        ts, action_id = _string(body, "ts"), _string(body, "action_id")
        try:
            delivery = await self.standin.click_button(
                self.user,
                self.channel,
                ts,
                action_id,
                block_id=_optional(body, "block_id"),
                value=_optional(body, "value"),
            )
        except MessageChanged:
            return _answer(MESSAGE_CHANGED)
        except PersonActionRefused as refused:
            return _answer(str(refused))
        except UNREACHABLE:
            return _answer(_unanswered(None))
        return _answer(_unanswered(delivery))

    async def _on_submit(self, request: web.Request) -> web.Response:
        body = await _body(request)
        view_id = _string(body, "view_id")
        values = _values(body.get("values", {}))
        try:
            delivery = await self.standin.submit_view(self.user, view_id, values)
        except PersonActionRefused as refused:
            return _answer(str(refused))
        except UNREACHABLE:
            return _answer(MODAL_TROUBLE)
        if not delivery.ok:
            return _answer(f"{MODAL_TROUBLE} ({_error_code(delivery)})")
        answer = delivery.json if isinstance(delivery.json, dict) else {}
        if delivery.problems:
            return _answer("The bot's answer broke Slack's rules: " + "; ".join(delivery.problems))
        if answer.get("response_action") == "errors":
            errors = answer.get("errors")
            fields = {str(k): str(v) for k, v in errors.items()} if isinstance(errors, dict) else {}
            return web.json_response(
                {"ok": False, "error": "Some fields need another look.", "errors": fields}
            )
        return _answer()

    async def _on_close(self, request: web.Request) -> web.Response:
        body = await _body(request)
        view_id = _string(body, "view_id")
        try:
            delivery = await self.standin.close_view(self.user, view_id)
        except PersonActionRefused as refused:
            return _answer(str(refused))
        except UNREACHABLE:
            return _answer(warning=_unanswered(None))
        return _answer(warning=_unanswered(delivery) if delivery is not None else None)

    async def _on_home(self, request: web.Request) -> web.Response:
        """The person opens the app's Home tab (``app_home_opened``); the bot publishes it."""
        try:
            delivery = await self.standin.open_home(self.user)
        except PersonActionRefused as refused:
            return _answer(str(refused))
        except UNREACHABLE:
            return _answer(warning=_unanswered(None))
        return _answer(warning=_unanswered(delivery))


# -- answers ---------------------------------------------------------------------------------


def _answer(
    error: str | None = None, *, warning: str | None = None, status: int = 200
) -> web.Response:
    body: Json = {"ok": error is None}
    if error is not None:
        body["error"] = error
    if warning is not None:
        body["warning"] = warning
    return web.json_response(body, status=status)


def _error_code(delivery: Delivery | None) -> str | None:
    """Slack's code for a request the bot did not answer well (None: it did)."""
    if delivery is not None and delivery.timed_out:
        return "operation_timeout"
    if delivery is None or not delivery.ok:
        return "dispatch_failed"
    return None


def _unanswered(delivery: Delivery | None) -> str | None:
    """What Slack's client says (roughly) when the bot did not answer well (None: it did)."""
    code = _error_code(delivery)
    if code is None:
        return None
    if delivery is None:
        return f"The bot could not be reached; is it running? ({code})"
    if delivery.timed_out:
        return f"The bot did not answer within {delivery.latency:.0f} s ({code})."
    return f"The bot answered with HTTP {delivery.status} ({code})."


# -- request bodies --------------------------------------------------------------------------


def _bad(message: str) -> NoReturn:
    raise web.HTTPBadRequest(
        text=json.dumps({"ok": False, "error": message}), content_type="application/json"
    )


async def _body(request: web.Request) -> Json:
    try:
        body = await request.json()
    except ValueError:  # also a body that is not UTF-8
        _bad("the body must be JSON")
    if not isinstance(body, dict):
        _bad("the body must be a JSON object")
    return body


def _string(body: Json, key: str) -> str:
    value = body.get(key)
    if not isinstance(value, str) or not value:
        _bad(f"{key!r} must be a non-empty string")
    return value


def _optional(body: Json, key: str) -> str | None:
    value = body.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        _bad(f"{key!r} must be a string")
    return value


def _values(values: Any) -> dict[str, str | list[str] | None]:
    """A modal's inputs by ``block_id``: text or an option's value, or a list of values."""
    if not isinstance(values, dict):
        _bad("'values' must be an object of block_id to value")
    for block_id, value in values.items():
        single = value is None or isinstance(value, str)
        if not single and not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            _bad(f"the value of {block_id!r} must be a string or a list of strings")
    return values
