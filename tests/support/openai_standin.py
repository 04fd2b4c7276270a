"""A local stand-in for OpenAI's Chat Completions API, so tests take the real provider path.

``LLM(model="openai/gpt-4o-mini")`` in CrewAI 1.15.30 is its native ``OpenAICompletion``
(crewai/llms/providers/openai/completion.py), which calls ``POST {base}/chat/completions``
through the ``openai`` SDK, the base taken from ``OPENAI_BASE_URL`` and the key from
``OPENAI_API_KEY``; ``stream=True`` asks for server-sent events with
``stream_options.include_usage``; native tool calls come back as ``message.tool_calls``
(SDK objects) or, streamed, as ``delta.tool_calls`` pieces it joins by ``index``. Pointing
a worker's environment here exercises all of it (HTTP, SDK parsing, streaming) offline.

Answers come from a script per model (:class:`ModelScript`), read by the same rules as the
offline scripted model (``crew_runtime.offline.script.script_reply``): ReAct text when the
request offers no tools, native ``tool_calls`` when it does. Tool call ids are random, as
OpenAI's are, so a replay that re-asked the model instead of reading its journal would show
up as a changed conversation. Every request is recorded (:meth:`OpenAIStandIn.requests`).

Requests are checked like OpenAI checks them, where that is cheap: a bearer key, a known
model, well-formed messages, every assistant tool call answered by a ``tool`` message with
its id (and no tool message without a call), strict tool schemas, no unknown parameters.
A refused request is answered with OpenAI's error shape and also kept in
:attr:`OpenAIStandIn.problems`, which tests assert empty: nothing fails quietly.

The server runs on its own event loop in a daemon thread (worker processes reach it over
TCP); state is guarded by a lock, so the test thread can read it at any time.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import socket
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Any

from aiohttp import web

from crew_runtime.offline.plan import PlanItem
from crew_runtime.offline.script import script_reply

Json = dict[str, Any]

# Request parameters the Chat Completions API accepts; anything else is refused, as OpenAI
# refuses an "Unrecognized request argument".
_KNOWN_PARAMS = frozenset(
    {
        "model",
        "messages",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "stream",
        "stream_options",
        "temperature",
        "top_p",
        "n",
        "stop",
        "max_tokens",
        "max_completion_tokens",
        "presence_penalty",
        "frequency_penalty",
        "logit_bias",
        "logprobs",
        "top_logprobs",
        "seed",
        "user",
        "response_format",
        "reasoning_effort",
        "metadata",
        "store",
        "service_tier",
    }
)
_ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
# Streamed text and tool arguments go out in pieces this long, so a client must join them.
_PIECE = 7


@dataclass(frozen=True)
class ModelScript:
    """How one model answers.

    Args:
        label: the first word of its drafts (see ``crew_runtime.offline.drafts``).
        tool_plan: the tool calls it makes in each round, in order.
        runs_on: in ReAct text, go on past the action with an invented observation and a
            final answer, as a model does when no stop sequence cuts it; the client must cut
            the reply at ``\\nObservation:`` itself.
    """

    label: str = "Draft"
    tool_plan: Sequence[PlanItem] = ()
    runs_on: bool = False


@dataclass(frozen=True)
class ChatRequest:
    """One request the stand-in answered (or refused, with ``problem`` saying why)."""

    model: str
    messages: list[Json]
    tools: list[Json] | None
    stream: bool
    body: Json
    problem: str | None = None
    answer: Json | None = None  # the assistant message it was given
    received: float = 0.0  # time.monotonic() when it came, and when its answer went out
    answered: float = 0.0

    def conversation(self) -> str:
        """Messages and tools as one canonical string: equal strings mean the same question."""
        return json.dumps({"messages": self.messages, "tools": self.tools}, sort_keys=True)


class RequestRefused(Exception):
    """A request OpenAI would refuse: its status, message and offending parameter."""

    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param


class OpenAIStandIn:
    """OpenAI's Chat Completions API on 127.0.0.1, answering from ``scripts`` (by model name).

    Use as a context manager; point clients at :attr:`base_url` with any non-empty key.
    """

    def __init__(
        self, scripts: Mapping[str, ModelScript], *, timeout: float = 10.0, delay: float = 0.0
    ) -> None:
        self.scripts = dict(scripts)
        self._timeout = timeout
        # How long the model "thinks" before it answers (bench/concurrency.py: 1 s), on the
        # event loop: requests in flight at once cost no thread each.
        self.delay = delay
        self._requests: list[ChatRequest] = []
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="openai-standin", daemon=True
        )
        self._runner: web.AppRunner | None = None
        self._port = 0

    # -- lifecycle

    def __enter__(self) -> OpenAIStandIn:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(self._timeout)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(self._timeout)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(self._timeout)
            self._loop.close()

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._on_chat)
        app.router.add_route("*", "/{tail:.*}", self._on_unknown)
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
        return f"http://127.0.0.1:{self._port}/v1"

    def env(self) -> dict[str, str]:
        """The environment a worker needs to send its OpenAI calls here."""
        return {"OPENAI_BASE_URL": self.base_url, "OPENAI_API_KEY": "sk-standin"}

    # -- what happened

    def requests(self) -> list[ChatRequest]:
        """Every request answered so far, in order (refused ones are in :attr:`problems`)."""
        with self._lock:
            return [r for r in self._requests if r.problem is None]

    @property
    def problems(self) -> list[str]:
        with self._lock:
            return [r.problem for r in self._requests if r.problem is not None]

    # -- the API

    async def _on_unknown(self, request: web.Request) -> web.Response:
        problem = f"{request.method} {request.path}: not an endpoint the stand-in serves"
        self._keep(ChatRequest("", [], None, False, {}, problem))
        return _error(RequestRefused(404, f"Invalid URL ({request.method} {request.path})"))

    async def _on_chat(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
        except json.JSONDecodeError:
            body = None
        try:
            if not request.headers.get("Authorization", "").removeprefix("Bearer ").strip():
                raise RequestRefused(401, "You didn't provide an API key.")
            chat = _check(body, self.scripts)
        except RequestRefused as refused:
            raw = body if isinstance(body, dict) else {}
            self._keep(ChatRequest(str(raw.get("model", "")), [], None, False, raw, str(refused)))
            return _error(refused)
        received = time.monotonic()
        reply = _reply(chat, self.scripts[chat.model])
        if self.delay:
            await asyncio.sleep(self.delay)
        self._keep(
            replace(chat, answer=_message(reply), received=received, answered=time.monotonic())
        )
        completion_id = f"chatcmpl-{secrets.token_hex(12)}"
        if not chat.stream:
            return web.json_response(_completion(chat, reply, completion_id))
        return await _stream(request, chat, reply, completion_id)

    def _keep(self, chat: ChatRequest) -> None:
        with self._lock:
            self._requests.append(chat)


@dataclass(frozen=True)
class _Reply:
    text: str | None
    tool_calls: list[Json]


def _reply(chat: ChatRequest, script: ModelScript) -> _Reply:
    scripted = script_reply(
        chat.messages, tool_plan=list(script.tool_plan), label=script.label, tools=chat.tools
    )
    if scripted.kind == "tool_calls":
        calls = [
            {**call, "id": f"call_{secrets.token_urlsafe(18)}"} for call in scripted.tool_calls
        ]
        return _Reply(None, calls)
    text = scripted.text
    schema = _json_schema(chat.body)
    if schema is not None:  # structured output: an instance of the schema, holding the draft
        final = text.rsplit("Final Answer:", 1)[-1].strip()
        return _Reply(json.dumps(_instance(schema, final)), [])
    if scripted.kind == "action" and script.runs_on:
        text += "\nObservation: (invented by the model)\nFinal Answer: (invented too)"
    stops = chat.body.get("stop")
    for stop in [stops] if isinstance(stops, str) else stops or []:
        text = text.split(stop, 1)[0]
    return _Reply(text, [])


def _json_schema(body: Json) -> Json | None:
    """The schema of a ``response_format: {"type": "json_schema"}`` request, if any."""
    wanted = body.get("response_format")
    if not isinstance(wanted, dict) or wanted.get("type") != "json_schema":
        return None
    schema = (wanted.get("json_schema") or {}).get("schema")
    return schema if isinstance(schema, dict) else None


def _instance(schema: Json, text: str) -> Any:
    """A value of ``schema``: strings hold ``text``, numbers are 0, arrays empty."""
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties", {})
        return {name: _instance(sub, text) for name, sub in props.items()}
    defaults = {"string": text, "integer": 0, "number": 0.0, "boolean": False, "array": []}
    return defaults.get(kind) if isinstance(kind, str) else None


def _usage(chat: ChatRequest, reply: _Reply) -> Json:
    prompt = len(json.dumps(chat.messages)) // 4
    completion = len(reply.text or json.dumps(reply.tool_calls)) // 4
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _message(reply: _Reply) -> Json:
    message: Json = {"role": "assistant", "content": reply.text, "refusal": None}
    if reply.tool_calls:
        message["tool_calls"] = reply.tool_calls
    return message


def _completion(chat: ChatRequest, reply: _Reply, completion_id: str) -> Json:
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": chat.model,
        "choices": [
            {
                "index": 0,
                "message": _message(reply),
                "logprobs": None,
                "finish_reason": "tool_calls" if reply.tool_calls else "stop",
            }
        ],
        "usage": _usage(chat, reply),
    }


async def _stream(
    request: web.Request, chat: ChatRequest, reply: _Reply, completion_id: str
) -> web.StreamResponse:
    """Answer as OpenAI streams: a role delta, text or tool-call pieces, the finish reason,
    the usage (when asked for), then ``[DONE]``."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)

    async def send(choices: list[Json], usage: Json | None = None) -> None:
        chunk: Json = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": chat.model,
            "choices": choices,
        }
        if usage is not None:
            chunk["usage"] = usage
        await response.write(f"data: {json.dumps(chunk)}\n\n".encode())

    def delta(content: Json, finish: str | None = None) -> list[Json]:
        return [{"index": 0, "delta": content, "logprobs": None, "finish_reason": finish}]

    await send(delta({"role": "assistant", "content": "" if reply.text is not None else None}))
    text = reply.text or ""
    for at in range(0, len(text), _PIECE):
        await send(delta({"content": text[at : at + _PIECE]}))
    for index, call in enumerate(reply.tool_calls):
        head = {"name": call["function"]["name"], "arguments": ""}
        first = {"index": index, "id": call["id"], "type": "function", "function": head}
        await send(delta({"tool_calls": [first]}))
        arguments = call["function"]["arguments"]
        for at in range(0, len(arguments), _PIECE):
            piece = {"index": index, "function": {"arguments": arguments[at : at + _PIECE]}}
            await send(delta({"tool_calls": [piece]}))
    await send(delta({}, "tool_calls" if reply.tool_calls else "stop"))
    if (chat.body.get("stream_options") or {}).get("include_usage"):
        await send([], _usage(chat, reply))
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


