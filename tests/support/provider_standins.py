"""Local stand-ins for Anthropic's Messages API and Gemini's generateContent API.

Like ``tests/support/openai_standin.py``, each is an HTTP server on 127.0.0.1 that CrewAI's native
provider reaches through its SDK (``anthropic``: ``ANTHROPIC_BASE_URL``; ``google-genai``:
``GOOGLE_GEMINI_BASE_URL``), so a test takes the real path: HTTP, the SDK's parsing, its
streaming, CrewAI's own handling of each provider's response objects. Answers come from the
same scripts (:class:`tests.support.openai_standin.ModelScript`, read by
``crew_runtime.offline.script.script_reply``): the request is read into OpenAI-shaped
messages for the script, and the script's answer is sent back in the provider's own shape:

- Anthropic: ``content`` blocks (``text``, ``tool_use`` with a random ``toolu_`` id),
  ``stop_reason``; streamed as its named server-sent events (``message_start``,
  ``content_block_start``/``_delta``/``_stop``, ``message_delta``, ``message_stop``), text
  and ``input_json_delta`` pieces a client must join.
- Gemini: ``candidates[0].content.parts`` (``text``, ``functionCall`` without an id, as
  Gemini 2 models send them); streamed (``:streamGenerateContent?alt=sse``) as whole
  responses, text in pieces.

Requests are checked where cheap (a key, a known model, every tool call answered by a result
naming it, and, for Anthropic, alternating roles and ``max_tokens``); a refused request is
answered with the provider's error shape and kept in :attr:`StandIn.problems`. Token counts
(CrewAI asks one to size each tool result, replayed ones too) are answered and counted. A test
may hold one request unanswered (:meth:`StandIn.hold`) to kill a worker while it is in flight.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import socket
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from aiohttp import web

from crew_runtime.offline.script import script_reply
from tests.support.openai_standin import ModelScript

Json = dict[str, Any]
_PIECE = 7


@dataclass
class Asked:
    """One request: the model, its conversation read as OpenAI messages, and the answer."""

    model: str
    messages: list[Json]
    tools: list[Json] | None
    stream: bool
    body: Json
    calls: list[tuple[str, str, Json]] = field(default_factory=list)  # (id, name, args) given
    text: str | None = None  # the text given

    def conversation(self) -> str:
        return json.dumps({"messages": self.messages, "tools": self.tools}, sort_keys=True)


class Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class StandIn:
    """The server; subclasses read requests and write answers in their provider's shape."""

    name = "standin"

    def __init__(self, scripts: Mapping[str, ModelScript], *, timeout: float = 10.0) -> None:
        self.scripts = dict(scripts)
        self._timeout = timeout
        self._asked: list[Asked] = []
        self.problems: list[str] = []
        self.counted = 0  # token counts asked (not model turns)
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None
        self._port = 0
        self._hold_at: int | None = None
        self.holding = threading.Event()  # set while the held request waits
        self._release = threading.Event()

    def __enter__(self) -> StandIn:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(self._timeout)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._release.set()
        try:
            asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(self._timeout)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(self._timeout)
            self._loop.close()

    async def _start(self) -> None:
        app = web.Application()
        self.routes(app)
        app.router.add_route("*", "/{tail:.*}", self._unknown)
        self._runner = web.AppRunner(app, handle_signals=False)
        await self._runner.setup()
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self._port = sock.getsockname()[1]
        await web.SockSite(self._runner, sock).start()

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    def asked(self) -> list[Asked]:
        with self._lock:
            return list(self._asked)

    def hold(self, nth: int) -> None:
        """Leave the ``nth`` request from now (1: the next) unanswered until :meth:`release`."""
        with self._lock:
            self._hold_at = len(self._asked) + nth

    def release(self) -> None:
        self._release.set()

    async def count(self, request: web.Request) -> int:
        """A token count (CrewAI asks one to size a tool result): not a model turn."""
        with self._lock:
            self.counted += 1
        return len(await request.read()) // 4

    async def _unknown(self, request: web.Request) -> web.Response:
        with self._lock:
            self.problems.append(f"{request.method} {request.path}: not served")
        return self.error(Refused(404, f"{request.method} {request.path} not found"))

    async def answer(
        self, request: web.Request, read: Callable[[Json], Asked], key: str | None
    ) -> web.StreamResponse:
        try:
            body = await request.json()
        except json.JSONDecodeError:
            body = None
        try:
            if not key:
                raise Refused(401, "no API key")
            if not isinstance(body, dict):
                raise Refused(400, "the body is not a JSON object")
            asked = read(body)
            if asked.model not in self.scripts:
                raise Refused(404, f"model {asked.model} not found")
        except Refused as refused:
            with self._lock:
                self.problems.append(f"{request.path}: {refused.message}")
            return self.error(refused)
        script = self.scripts[asked.model]
        scripted = script_reply(
            asked.messages, tool_plan=list(script.tool_plan), label=script.label, tools=asked.tools
        )
        if scripted.kind == "tool_calls":
            for call in scripted.tool_calls:
                function = call["function"]
                asked.calls.append(
                    (self.call_id(), function["name"], json.loads(function["arguments"]))
                )
        else:
            asked.text = scripted.text
        with self._lock:
            self._asked.append(asked)
            held = self._hold_at == len(self._asked)
        if held:
            self.holding.set()
            await asyncio.to_thread(self._release.wait, 60)
        return await self.reply(request, asked)

    # -- what a provider defines

    def routes(self, app: web.Application) -> None:
        raise NotImplementedError

    def call_id(self) -> str:
        return ""

    def error(self, refused: Refused) -> web.Response:
        raise NotImplementedError

    async def reply(self, request: web.Request, asked: Asked) -> web.StreamResponse:
        raise NotImplementedError


