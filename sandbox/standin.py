"""``SlackStandIn``: a local, stateful Slack at the network boundary.

Why: the bot's end-to-end tests (and the offline sandbox) need a Slack that keeps state,
refuses what Slack refuses, fails on demand, and talks to the bot's real HTTP endpoint or
Socket Mode client. The bot only changes its API base URL (``api_url``).

Routes served:

- ``/api/<method>``: the Web API (JSON, form or query parameters, like slack_sdk sends);
  ``Authorization: Bearer`` (or a ``token`` parameter) must be the bot token, or the app
  token for ``apps.connections.open``. Answers are HTTP 200 with ``ok`` true/false,
  except injected 429/5xx faults.
- ``/upload/<file_id>``: the upload URL of ``files.getUploadURLExternal``.
- ``/response/<id>``: ``response_url`` targets handed out with commands and clicks.
- ``/link/``: the Socket Mode WebSocket.
- with a ``SandboxPage`` passed to ``start``: ``/`` and ``/sandbox/...``, a web page that
  looks and behaves like a Slack channel (see ``web.py``).

With a ``state_file``, the workspace outlives the process, as Slack's outlives a bot's
restart: it is restored from the file when constructed, and written to it after every
change (a temporary file, then ``os.replace``, so a crash leaves the previous state whole).
A file that cannot be restored is moved aside to ``<name>.broken`` with a warning, and the
workspace starts empty.

Example:
    >>> standin = SlackStandIn(signing_secret="s3cret")
    >>> # await standin.start(); AsyncWebClient(token=standin.bot_token, base_url=standin.api_url)
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from aiohttp import web

from sandbox.blockkit import validate_blocks
from sandbox.calls import DROP_CONNECTION, NO_ANSWER, Call, CallLog, Fault, FaultPlan
from sandbox.delivery import Sender, Transport
from sandbox.errors import SlackApiFailure
from sandbox.person import PersonSide
from sandbox.scopes import Grants, read_manifest
from sandbox.socket_mode import SocketHub
from sandbox.webapi import APP_TOKEN_METHODS, WebApi
from sandbox.workspace import Ephemeral, StoredFile, Workspace

if TYPE_CHECKING:
    from sandbox.web import SandboxPage

__all__ = ["SlackStandIn"]

Json = dict[str, Any]
T = TypeVar("T")
log = logging.getLogger("countersign.sandbox")
_STRUCTURED = ("blocks", "view", "files", "metadata", "attachments")


class SlackStandIn(PersonSide):
    """A fake Slack workspace served over HTTP on 127.0.0.1.

    Args:
        signing_secret: signs requests to the bot; never logged.
        bot_token: the ``xoxb-`` token the bot must send.
        app_token: the ``xapp-`` token for ``apps.connections.open``.
        team_id, bot_user_id, bot_id, app_id: the identity ``auth.test`` reports.
        bot_endpoint: where HTTP deliveries go (the bot's ``/slack/events``).
        transport: ``http`` or ``socket``: how person-side actions reach the bot.
        ack_timeout: how long Slack waits for the bot's answer (3 s).
        clock: Unix time; inject a fake one to expire trigger ids without sleeping.
        state_file: where the workspace is kept between processes (JSON); None keeps it in
            memory only. ``restored`` says whether it was read back from there.
        should_escape: the slash command's manifest setting (``manifest.yml`` sets it):
            whether mentions, channels and links in its text are sent as Slack markup.
        grants: the bot scopes the app is installed with and the bot events it subscribes
            to (``sandbox.scopes``); by default those ``manifest.yml`` asks for, so a
            method called without its scope is ``missing_scope`` here as in Slack.
    """

    def __init__(
        self,
        *,
        signing_secret: str,
        bot_token: str = "xoxb-sandbox-bot-token",  # noqa: S107 (a fake)
        app_token: str = "xapp-1-sandbox-app-token",  # noqa: S107
        team_id: str = "T0001",
        bot_user_id: str = "UBOT",
        bot_id: str = "BBOT",
        app_id: str = "A0001",
        bot_endpoint: str = "http://127.0.0.1:3000/slack/events",
        transport: Transport = "http",
        ack_timeout: float = 3.0,
        clock: Callable[[], float] = time.time,
        state_file: Path | None = None,
        should_escape: bool = True,
        grants: Grants | None = None,
    ) -> None:
        self.should_escape = should_escape
        self.revoked = False  # revoke_token: the bot token answers token_revoked
        self.bot_token = bot_token
        self.app_token = app_token
        self.bot_endpoint = bot_endpoint
        self.workspace = Workspace(
            team_id=team_id, bot_user_id=bot_user_id, bot_id=bot_id, app_id=app_id, clock=clock
        )
        self.faults = FaultPlan()
        self.log = CallLog()
        self.hub = SocketHub(app_id)
        self.api = WebApi(
            self.workspace, self._root_url, self._socket_url, grants or read_manifest()
        )
        self._sender = Sender(
            transport=transport,
            endpoint=lambda: self.bot_endpoint,
            signing_secret=signing_secret,
            hub=self.hub,
            ack_timeout=ack_timeout,
            clock=clock,
        )
        self._clock = clock
        self._runner: web.AppRunner | None = None
        self._base_url: str | None = None
        self._condition: asyncio.Condition | None = None
        self._page: SandboxPage | None = None
        self._stopping = False
        self._released = asyncio.Event()  # set at stop: calls left without an answer end
        self.version = 0  # counts changes; the page's live updates follow it
        self.state_file = state_file
        self._saved: str | None = None  # the text last written, to skip writing it again
        self._save_failed = False
        self.restored = self._restore()

    @property
    def grants(self) -> Grants:
        return self.api.grants

    @grants.setter
    def grants(self, grants: Grants) -> None:
        self.api.grants = grants

    # -- lifecycle -------------------------------------------------------------------------

    async def start(
        self, host: str = "127.0.0.1", port: int = 0, *, page: SandboxPage | None = None
    ) -> str:
        """Serve on ``host:port`` (0 picks a free port); returns the base URL.

        With ``page``, the base URL is also a web page playing a Slack channel.
        """
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.add_routes(
            [
                web.route("*", "/api/{method}", self._on_api),
                web.post("/upload/{file_id}", self._on_upload),
                web.get("/files/{file_id}", self._on_download),
                web.post("/response/{url_id}", self._on_response_url),
                web.get("/link/", self.hub.handle),
            ]
        )
        if page is not None:
            app.add_routes(page.routes())
        self._page, self._stopping = page, False
        self._released = asyncio.Event()
        self._condition = asyncio.Condition()
        self._runner = web.AppRunner(app, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        bound = self._runner.addresses[0]
        self._base_url = f"http://{host}:{bound[1]}/"
        self.save()  # what was seeded since construction
        return self._base_url

    async def stop(self) -> None:
        """End the page's event streams, close sockets, the outgoing session and the server."""
        self._stopping = True
        self._released.set()
        await self._wake()
        if self._page is not None:
            await self._page.close()
        await self.hub.close()
        await self._sender.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        self.save()

    @property
    def base_url(self) -> str:
        if self._base_url is None:
            raise RuntimeError("the stand-in is not started")
        return self._base_url

    @property
    def api_url(self) -> str:
        """What the bot passes as slack_sdk's ``base_url``: ``http://127.0.0.1:PORT/api/``."""
        return self.base_url + "api/"

    @property
    def transport(self) -> Transport:
        return self._sender.transport

    @property
    def ack_timeout(self) -> float:
        """How long a delivery waits for the bot's answer before reporting a timeout."""
        return self._sender.ack_timeout

    @ack_timeout.setter
    def ack_timeout(self, seconds: float) -> None:
        self._sender.ack_timeout = seconds

    def _root_url(self) -> str:
        return self.base_url

    def _socket_url(self) -> str:
        return self.hub.issue_url("ws" + self.base_url[len("http") :])

    @property
    def stopping(self) -> bool:
        """True once ``stop()`` began: long waits (the page's event streams) should end."""
        return self._stopping

    async def _changed(self) -> None:
        self.version += 1
        self.save()
        await self._wake()

    async def _wake(self) -> None:
        if self._condition is not None:
            async with self._condition:
                self._condition.notify_all()

    # -- the state file --------------------------------------------------------------------

    def _restore(self) -> bool:
        path = self.state_file
        if path is None or not path.exists():
            return False
        try:
            self.workspace.restore_json(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:  # UnicodeDecodeError is a ValueError
            broken = path.with_name(path.name + ".broken")
            log.warning(
                "sandbox: cannot restore the workspace from %s (%s); moved it to %s and "
                "started with an empty workspace",
                path,
                exc,
                broken.name,
            )
            with contextlib.suppress(OSError):
                os.replace(path, broken)
            return False
        return True

    def save(self) -> None:
        """Write the workspace to ``state_file`` now, if there is one and it changed.

        Called after every change; a failure is logged (once until a write succeeds again)
        and not raised: the sandbox keeps working from memory.
        """
        if self.state_file is None:
            return
        text = self.workspace.to_json()
        if text == self._saved:
            return
        partial = self.state_file.with_name(self.state_file.name + ".tmp")
        try:
            self.state_file.parent.mkdir(parents=True, exist_ok=True)
            partial.write_text(text, encoding="utf-8")
            os.replace(partial, self.state_file)
        except OSError as exc:
            if not self._save_failed:
                log.warning("sandbox: cannot save the workspace to %s: %s", self.state_file, exc)
            self._save_failed = True
            return
        self._saved, self._save_failed = text, False

    # -- seeding, faults, queries ----------------------------------------------------------

    def add_channel(
        self, channel_id: str, name: str, members: list[str], *, bot_is_member: bool = True
    ) -> None:
        """A channel; the bot joins it unless told otherwise (then posts get not_in_channel)."""
        bot = [self.workspace.bot_user_id] if bot_is_member else []
        self.workspace.add_channel(channel_id, name, [*members, *bot])

    def archive_channel(self, channel_id: str) -> None:
        """Archive a channel: posts and edits there get ``is_archived``."""
        self.workspace.channel(channel_id).is_archived = True

    def revoke_token(self) -> None:
        """Revoke the bot token (the app uninstalled): every call with it gets
        ``token_revoked``, as Slack answers."""
        self.revoked = True

    def add_user(
        self, user_id: str, name: str, real_name: str | None = None, **traits: bool
    ) -> None:
        """A person; ``traits`` are ``Workspace.add_user``'s (``is_bot``, ``deleted``)."""
        self.workspace.add_user(user_id, name, real_name, **traits)

    def add_usergroup(self, group_id: str, members: list[str]) -> None:
        self.workspace.usergroups[group_id] = list(members)

    def fail_next(
        self,
        method: str,
        status: int = 429,
        retry_after: int = 1,
        times: int = 1,
        error: str | None = None,
        *,
        after_applying: bool = False,
        where: Callable[[Json], bool] | None = None,
    ) -> None:
        """Make the next ``times`` calls of ``method`` fail; see ``FaultPlan.fail_next``."""
        self.faults.fail_next(
            method,
            status=status,
            retry_after=retry_after,
            times=times,
            error=error,
            after_applying=after_applying,
            where=where,
        )

    def calls(self, method: str | None = None) -> list[Call]:
        return self.log.calls(method)

    def messages(self, channel: str) -> list[Json]:
        """Top-level messages and replies of ``channel``, oldest first."""
        return list(self.workspace.messages.get(channel, {}).values())

    def thread(self, channel: str, ts: str) -> list[Json]:
        return self.workspace.thread(channel, ts)

    def direct_messages(self, user: str) -> list[Json]:
        """What the bot said in its DM with ``user``, oldest first (none: no DM yet)."""
        return next(
            (
                self.messages(c.id)
                for c in self.workspace.channels.values()
                if c.is_im and user in c.members
            ),
            [],
        )

    def latest_message(self, channel: str) -> Json | None:
        found = self.messages(channel)
        return found[-1] if found else None

    def ephemerals(self, user: str) -> list[Ephemeral]:
        return [e for e in self.workspace.ephemerals if e.user == user]

    def open_views(self, user: str | None = None) -> list[Json]:
        """The modals open (a Home tab is not one: :meth:`home_view`)."""
        return [
            v.view
            for v in self.workspace.views.values()
            if v.is_open and user in (None, v.user) and v.view.get("type") != "home"
        ]

    def home_view(self, user: str) -> Json | None:
        """The Home tab the bot last published to ``user`` (``views.publish``), if any."""
        stored = self.workspace.home_view(user)
        return None if stored is None else stored.view

    def files(self) -> list[StoredFile]:
        return list(self.workspace.files.values())

    async def wait_for(self, predicate: Callable[[], T | None], timeout: float = 30.0) -> T:
        """Wait until ``predicate()`` returns something truthy (checked after each change)."""
        assert self._condition is not None, "start() the stand-in first"

        async def until() -> T:
            assert self._condition is not None
            async with self._condition:
                while not (result := predicate()):
                    await self._condition.wait()
                return result

        return await asyncio.wait_for(until(), timeout)

    async def wait_for_call(self, method: str, count: int = 1, timeout: float = 30.0) -> Call:
        """The ``count``-th call of ``method``, once it has arrived."""
        found = await self.wait_for(lambda: self.calls(method)[count - 1 : count], timeout)
        return found[0]

    async def wait_for_socket(self, timeout: float = 30.0) -> None:
        await self.hub.wait_connected(timeout)

    # -- HTTP handlers ---------------------------------------------------------------------

    async def _params(self, request: web.Request) -> dict[str, Any]:
        params: dict[str, Any] = dict(request.query)
        if request.method == "POST" and request.content_type == "application/json":
            body = await request.json()
            params.update(body if isinstance(body, dict) else {})
        elif request.method == "POST":
            form = await request.post()
            params.update({k: v for k, v in form.items() if isinstance(v, str)})
        return params

    def _token_error(self, method: str, request: web.Request, params: dict[str, Any]) -> str | None:
        header = request.headers.get("Authorization", "")
        token = header[len("Bearer ") :] if header.startswith("Bearer ") else params.get("token")
        if not token:
            return "not_authed"
        if token not in (self.bot_token, self.app_token):
            return "invalid_auth"
        if self.revoked and token == self.bot_token:
            return "token_revoked"
        if (token == self.app_token) != (method in APP_TOKEN_METHODS):
            return "not_allowed_token_type"
        return None

    async def _on_api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params = await self._params(request)
        error = self._token_error(method, request, params)
        params.pop("token", None)
        response: web.Response
        fault = self.faults.take(method, _decoded(params)) if error is None else None
        if error is not None:
            body: Json = {"ok": False, "error": error}
        elif fault is not None and fault.after_applying:
            return await self._lose_answer(request, method, params, fault)
        elif fault is not None and fault.status == 429:
            body = {"ok": False, "error": "ratelimited"}
            response = web.json_response(
                body, status=429, headers={"Retry-After": str(fault.retry_after)}
            )
            return await self._answered(method, params, body, response)
        elif fault is not None and fault.loses_answer:
            await self._record(method, params, {"ok": False, "error": fault.lost_answer}, fault)
            return await self._no_answer(request, fault)
        elif fault is not None:
            body = {"ok": False, "error": fault.error}
        else:
            body = self._apply(method, params)
        return await self._answered(method, params, body, web.json_response(body))

    def _apply(self, method: str, params: dict[str, Any]) -> Json:
        """Slack's answer to the call, with its changes made to the workspace."""
        try:
            return self.api.call(method, copy.deepcopy(params))  # log what was sent
        except SlackApiFailure as failure:
            body: Json = {"ok": False, "error": failure.code, **failure.fields}
            if failure.messages:
                body["errors"] = [m.removeprefix("[ERROR] ") for m in failure.messages]
                body["response_metadata"] = {"messages": failure.messages}
            return body

    async def _lose_answer(
        self, request: web.Request, method: str, params: dict[str, Any], fault: Fault
    ) -> web.Response:
        """Apply the call, then lose Slack's answer the way ``fault`` says.

        A call that Slack refuses (a bad argument) is answered as usual: nothing was
        applied, so there is no answer to lose.
        """
        body = self._apply(method, params)
        if not body.get("ok"):
            return await self._answered(method, params, body, web.json_response(body))
        lost = {"ok": False, "error": fault.lost_answer}
        await self._record(method, params, lost, fault, applied=True)
        return await self._no_answer(request, fault)

    async def _no_answer(self, request: web.Request, fault: Fault) -> web.Response:
        """A 5xx page, or no answer at all: the connection dropped, or left hanging."""
        if fault.status == NO_ANSWER:
            await self._released.wait()
        if fault.status in (DROP_CONNECTION, NO_ANSWER) and request.transport is not None:
            request.transport.abort()
        return web.Response(status=max(fault.status, 500), text="Internal Server Error")

    async def _answered(
        self, method: str, params: dict[str, Any], body: Json, response: web.Response
    ) -> web.Response:
        call = Call(
            method,
            _decoded(params),
            self._clock(),
            bool(body.get("ok")),
            body.get("error"),
            response.status,
        )
        self.log.record(call)
        await self._changed()
        return response

    async def _record(
        self,
        method: str,
        params: dict[str, Any],
        body: Json,
        fault: Fault,
        *,
        applied: bool = False,
    ) -> None:
        """Log a call whose answer a fault takes away (its status: the fault's)."""
        call = Call(
            method, _decoded(params), self._clock(), False, body.get("error"), fault.status, applied
        )
        self.log.record(call)
        await self._changed()

    async def _on_upload(self, request: web.Request) -> web.Response:
        stored = self.workspace.files.get(request.match_info["file_id"])
        if stored is None or stored.content is not None:
            return web.Response(status=404, text="upload URL not found or already used")
        stored.content = await request.read()
        self.log.record(
            Call(
                "upload",
                {"file_id": stored.id, "size": len(stored.content)},
                self._clock(),
                True,
                None,
                200,
            )
        )
        await self._changed()
        return web.Response(text=f"OK - {len(stored.content)}")

    async def _on_download(self, request: web.Request) -> web.Response:
        stored = self.workspace.files.get(request.match_info["file_id"])
        if stored is None or stored.content is None:
            return web.Response(status=404)
        return web.Response(body=stored.content)

    async def _on_response_url(self, request: web.Request) -> web.Response:
        """Apply a ``response_url`` post: ephemeral, in_channel, replace or delete original."""
        params = await self._params(request)
        try:
            record = self.workspace.use_response_url(request.match_info["url_id"])
            fail_blocks = validate_blocks(params["blocks"]) if "blocks" in params else []
            if fail_blocks:
                raise SlackApiFailure("invalid_blocks", [p.slack_line() for p in fail_blocks])
            self._respond(
                record_user=record.user,
                channel=record.channel,
                params=params,
                thread_ts=record.thread_ts,
                message_ts=record.message_ts,
                is_ephemeral=record.is_ephemeral,
            )
        except SlackApiFailure as failure:
            body: Json = {"ok": False, "error": failure.code}
            status = 404 if failure.code in ("invalid_url", "used_url") else 400
            return await self._answered(
                "response_url", params, body, web.json_response(body, status=status)
            )
        body = {"ok": True}
        return await self._answered("response_url", params, body, web.json_response(body))

    def _respond(
        self,
        *,
        record_user: str,
        channel: str,
        params: Json,
        thread_ts: str | None,
        message_ts: str | None,
        is_ephemeral: bool,
    ) -> None:
        fields = {"text": params.get("text", ""), "blocks": params.get("blocks", [])}
        where = self.workspace.channel(channel)
        if params.get("delete_original") and message_ts:
            self.workspace.messages[where.id].pop(message_ts, None)
            self.workspace.ephemerals = [e for e in self.workspace.ephemerals if e.ts != message_ts]
        elif params.get("replace_original") and message_ts and not is_ephemeral:
            self.workspace.update(where.id, message_ts, fields)
        elif params.get("replace_original") and message_ts:
            for e in self.workspace.ephemerals:
                if e.ts == message_ts:
                    e.text, e.blocks = fields["text"], fields["blocks"]
        elif params.get("response_type") == "in_channel":
            self.workspace.post(
                where,
                self.workspace.bot_user_id,
                fields,
                thread_ts=params.get("thread_ts") or thread_ts,
            )
        else:
            self.workspace.ephemerals.append(
                Ephemeral(
                    record_user,
                    where.id,
                    self.workspace.next_ts(),
                    fields["text"],
                    fields["blocks"],
                    params.get("thread_ts") or thread_ts,
                )
            )


def _decoded(params: dict[str, Any]) -> dict[str, Any]:
    """The parameters with JSON-encoded arguments (form bodies) decoded, as tests read them."""
    decoded = dict(params)
    for key in _STRUCTURED:
        if isinstance(decoded.get(key), str):
            with contextlib.suppress(ValueError):
                decoded[key] = json.loads(decoded[key])
    return decoded