def _error(refused: RequestRefused) -> web.Response:
    kind = "invalid_request_error" if refused.status < 500 else "server_error"
    body = {"error": {"message": refused.message, "type": kind, "param": refused.param}}
    body["error"]["code"] = "model_not_found" if refused.status == 404 else None
    return web.json_response(body, status=refused.status)


# -- validation, as OpenAI does it where cheap


def _check(body: Any, scripts: Mapping[str, ModelScript]) -> ChatRequest:
    if not isinstance(body, dict):
        raise RequestRefused(400, "We could not parse the JSON body of your request.")
    unknown = sorted(set(body) - _KNOWN_PARAMS)
    if unknown:
        raise RequestRefused(400, f"Unrecognized request argument supplied: {unknown[0]}")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise RequestRefused(400, "you must provide a model parameter", "model")
    if model not in scripts:
        raise RequestRefused(404, f"The model `{model}` does not exist.", "model")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise RequestRefused(400, "'messages' must be a non-empty array.", "messages")
    _check_messages(messages)
    tools = body.get("tools")
    if tools is not None:
        _check_tools(tools)
    elif "tool_choice" in body:
        raise RequestRefused(400, "'tool_choice' is only allowed when 'tools' are specified.")
    stream = body.get("stream", False)
    if "stream_options" in body and stream is not True:
        raise RequestRefused(400, "'stream_options' is only allowed when 'stream' is enabled.")
    return ChatRequest(model, messages, tools, stream is True, body)