def _tool_message(call_id: str, name: str, content: str) -> Json:
    return {"role": "tool", "tool_call_id": call_id, "name": name, "content": content}


def _assistant_calls(calls: list[tuple[str, str, Any]]) -> Json:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
            for i, n, a in calls
        ],
    }


def _function_tools(tools: list[Json]) -> list[Json]:
    return [{"type": "function", "function": tool} for tool in tools]


# -- Anthropic


class AnthropicStandIn(StandIn):
    """Anthropic's Messages API (``POST /v1/messages``)."""

    name = "anthropic"

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/messages", self._on_messages)
        app.router.add_post("/v1/messages/count_tokens", self._on_count)

    def env(self) -> dict[str, str]:
        return {"ANTHROPIC_BASE_URL": self.base_url, "ANTHROPIC_API_KEY": "sk-ant-standin"}

    def call_id(self) -> str:
        return f"toolu_{secrets.token_urlsafe(18)}"

    async def _on_count(self, request: web.Request) -> web.Response:
        return web.json_response({"input_tokens": await self.count(request)})

    async def _on_messages(self, request: web.Request) -> web.StreamResponse:
        return await self.answer(request, _read_anthropic, request.headers.get("x-api-key"))

    def error(self, refused: Refused) -> web.Response:
        kind = "not_found_error" if refused.status == 404 else "invalid_request_error"
        body = {"type": "error", "error": {"type": kind, "message": refused.message}}
        return web.json_response(body, status=refused.status)

    async def reply(self, request: web.Request, asked: Asked) -> web.StreamResponse:
        blocks: list[Json] = [
            {"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in asked.calls
        ]
        stop = "tool_use" if asked.calls else "end_turn"
        text = asked.text
        if text is not None:
            for word in asked.body.get("stop_sequences") or []:
                if word in text:
                    text, stop = text.split(word, 1)[0], "stop_sequence"
            blocks = [{"type": "text", "text": text}]
        usage = {"input_tokens": len(json.dumps(asked.messages)) // 4, "output_tokens": 9}
        message = {
            "id": f"msg_{secrets.token_hex(12)}",
            "type": "message",
            "role": "assistant",
            "model": asked.model,
            "content": blocks,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }
        if not asked.stream:
            return web.json_response(message)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)

        async def send(event: str, data: Json) -> None:
            await response.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())

        await send("message_start", {"type": "message_start", "message": message | {"content": []}})
        for index, block in enumerate(blocks):
            if block["type"] == "text":
                start, pieces = {"type": "text", "text": ""}, block["text"]
                kind, key = "text_delta", "text"
            else:
                start = {**block, "input": {}}
                pieces, kind, key = json.dumps(block["input"]), "input_json_delta", "partial_json"
            head = {"type": "content_block_start", "index": index, "content_block": start}
            await send("content_block_start", head)
            for at in range(0, len(pieces), _PIECE):
                delta = {"type": kind, key: pieces[at : at + _PIECE]}
                await send(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
            await send("content_block_stop", {"type": "content_block_stop", "index": index})
        end = {"stop_reason": stop, "stop_sequence": None}
        await send("message_delta", {"type": "message_delta", "delta": end, "usage": usage})
        await send("message_stop", {"type": "message_stop"})
        await response.write_eof()
        return response


def _read_anthropic(body: Json) -> Asked:
    if not isinstance(body.get("max_tokens"), int):
        raise Refused(400, "max_tokens: Field required")
    messages: list[Json] = []
    system = body.get("system")
    if isinstance(system, list):
        system = "\n".join(str(b.get("text", "")) for b in system if isinstance(b, dict))
    if system:
        messages.append({"role": "system", "content": system})
    open_calls: dict[str, str] = {}
    last_role = None
    for n, message in enumerate(body.get("messages") or []):
        role, content = message.get("role"), message.get("content")
        if role not in ("user", "assistant") or role == last_role:
            raise Refused(400, f"messages.{n}: roles must alternate between user and assistant")
        last_role = role
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list):
            raise Refused(400, f"messages.{n}.content: a string or a list of blocks")
        if open_calls and not any(b.get("type") == "tool_result" for b in blocks):
            raise Refused(400, f"messages.{n}: tool_use ids without tool_result: {open_calls}")
        texts = [str(b.get("text", "")) for b in blocks if b.get("type") == "text"]
        uses = [(b["id"], b["name"], b["input"]) for b in blocks if b.get("type") == "tool_use"]
        for block in blocks:
            if block.get("type") == "tool_result":
                use_id = block.get("tool_use_id")
                if use_id not in open_calls:
                    raise Refused(400, f"messages.{n}: unexpected tool_use_id {use_id}")
                result = block.get("content")
                if isinstance(result, list):
                    result = "\n".join(str(b.get("text", "")) for b in result)
                messages.append(_tool_message(use_id, open_calls.pop(use_id), str(result)))
        if open_calls:
            raise Refused(400, f"messages.{n}: tool_use ids without tool_result: {open_calls}")
        if uses:
            messages.append(_assistant_calls(uses))
            open_calls = {i: name for i, name, _ in uses}
        elif texts:
            messages.append({"role": role, "content": "\n".join(texts)})
    if open_calls:
        raise Refused(400, f"tool_use ids without tool_result: {sorted(open_calls)}")
    tools = body.get("tools")
    offered = None
    if tools:
        offered = _function_tools(
            [{"name": t["name"], "parameters": t.get("input_schema", {})} for t in tools]
        )
    return Asked(str(body.get("model", "")), messages, offered, body.get("stream") is True, body)


