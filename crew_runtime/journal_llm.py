"""Every LLM of a crew goes through the journal: recorded turns are served, new ones appended.

A turn is keyed by its stream (``task{n}:{role}``) and its number in that stream.
The prompt's hash is stored with it; a different hash on replay means the crew
changed since the recording (divergence), and the run goes on live from there.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import orjson
from crewai.llms.base_llm import BaseLLM, call_stop_override
from pydantic import BaseModel, ConfigDict, Field

from crew_runtime import compat
from crew_runtime.context import RunContext
from crew_runtime.shapes import (
    MADE_UP_ID,
    TurnUnreadable,
    check_readable,
    class_name,
    made_up_id,
    rebuild,
)
from crew_runtime.signals import PauseRun, RunAborted

compat.install()  # before any crew is built

# ``<function f at 0x7f...>``: where an object sits in one process's memory. CrewAI's planner
# puts its agents' tools' reprs in its prompt, and those name their cache function's address.
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+>")
_SORTED = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS


def prompt_hash(messages: Any, tools: Any) -> str:
    """A stable digest of what the model is asked (messages and tool schemas), the same in
    every process: memory addresses in object reprs are left out, and so are those in the
    ids CrewAI makes up for tool calls that came without one (Gemini's): each stands for
    its place among them.

    The prompt is written as JSON by orjson (a long conversation's prompt is hashed on every
    turn, and the standard library's encoder took most of the time); one it cannot write (an
    integer past 64 bits, nesting past 254 levels) by the standard library's.
    """
    prompt = {"messages": messages, "tools": tools}
    try:
        blob = orjson.dumps(prompt, option=_SORTED, default=_plain).decode()
    except orjson.JSONEncodeError:
        blob = json.dumps(prompt, sort_keys=True, default=_plain)
    return _digest(blob)


def same_prompt(recorded: str | None, digest: str, messages: Any, tools: Any) -> bool:
    """Whether a turn recorded with the digest ``recorded`` was asked this prompt, whose
    :func:`prompt_hash` is ``digest``; a turn recorded before that digest (by a release
    whose ``json.dumps`` form it has) is checked against that form."""
    return recorded == digest or recorded == _stdlib_prompt_hash(messages, tools)


def _stdlib_prompt_hash(messages: Any, tools: Any) -> str:
    """The digest turns were recorded with before :func:`prompt_hash`: the same prompt and
    the same process-specific text left out, written by ``json.dumps``."""
    blob = json.dumps({"messages": messages, "tools": tools}, sort_keys=True, default=_plain)
    return _digest(blob)


def _digest(blob: str) -> str:
    """The digest of the prompt's JSON without what differs between processes. Two passes:
    each pattern starts with a literal, which the regular expression engine finds fast; the
    two as one alternation were tried at every character, three times slower."""
    made_up: dict[str, str] = {}
    if "call_" in blob:
        blob = MADE_UP_ID.sub(
            lambda m: made_up.setdefault(m[0], f"call_{len(made_up)}") if made_up_id(m) else m[0],
            blob,
        )
    if " at 0x" in blob:
        blob = _ADDRESS.sub(" at 0x>", blob)
    return hashlib.sha256(blob.encode()).hexdigest()


def _plain(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    return getattr(value, "__name__", type(value).__name__)


def encode_response(response: Any) -> dict[str, Any]:
    """Journal a response as plain JSON (native tool calls arrive as SDK objects).

    A structured answer (a ``response_model`` instance, as a provider's structured output
    returns it) is kept apart from other data, so a replay can hand back an instance again.
    """
    if isinstance(response, str):
        return {"text": response}
    if isinstance(response, BaseModel):
        return {"model": response.model_dump(mode="json")}
    payload: dict[str, Any] = {"data": json.loads(json.dumps(response, default=_plain))}
    if isinstance(response, list):  # a turn of tool calls: each item's class, to rebuild it
        classes = [class_name(item) for item in response]
        if any(classes):
            payload["classes"] = classes
    return payload


def decode_response(payload: dict[str, Any], response_model: Any = None) -> Any:
    """The response as the model gave it; a structured one as an instance of the
    ``response_model`` the call asks for (CrewAI tells a structured answer from text to
    parse by its type), else as its JSON text, which CrewAI parses as it would the model's."""
    if "text" in payload:
        return payload["text"]
    if "model" in payload:
        if isinstance(response_model, type) and issubclass(response_model, BaseModel):
            return response_model.model_validate(payload["model"])
        return json.dumps(payload["model"])
    data = payload["data"]
    classes = payload.get("classes")
    if isinstance(data, list) and isinstance(classes, list):
        pairs = zip(classes, data, strict=True)
        return [item if name is None else rebuild(name, item) for name, item in pairs]
    if isinstance(data, list) and data and all(_gemini_part(item) for item in data):
        # Recorded before classes were: a Gemini Part journaled as its dict.
        return [rebuild("google.genai.types:Part", item) for item in data]
    return data


def _gemini_part(item: Any) -> bool:
    return isinstance(item, dict) and isinstance(item.get("function_call"), dict)


def _unreadable(ctx: RunContext, exc: TurnUnreadable) -> RunAborted:
    """Fail the run with ``exc`` as its reason: stopped like a lost lease (CrewAI lets the
    signal through; it retries anything else), settled as failed (``ctx.refused``)."""
    ctx.refused = str(exc)
    ctx.abort()
    return RunAborted(f"run {ctx.run.id}: {exc}")


class JournalLLM(BaseLLM):
    """Wraps the LLM a crew was built with; only this wrapper is seen by CrewAI."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    inner: BaseLLM = Field(exclude=True)
    run_context: RunContext = Field(exclude=True)
    # The stream of every turn, for a model asked outside any agent's place in the crew (a
    # task's LLM guardrail); None: the stream of the task and agent asking.
    fixed_stream: str | None = Field(default=None, exclude=True)
    # The journal kind of its turns: ``llm``, or ``reasoning`` for an agent's reasoning
    # before its task, which a resume from a snapshot replays too (it reads every entry
    # but the ``llm`` and ``tool`` turns before the snapshot).
    kind: str = Field(default="llm", exclude=True)

    @classmethod
    def wrap(
        cls, inner: BaseLLM, ctx: RunContext, *, stream: str | None = None, kind: str = "llm"
    ) -> JournalLLM:
        return cls(
            model=inner.model,
            inner=inner,
            run_context=ctx,
            stop=list(inner.stop),
            fixed_stream=stream,
            kind=kind,
        )

    def call(
        self,
        messages: Any,
        tools: Any = None,
        callbacks: Any = None,
        available_functions: Any = None,
        from_task: Any = None,
        from_agent: Any = None,
        response_model: Any = None,
    ) -> Any:
        ctx = self.run_context
        # A structured answer is handed back as the model it was: the call's model, or the
        # one the LLM was built with (``LLM(response_format=...)``), which the call then uses.
        structured = response_model or getattr(self.inner, "response_format", None)
        if ctx.holding:  # a gated call is waiting; the model must not see its placeholder
            raise ctx.signal(PauseRun("waiting for approval of a held tool call"))
        stream = self.fixed_stream or ctx.stream_for(from_task, from_agent)
        seq = ctx.next_seq(stream, self.kind)
        digest = prompt_hash(messages, tools)
        ctx.note_turn(stream, seq, messages, tools, from_agent)
        entry = ctx.recorded(stream, self.kind, seq)
        if entry is not None:
            if same_prompt(entry.prompt_hash, digest, messages, tools):
                ctx.stats["llm_replayed"] += 1
                where = f"LLM turn {seq} of {stream}"
                try:
                    replayed = decode_response(entry.payload, structured)
                    check_readable(replayed, None, where)
                except TurnUnreadable as exc:
                    raise _unreadable(ctx, exc) from None
                ctx.note_llm_response(stream, replayed)
                ctx.note_step(from_agent, replayed=True)
                return replayed
            ctx.diverge(
                entry, f"the prompt of LLM turn {seq} of {stream} changed since it was recorded"
            )
        live = ctx.begin_live()
        if live is None:  # another task paused: this turn is taken on resume
            raise ctx.signal(PauseRun(f"the run is pausing before LLM turn {seq} of {stream}"))
        try:
            # A live call costs money: only under a lease held (renewed within a third of
            # it: the answer is journaled by a fenced write before anything acts on it).
            ctx.hold_lease(renewed_within=ctx.lease.total_seconds() / 3)
            # CrewAI sets ReAct stop words per call on the LLM it sees (this wrapper);
            # hand them to the real model.
            with call_stop_override(self.inner, self.stop_sequences):
                response = self.inner.call(
                    messages,
                    tools=tools,
                    callbacks=callbacks,
                    available_functions=available_functions,
                    from_task=from_task,
                    from_agent=from_agent,
                    response_model=response_model,
                )
            ctx.stats["llm_live"] += 1
            payload = encode_response(response)
            try:  # what a replay will hand CrewAI must read as this turn does
                check_readable(
                    decode_response(payload, structured),
                    response,
                    f"LLM turn {seq} of {stream}",
                )
            except TurnUnreadable as exc:
                raise _unreadable(ctx, exc) from None
            ctx.record(stream, self.kind, seq, payload, digest)
        finally:
            ctx.end_live(live)
        ctx.note_llm_response(stream, response)
        ctx.note_step(from_agent, replayed=False)
        return response

    def supports_function_calling(self) -> bool:
        probe = getattr(self.inner, "supports_function_calling", None)
        return bool(probe()) if callable(probe) else False

    def supports_stop_words(self) -> bool:
        return self.inner.supports_stop_words()

    def get_context_window_size(self) -> int:
        return self.inner.get_context_window_size()

    def supports_multimodal(self) -> bool:
        return self.inner.supports_multimodal()

    def get_input_tokens_count(
        self, messages: Any, tools: Any = None, response_model: Any = None
    ) -> int:
        return self.inner.get_input_tokens_count(messages, tools, response_model)