def _check_messages(messages: list[Any]) -> None:
    open_calls: set[str] = set()
    for n, message in enumerate(messages):
        where = f"messages[{n}]"
        if not isinstance(message, dict) or message.get("role") not in _ROLES:
            raise RequestRefused(400, f"{where}: a message needs a valid 'role'.", where)
        role, content = message["role"], message.get("content")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in open_calls:
                raise RequestRefused(
                    400,
                    f"{where}: messages with role 'tool' must be a response to a preceding "
                    "message with 'tool_calls'.",
                    where,
                )
            open_calls.discard(call_id)
            if not isinstance(content, str):
                raise RequestRefused(400, f"{where}: a tool message needs string content.", where)
            continue
        if open_calls:
            raise RequestRefused(
                400,
                "An assistant message with 'tool_calls' must be followed by tool messages "
                f"responding to each 'tool_call_id'. Missing: {sorted(open_calls)}",
                where,
            )
        calls = message.get("tool_calls")
        if calls is not None:
            if role != "assistant" or not isinstance(calls, list) or not calls:
                raise RequestRefused(400, f"{where}: bad 'tool_calls'.", where)
            open_calls = {_call_id(call, where) for call in calls}
        elif not (isinstance(content, str) or (isinstance(content, list) and content)):
            raise RequestRefused(400, f"{where}: 'content' must be a string or parts.", where)
    if open_calls:
        raise RequestRefused(
            400,
            "An assistant message with 'tool_calls' must be followed by tool messages "
            f"responding to each 'tool_call_id'. Missing: {sorted(open_calls)}",
            "messages",
        )