# -- Gemini


class GeminiStandIn(StandIn):
    """Gemini's API (``POST /v1beta/models/{model}:generateContent`` and the stream)."""

    name = "gemini"

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1beta/models/{call}", self._on_generate)

    def env(self) -> dict[str, str]:
        return {"GOOGLE_GEMINI_BASE_URL": self.base_url, "GEMINI_API_KEY": "gm-standin"}

    async def _on_generate(self, request: web.Request) -> web.StreamResponse:
        model, _, method = request.match_info["call"].partition(":")
        if method == "countTokens":
            return web.json_response({"totalTokens": await self.count(request)})
        if method not in ("generateContent", "streamGenerateContent"):
            return await self._unknown(request)
        stream = method == "streamGenerateContent"
        if stream and request.query.get("alt") != "sse":
            return await self._unknown(request)

        def read(body: Json) -> Asked:
            return _read_gemini(model, body, stream)

        return await self.answer(request, read, request.headers.get("x-goog-api-key"))

    def error(self, refused: Refused) -> web.Response:
        state = "NOT_FOUND" if refused.status == 404 else "INVALID_ARGUMENT"
        body = {"error": {"code": refused.status, "message": refused.message, "status": state}}
        return web.json_response(body, status=refused.status)

    async def reply(self, request: web.Request, asked: Asked) -> web.StreamResponse:
        def response(parts: list[Json], finish: str | None) -> Json:
            candidate: Json = {"content": {"role": "model", "parts": parts}, "index": 0}
            if finish is not None:
                candidate["finishReason"] = finish
            prompt = len(json.dumps(asked.messages)) // 4
            usage = {"promptTokenCount": prompt, "candidatesTokenCount": 9}
            return {
                "candidates": [candidate],
                "usageMetadata": usage | {"totalTokenCount": prompt + 9},
                "modelVersion": asked.model,
                "responseId": secrets.token_urlsafe(12),
            }

        text = asked.text
        if text is not None:
            config = asked.body.get("generationConfig") or {}
            for word in config.get("stopSequences") or []:
                text = text.split(word, 1)[0]
        calls = [{"functionCall": {"name": n, "args": a}} for _, n, a in asked.calls]
        if not asked.stream:
            parts = calls or [{"text": text}]
            return web.json_response(response(parts, "STOP"))
        stream = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await stream.prepare(request)
        chunks = [[call] for call in calls] or [
            [{"text": (text or "")[at : at + _PIECE]}] for at in range(0, len(text or ""), _PIECE)
        ]
        for n, parts in enumerate(chunks):
            last = n == len(chunks) - 1
            data = json.dumps(response(parts, "STOP" if last else None))
            await stream.write(f"data: {data}\r\n\r\n".encode())
        await stream.write_eof()
        return stream


def _read_gemini(model: str, body: Json, stream: bool) -> Asked:
    messages: list[Json] = []
    system = body.get("systemInstruction") or body.get("system_instruction")
    if system:
        messages.append({"role": "system", "content": _texts(system.get("parts") or [])})
    open_calls: list[str] = []
    for n, content in enumerate(body.get("contents") or []):
        role, parts = content.get("role"), content.get("parts") or []
        if role not in ("user", "model") or not parts:
            raise Refused(400, f"contents[{n}]: a role (user or model) and parts")
        calls = [p.get("functionCall") or p.get("function_call") for p in parts]
        answers = [p.get("functionResponse") or p.get("function_response") for p in parts]
        if open_calls and sorted(a["name"] for a in answers if a) != sorted(open_calls):
            raise Refused(400, f"contents[{n}]: function calls without a response: {open_calls}")
        for k, answer in enumerate(a for a in answers if a):
            result = answer.get("response") or {}
            text = result.get("result", json.dumps(result)) if isinstance(result, dict) else result
            messages.append(_tool_message(f"g{n}_{k}", answer["name"], str(text)))
        open_calls = []
        if any(calls):
            given = [(f"g{n + 1}_{k}", c["name"], c.get("args") or {}) for k, c in enumerate(calls)]
            messages.append(_assistant_calls(given))
            open_calls = [c["name"] for c in calls if c]
        elif not any(answers):
            messages.append(
                {"role": "assistant" if role == "model" else "user", "content": _texts(parts)}
            )
    if open_calls:
        raise Refused(400, f"the last function calls have no response: {open_calls}")
    declared = [
        {"name": d["name"], "parameters": d.get("parameters") or d.get("parametersJsonSchema")}
        for tool in body.get("tools") or []
        for d in tool.get("functionDeclarations") or tool.get("function_declarations") or []
    ]
    return Asked(model, messages, _function_tools(declared) or None, stream, body)


def _texts(parts: list[Json]) -> str:
    return "\n".join(str(p["text"]) for p in parts if isinstance(p.get("text"), str))