def _call_id(call: Any, where: str) -> str:
    function = call.get("function") if isinstance(call, dict) else None
    if (
        not isinstance(function, dict)
        or call.get("type") != "function"
        or not isinstance(call.get("id"), str)
        or not isinstance(function.get("name"), str)
        or not isinstance(function.get("arguments"), str)
    ):
        raise RequestRefused(400, f"{where}: a tool call needs id, type, name, arguments.", where)
    return str(call["id"])


def _check_tools(tools: Any) -> None:
    if not isinstance(tools, list) or not tools:
        raise RequestRefused(400, "'tools' must be a non-empty array.", "tools")
    for n, tool in enumerate(tools):
        where = f"tools[{n}]"
        function = tool.get("function") if isinstance(tool, dict) else None
        if tool.get("type") != "function" or not isinstance(function, dict):
            raise RequestRefused(400, f"{where}: only function tools are served.", where)
        if not _TOOL_NAME.match(str(function.get("name", ""))):
            raise RequestRefused(400, f"{where}.function.name: invalid name.", where)
        parameters = function.get("parameters", {"type": "object", "properties": {}})
        if function.get("strict"):
            _check_strict(parameters, f"{where}.function.parameters")


def _check_strict(schema: Any, where: str) -> None:
    """Strict mode: every object closed (``additionalProperties: false``), every property
    required."""
    if not isinstance(schema, dict):
        return
    if schema.get("type") == "object":
        properties = schema.get("properties", {})
        if schema.get("additionalProperties") is not False:
            raise RequestRefused(
                400, f"{where}: 'additionalProperties' is required to be false.", where
            )
        if sorted(schema.get("required", [])) != sorted(properties):
            raise RequestRefused(
                400, f"{where}: 'required' must list every key in 'properties'.", where
            )
    for key in ("properties", "$defs", "definitions"):
        for name, child in (schema.get(key) or {}).items():
            _check_strict(child, f"{where}.{key}.{name}")
    for key in ("items", "anyOf", "oneOf", "allOf"):
        child = schema.get(key)
        for item in child if isinstance(child, list) else [child]:
            _check_strict(item, f"{where}.{key}")
