"""A deterministic scripted LLM, so the real CrewAI agent loop runs without a provider.

Tests, benchmarks and the offline demo need crews whose agents really go through CrewAI's
ReAct loop (tools listed in the prompt, ``Action:``/``Observation:``, ``Final Answer:``,
``human_input`` feedback rounds) but never touch the network. :class:`ScriptedLLM` answers
like an agent would, and its reply is a pure function of the conversation and its plan: the
same messages always get the same reply, in any process. That is what lets a journal replay
a conversation elsewhere and compare prompt hashes.

How a reply is chosen (see :func:`script_reply`):

1. Find CrewAI's task prompt (the message holding ``"\\nCurrent Task: "``). Everything after it
   is this task's conversation: tool observations, ``User feedback:`` messages, drafts.
2. The *round* starts at the latest feedback message (or at the task prompt when there is
   none; with ``replan_after_feedback=False`` always at the task prompt). The number of
   ``Observation:`` messages in the round is how many planned tool calls are done.
3. While planned calls remain, reply ``Thought: …\\nAction: <tool>\\nAction Input: <json>``.
   Steps whose tool the prompt does not offer (no ``Tool Name: <tool>`` line) are skipped, so
   one instance can serve an agent across tasks with and without tools.
4. Otherwise reply ``Thought: I now know the final answer\\nFinal Answer: <draft>``.

The draft is one line that shows what the model saw, every value JSON-encoded so
:func:`parse_draft` can read it back exactly (wrapped here)::

    Outline v2 on "Outline otters" | feedback: ["make it shorter", "add a title"]
    | saw_previous_draft: yes | context: null | notes: ["search: 3 facts about otters"]

``v2`` counts the feedback messages; ``on`` is the first line of the task description;
``saw_previous_draft`` says whether an earlier draft of this task is in the conversation
(CrewAI leaves it out on the ReAct path; the runtime's review provider puts it back);
``context`` is the earlier tasks' output CrewAI put in the task prompt; ``notes`` are the
tool observations of the task so far, as ``"<tool>: <observation>"``. Inside the values the
colon of ``Final Answer:``, ``Action:`` and ``Observation:`` is written ``\\u003a``, so CrewAI's
parser never mistakes quoted feedback for a step.

Readable drafts (``draft_style="readable"``), for demos: the same reply rules, but the draft is
written for a person, not for :func:`parse_draft`. A version line, what the reviewer asked
for so far, the agent's text (``draft_body``, which may use the :data:`PLACEHOLDERS`; the
task's first line when empty), what the tools returned and what the draft was built on::

    Outline (version 2)
    Revised after your feedback:
    ✓ add a section on costs

    Durable agents: an outline
    1. Why durable agents matter now
    ...

    Gathered along the way:
    • search: …

    Built on: "Outline (version 2)"

The version counts from 1 (``v0`` of the one-line format is version 1). The colon of
``Final Answer:``, ``Action:`` and ``Observation:`` is written as U+A789 (modifier letter colon,
which reads as one) anywhere in it, for the same reason as above.

Given a ``response_model`` whose required fields are plain (str, int, float, bool, lists), the
reply is an instance's JSON, its strings holding the draft; other models are ignored.

Native function calling (``native=True``): :meth:`ScriptedLLM.supports_function_calling` is
True, and when CrewAI passes ``tools`` (it does for agents with tools) a planned turn is answered
the way a provider answers, with a list of OpenAI-style tool calls::

    [{"id": "call_<hash>_0", "type": "function",
      "function": {"name": "pay", "arguments": "{\"amount\": 1500, \"to\": \"ACME\"}"}}]

A plan item that is a list is one turn with several calls (CrewAI runs them in parallel); a
single call is a turn of its own. Turns done are the assistant ``tool_calls`` messages of the
round; the ``role: tool`` results become the draft's notes; the final answer is the bare draft
(no ``Final Answer:``). Ids hash the conversation and the call's place, never a random number,
and the calls are plain JSON, so a journal's JSON round trip returns them unchanged. Without
``tools`` (an agent with none) CrewAI stays on ReAct and so does the script; in ReAct mode a
list item is simply its calls one per turn.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Final, Literal, get_origin

from crewai.llms.base_llm import BaseLLM
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

if TYPE_CHECKING:
    from crewai.agents.agent_builder.base_agent import BaseAgent
    from crewai.task import Task
    from crewai.tools.base_tool import BaseTool
    from crewai.utilities.types import LLMMessage

__all__ = [
    "LOG_ENV_VAR",
    "PLACEHOLDERS",
    "DraftStyle",
    "PlanItem",
    "PlannedToolCall",
    "ScriptedDraft",
    "ScriptedLLM",
    "ScriptedReply",
    "ToolStep",
    "parse_draft",
    "prompt_sha256",
    "script_reply",
]

LOG_ENV_VAR: Final = "COUNTERSIGN_SCRIPTED_LOG"

# Placeholders a planned tool argument may use, e.g. {"query": "{subject}"}; filled with
# str.format, so literal braces are doubled.
PLACEHOLDERS: Final = ("subject", "context", "feedback", "observation", "revision", "step")

# CrewAI 1.15.30 prompt text (crewai/translations/en.json slices "task", "task_no_tools",
# "task_with_context", "feedback_instructions"; "\nObservation:" is appended to the action
# text by agent_executor.py:1901 via AgentAction.text).
_TASK_MARK: Final = "\nCurrent Task: "
_EXPECTED_MARK: Final = "\nThis is the expected criteria for your final answer:"
_CONTEXT_MARK: Final = "\n\nThis is the context you're working with:\n"
_PROMPT_TAILS: Final = (
    "\n\nBegin! This is VERY important to you",
    "\n\nProvide your complete response:",
)
_FEEDBACK_MARK: Final = "User feedback: "
_FEEDBACK_TAIL: Final = "\nInstructions: Use this feedback to enhance the next output iteration."
_OBSERVATION_MARK: Final = "\nObservation:"
_TOOL_NAME_RE: Final = re.compile(r"^Tool Name: *(.+?) *$", re.MULTILINE)
_ACTION_RE: Final = re.compile(r"^Action: *(.+?) *$", re.MULTILINE)
_FINAL_ANSWER_MARK: Final = "Final Answer:"
# Every third tool use in a task, CrewAI appends the whole tool list to the observation
# (tools/tool_usage.py:760-776, slice "tools"); it is noise in a note.
_TOOLS_REMINDER: Final = "\nYou ONLY have access to the following tools"
# Words CrewAI's ReAct parser acts on (agents/parser.py). Inside the draft's JSON strings their
# colon is written as \u003a: the parser no longer sees them, json.loads still does.
_REACT_KEYWORD_RE: Final = re.compile(r"(Final Answer|Action|Observation)(\s*\d*\s*):")

# In readable drafts (plain text, no JSON to hide it in) the colon becomes U+A789, which
# reads as one.
_READABLE_COLON: Final = "\ua789"

DraftStyle = Literal["line", "readable"]
"""``line``: one line :func:`parse_draft` reads back; ``readable``: a draft for people."""

_CALLS_LOCK = threading.Lock()  # module-level: a Lock in a pydantic model breaks deepcopy


class PlannedToolCall(BaseModel):
    """One tool call in a :class:`ScriptedLLM` plan; string args may use :data:`PLACEHOLDERS`."""

    model_config = ConfigDict(frozen=True)

    tool: str
    args: dict[str, Any] = Field(default_factory=dict)


ToolStep = PlannedToolCall | str | tuple[str, Mapping[str, Any]] | Mapping[str, Any]
"""One planned call: a :class:`PlannedToolCall`, a tool name, ``(tool, args)`` or a dict."""

PlanItem = ToolStep | Sequence[ToolStep]
"""A plan item: one call, or a list of calls made in one native turn."""


def _step_data(item: Any) -> Any:
    if isinstance(item, str):
        return {"tool": item}
    if isinstance(item, tuple) and len(item) == 2:
        return {"tool": item[0], "args": item[1]}
    if isinstance(item, list):
        return [_step_data(call) for call in item]
    return item


def _call(step: Any) -> PlannedToolCall:
    if isinstance(step, PlannedToolCall):
        return step
    return PlannedToolCall.model_validate(_step_data(step))


def _turns(plan: Sequence[Any]) -> list[list[PlannedToolCall]]:
    """The plan as turns: a list item is one turn, any other item a turn of one call."""
    return [[_call(c) for c in item] if isinstance(item, list) else [_call(item)] for item in plan]


@dataclass(frozen=True)
class ScriptedReply:
    """What :func:`script_reply` answers: the text and whether it calls a tool or finishes."""

    kind: Literal["action", "tool_calls", "final"]
    text: str
    tool_calls: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class ScriptedDraft:
    """A draft read back by :func:`parse_draft`."""

    label: str
    revision: int
    subject: str
    feedback: tuple[str, ...]
    saw_previous_draft: bool
    context: str | None
    notes: tuple[str, ...]


class ScriptedLLM(BaseLLM):
    """A ``BaseLLM`` whose replies follow a script and the conversation, never a network.

    Args:
        model: Shown in logs and events; by convention ``"scripted/<name>"`` (the default is
            ``"scripted/default"``).
        tool_plan: Tool calls to make, in order, in each round; items may be
            :class:`PlannedToolCall`, ``{"tool": ..., "args": {...}}``, ``(tool, args)`` or a
            bare tool name, or a list of those: one native turn with several calls.
        label: The draft's first word, e.g. ``"Outline"`` or ``"Article"``.
        delay: Seconds to sleep before each reply, to stand in for a provider's latency.
        replan_after_feedback: Run the plan again after each ``User feedback:`` message
            (True), or once per task (False).
        context_window: Reported context window in tokens. Large by default so CrewAI never
            summarises the conversation or spills tool results to temp files (both would
            make prompts differ between runs).
        native: Speak native function calling (see the module docstring) instead of ReAct.
        draft_style: ``"line"`` (the default, read back by :func:`parse_draft`) or
            ``"readable"``: a multi-line draft for people, as in the module docstring.
        draft_body: The text of a readable draft; may use the :data:`PLACEHOLDERS`
            (literal braces doubled). Ignored by the one-line format.

    Example:
        >>> llm = ScriptedLLM(model="scripted/writer", label="Outline",
        ...                   tool_plan=[("search", {"query": "{subject}"})])
        >>> agent = Agent(role="Writer", goal="...", backstory="...", llm=llm)
    """

    offline: ClassVar[bool] = True
    """Read by ``crew_runtime.executor.uses_offline_model``: a run on this model says so in
    its thread, so nobody mistakes its canned drafts for a real model's."""

    tool_plan: list[PlannedToolCall | list[PlannedToolCall]] = Field(default_factory=list)
    label: str = "Draft"
    delay: float = Field(default=0.0, ge=0.0)
    replan_after_feedback: bool = True
    context_window: int = Field(default=1_000_000, gt=0)
    native: bool = False
    draft_style: DraftStyle = "line"
    draft_body: str = ""

    _calls: int = PrivateAttr(default=0)

    @model_validator(mode="before")
    @classmethod
    def _default_model(cls, data: Any) -> Any:
        # BaseLLM insists on a model name; a scripted one needs none to be useful.
        if isinstance(data, dict) and not data.get("model"):
            return {**data, "model": "scripted/default"}
        return data

    @field_validator("tool_plan", mode="before")
    @classmethod
    def _coerce_plan(cls, value: Any) -> Any:
        if isinstance(value, list | tuple):
            return [_step_data(item) for item in value]
        return value

    @field_validator("tool_plan")
    @classmethod
    def _check_placeholders(
        cls, plan: list[PlannedToolCall | list[PlannedToolCall]]
    ) -> list[PlannedToolCall | list[PlannedToolCall]]:
        probe = dict.fromkeys(PLACEHOLDERS, "")
        for step in (call for turn in _turns(plan) for call in turn):
            try:
                _fill(step.args, probe)
            except (KeyError, IndexError, ValueError) as exc:
                raise ValueError(
                    f"tool {step.tool!r}: bad placeholder in args {step.args!r} ({exc}); "
                    f"known placeholders: {', '.join('{' + p + '}' for p in PLACEHOLDERS)}"
                ) from exc
        return plan

    @field_validator("draft_body")
    @classmethod
    def _check_body(cls, body: str) -> str:
        try:
            _fill(body, dict.fromkeys(PLACEHOLDERS, ""))
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(
                f"bad placeholder in draft_body ({exc}); known placeholders: "
                f"{', '.join('{' + p + '}' for p in PLACEHOLDERS)} (double literal braces)"
            ) from exc
        return body

    @field_validator("label")
    @classmethod
    def _check_label(cls, label: str) -> str:
        if not label.strip() or any(c in label for c in "|\n\r"):
            raise ValueError("label must be non-empty, on one line, without '|'")
        return label

    @property
    def calls(self) -> int:
        """How many times :meth:`call` or :meth:`acall` ran on this instance."""
        with _CALLS_LOCK:
            return self._calls

    def reply(
        self,
        messages: str | list[LLMMessage],
        response_model: type[BaseModel] | None = None,
        tools: Sequence[Any] | None = None,
    ) -> ScriptedReply:
        """The reply :meth:`call` would give, without counting, logging or sleeping."""
        return script_reply(
            messages,
            tool_plan=self.tool_plan,
            label=self.label,
            replan_after_feedback=self.replan_after_feedback,
            response_model=response_model,
            tools=tools if self.native else None,
            draft_style=self.draft_style,
            draft_body=self.draft_body,
        )

    def call(
        self,
        messages: str | list[LLMMessage],
        tools: list[dict[str, BaseTool]] | None = None,
        callbacks: list[Any] | None = None,
        available_functions: dict[str, Any] | None = None,
        from_task: Task | None = None,
        from_agent: BaseAgent | None = None,
        response_model: type[BaseModel] | None = None,
    ) -> str | list[dict[str, Any]]:
        """Answer from the script; see the module docstring for the rules."""
        self._count()
        result = self.reply(messages, response_model, tools)
        if self.delay:
            time.sleep(self.delay)
        self._log(messages, result)
        return _answer(result)

    async def acall(
        self,
        messages: str | list[LLMMessage],
        tools: list[dict[str, BaseTool]] | None = None,
        callbacks: list[Any] | None = None,
        available_functions: dict[str, Any] | None = None,
        from_task: Task | None = None,
        from_agent: BaseAgent | None = None,
        response_model: type[BaseModel] | None = None,
    ) -> str | list[dict[str, Any]]:
        """Async twin of :meth:`call` (CrewAI 1.15.30 itself only calls ``call``)."""
        self._count()
        result = self.reply(messages, response_model, tools)
        if self.delay:
            await asyncio.sleep(self.delay)
        self._log(messages, result)
        return _answer(result)

    def supports_function_calling(self) -> bool:
        """``native``: CrewAI then passes tool schemas and expects tool calls back; otherwise
        it uses the text ReAct format."""
        return self.native

    def supports_stop_words(self) -> bool:
        """True; the script never writes past ``Action Input``, so stop words never cut it."""
        return True

    def get_context_window_size(self) -> int:
        """The configured window; large so CrewAI's compaction never kicks in."""
        return self.context_window

    def get_input_tokens_count(
        self,
        messages: str | list[LLMMessage],
        tools: list[dict[str, BaseTool]] | None = None,
        response_model: type[BaseModel] | None = None,
    ) -> int:
        """Four characters per token, like the base class, minus its warning on every call."""
        texts = [messages] if isinstance(messages, str) else [_text(m) for m in messages]
        return (sum(len(t) for t in texts) + 3) // 4

    def _count(self) -> None:
        with _CALLS_LOCK:
            self._calls += 1

    def _log(self, messages: str | list[LLMMessage], result: ScriptedReply) -> None:
        """Append one JSON line per call to $COUNTERSIGN_SCRIPTED_LOG, if set.

        Read at call time, not construction, because the readers are often other processes
        (workers) started with the variable set. One ``os.write`` of an ``O_APPEND`` file keeps
        lines from concurrent processes whole.
        """
        path = os.environ.get(LOG_ENV_VAR)
        if not path:
            return
        line = json.dumps(
            {
                "pid": os.getpid(),
                "model": self.model,
                "prompt_sha256": prompt_sha256(messages),
                "reply_kind": result.kind,
            }
        )
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)


def _answer(result: ScriptedReply) -> str | list[dict[str, Any]]:
    if result.kind == "tool_calls":  # fresh plain dicts: CrewAI may keep or change them
        copied: list[dict[str, Any]] = json.loads(json.dumps(list(result.tool_calls)))
        return copied
    return result.text


def prompt_sha256(messages: str | list[LLMMessage]) -> str:
    """Hash of the conversation's roles and texts (and native tool calls), stable across
    processes. Messages without native tool fields hash as before they existed."""
    canonical: list[dict[str, Any]] = [
        {"role": role, "content": text} for role, text in _normalise(messages)
    ]
    if not isinstance(messages, str):
        for entry, message in zip(canonical, messages, strict=True):
            entry.update(_native_fields(message))
    blob = json.dumps(canonical, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def _native_fields(message: LLMMessage) -> dict[str, Any]:
    raw: Mapping[str, Any] = message
    fields: dict[str, Any] = {}
    calls = raw.get("tool_calls")
    if calls:
        fields["tool_calls"] = [_call_info(call) for call in calls]
    for key in ("tool_call_id", "name"):
        if raw.get("role") == "tool" and raw.get(key) is not None:
            fields[key] = str(raw[key])
    return fields


def _call_info(call: Any) -> list[str]:
    """``[id, name, arguments]`` of an OpenAI-style tool call (dict or SDK object)."""
    if isinstance(call, Mapping):
        function = call.get("function") or {}
        name, args = function.get("name", call.get("name", "")), function.get("arguments", "")
        return [str(call.get("id", "")), str(name), args if isinstance(args, str) else str(args)]
    function = getattr(call, "function", None)
    return [
        str(getattr(call, "id", "")),
        str(getattr(function, "name", getattr(call, "name", ""))),
        str(getattr(function, "arguments", "")),
    ]


def _tool_names(tools: Sequence[Any]) -> frozenset[str]:
    """The names in tool schemas as CrewAI passes them (OpenAI style, or flat)."""
    names: set[str] = set()
    for tool in tools:
        if isinstance(tool, Mapping):
            function = tool.get("function")
            name = function.get("name") if isinstance(function, Mapping) else tool.get("name")
        else:
            name = getattr(tool, "name", None)
        if name:
            names.add(str(name))
    return frozenset(names)


def script_reply(
    messages: str | list[LLMMessage],
    *,
    tool_plan: Sequence[PlanItem],
    label: str = "Draft",
    replan_after_feedback: bool = True,
    response_model: type[BaseModel] | None = None,
    tools: Sequence[Any] | None = None,
    draft_style: DraftStyle = "line",
    draft_body: str = "",
) -> ScriptedReply:
    """Decide the scripted reply to a conversation: a pure function of its arguments.

    ``tools`` are the tool schemas of a native function-calling request; given (and not
    empty) the reply speaks the native protocol, otherwise ReAct text. ``draft_style`` and
    ``draft_body`` are those of :class:`ScriptedLLM`.
    """
    normalised = _normalise(messages)
    convo = _Conversation.read(
        normalised, label, _native_info(messages), tools_offered=_offered(tools)
    )
    if draft_style == "readable":
        draft = _render_readable(label, convo, draft_body)
    else:
        draft = _render_draft(label, convo)
    if response_model is not None:
        structured = _trivial_json(response_model, draft)
        if structured is not None:
            return ScriptedReply("final", structured)
    turns = [[c for c in turn if c.tool in convo.tools_offered] for turn in _turns(tool_plan)]
    if tools:
        turns = [turn for turn in turns if turn]
        done = convo.turns_in_round(replan_after_feedback)
        if done >= len(turns):
            return ScriptedReply("final", draft)
        digest = prompt_sha256(messages)[:16]
        values = _values(convo, done + 1)
        calls = tuple(
            {
                "id": f"call_{digest}_{n}",
                "type": "function",
                "function": {
                    "name": call.tool,
                    "arguments": json.dumps(_fill(call.args, values), ensure_ascii=False),
                },
            }
            for n, call in enumerate(turns[done])
        )
        return ScriptedReply("tool_calls", json.dumps(list(calls), ensure_ascii=False), calls)
    offered = [call for turn in turns for call in turn]
    done = convo.observations_in_round(replan_after_feedback)
    if done < len(offered):
        step = offered[done]
        args = json.dumps(_fill(step.args, _values(convo, done + 1)), ensure_ascii=False)
        return ScriptedReply(
            "action",
            f"Thought: I should use {step.tool} (step {done + 1} of {len(offered)})\n"
            f"Action: {step.tool}\nAction Input: {args}",
        )
    return ScriptedReply("final", f"Thought: I now know the final answer\nFinal Answer: {draft}")


def _values(convo: _Conversation, step: int) -> dict[str, object]:
    return {
        "subject": convo.subject,
        "context": convo.context or "",
        "feedback": convo.feedback[-1] if convo.feedback else "",
        "observation": convo.observations[-1][1] if convo.observations else "",
        "revision": len(convo.feedback),
        "step": step,
    }


def _offered(tools: Sequence[Any] | None) -> frozenset[str] | None:
    return _tool_names(tools) if tools else None


def _native_info(messages: str | list[LLMMessage]) -> list[tuple[int, str]]:
    """Per message: how many native tool calls it carries, and its tool name (role tool)."""
    if isinstance(messages, str):
        return [(0, "")]
    info: list[tuple[int, str]] = []
    for message in messages:
        raw: Mapping[str, Any] = message
        calls = raw.get("tool_calls")
        info.append(
            (len(calls) if isinstance(calls, list | tuple) else 0, str(raw.get("name") or ""))
        )
    return info


def parse_draft(text: str) -> ScriptedDraft:
    """Read a draft written by :class:`ScriptedLLM` back into its parts.

    Accepts the draft alone or a reply ending in ``Final Answer: <draft>``.

    Raises:
        ValueError: ``text`` is not a scripted draft.
    """
    if _FINAL_ANSWER_MARK in text:
        text = text.rsplit(_FINAL_ANSWER_MARK, 1)[1]
    text = text.strip()
    head = re.match(r"(?P<label>[^|\n]+?) v(?P<revision>\d+) on ", text)
    if head is None:
        raise ValueError(f"not a scripted draft: {text[:80]!r}")
    reader = _Reader(text, head.end())
    subject = reader.value(str)
    feedback = reader.field("feedback", list)
    saw = reader.field("saw_previous_draft", None)
    context = reader.field("context", str | None)
    notes = reader.field("notes", list)
    reader.end()
    return ScriptedDraft(
        label=head["label"],
        revision=int(head["revision"]),
        subject=subject,
        feedback=tuple(str(f) for f in feedback),
        saw_previous_draft=saw == "yes",
        context=context,
        notes=tuple(str(n) for n in notes),
    )


# --- reading the conversation ------------------------------------------------------------


@dataclass(frozen=True)
class _Conversation:
    """What the script needs to know about a conversation, read from CrewAI's prompt text."""

    subject: str
    context: str | None
    tools_offered: frozenset[str]
    feedback: tuple[str, ...]
    observations: tuple[tuple[str, str], ...]  # (tool name, observation text), in order
    observation_positions: tuple[int, ...]  # message index of each observation
    last_feedback_position: int | None
    saw_previous_draft: bool
    turn_positions: tuple[int, ...] = ()  # message index of each native tool-call turn

    @classmethod
    def read(
        cls,
        messages: list[tuple[str, str]],
        label: str,
        native: Sequence[tuple[int, str]] = (),
        tools_offered: frozenset[str] | None = None,
    ) -> _Conversation:
        """Read the conversation. ``native`` gives each message's count of native tool calls
        and tool name (see :func:`_native_info`); ``tools_offered`` are the names of native
        tool schemas (without them, the tools the prompt lists)."""
        task_at = _task_prompt_index(messages)
        prompt = messages[task_at][1] if task_at is not None else ""
        description = _between(prompt, _TASK_MARK, (_EXPECTED_MARK, _CONTEXT_MARK, *_PROMPT_TAILS))
        if task_at is None:  # not a CrewAI agent conversation: use the last user message
            users = [text for role, text in messages if role == "user"]
            description = users[-1] if users else (messages[-1][1] if messages else "")
        context = None
        if _CONTEXT_MARK in prompt:
            context = _between(prompt, _CONTEXT_MARK, _PROMPT_TAILS, last=True)
        offered: set[str] = set(tools_offered or ())
        if tools_offered is None:
            for _, text in messages[: (task_at or 0) + 1]:
                offered.update(_TOOL_NAME_RE.findall(text))
        start = 0 if task_at is None else task_at + 1
        feedback: list[str] = []
        observations: list[tuple[str, str]] = []
        positions: list[int] = []
        turns: list[int] = []
        last_feedback: int | None = None
        saw_draft = False
        draft_head = re.compile(re.escape(label) + r" v\d+ on \"")
        for i in range(start, len(messages)):
            role, text = messages[i]
            calls, name = native[i] if i < len(native) else (0, "")
            if role == "assistant" and calls:
                turns.append(i)  # a native turn; its results follow as role "tool"
                continue
            if role == "tool":
                observed = text.split(_TOOLS_REMINDER, 1)[0].strip()
                observations.append((name or "?", observed))
                continue
            if role == "user" and _FEEDBACK_MARK in text:
                feedback.append(_between(text, _FEEDBACK_MARK, (_FEEDBACK_TAIL,)))
                last_feedback = i
                text = text[: text.find(_FEEDBACK_MARK)]  # a draft may be quoted before it
            elif role == "assistant" and _OBSERVATION_MARK in text:
                action_part, _, observed = text.partition(_OBSERVATION_MARK)
                tools = _ACTION_RE.findall(action_part)
                observed = observed.split(_TOOLS_REMINDER, 1)[0].strip()
                observations.append((tools[-1] if tools else "?", observed))
                positions.append(i)
                continue
            if (role == "assistant" and _FINAL_ANSWER_MARK in text) or draft_head.search(text):
                saw_draft = True
        return cls(
            subject=_first_line(description),
            context=context,
            tools_offered=frozenset(offered),
            feedback=tuple(feedback),
            observations=tuple(observations),
            observation_positions=tuple(positions),
            last_feedback_position=last_feedback,
            saw_previous_draft=saw_draft,
            turn_positions=tuple(turns),
        )

    def observations_in_round(self, replan_after_feedback: bool) -> int:
        return self._in_round(self.observation_positions, replan_after_feedback)

    def turns_in_round(self, replan_after_feedback: bool) -> int:
        return self._in_round(self.turn_positions, replan_after_feedback)

    def _in_round(self, positions: tuple[int, ...], replan_after_feedback: bool) -> int:
        if not replan_after_feedback or self.last_feedback_position is None:
            return len(positions)
        return sum(1 for p in positions if p > self.last_feedback_position)


def _normalise(messages: str | list[LLMMessage]) -> list[tuple[str, str]]:
    if isinstance(messages, str):
        return [("user", messages)]
    return [(str(m.get("role", "")), _text(m)) for m in messages]


def _text(message: LLMMessage) -> str:
    content: Any = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # multimodal content blocks
        return "\n".join(str(block.get("text", "")) for block in content if isinstance(block, dict))
    return "" if content is None else str(content)


def _task_prompt_index(messages: list[tuple[str, str]]) -> int | None:
    for i in range(len(messages) - 1, -1, -1):
        role, text = messages[i]
        if role != "assistant" and _TASK_MARK in text:
            return i
    return None


def _between(text: str, mark: str, ends: tuple[str, ...], last: bool = False) -> str:
    """The text after ``mark`` (its last occurrence if ``last``) up to the first of ``ends``."""
    at = text.rfind(mark) if last else text.find(mark)
    if at < 0:
        return ""
    rest = text[at + len(mark) :]
    cut = min((i for i in (rest.find(e) for e in ends) if i >= 0), default=len(rest))
    return rest[:cut].strip()


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


# --- writing -----------------------------------------------------------------------------


def _render_draft(label: str, convo: _Conversation) -> str:
    def j(value: object) -> str:
        return _REACT_KEYWORD_RE.sub(r"\1\2\\u003a", json.dumps(value, ensure_ascii=False))

    notes = [f"{tool}: {observed}" for tool, observed in convo.observations]
    return (
        f"{label} v{len(convo.feedback)} on {j(convo.subject)}"
        f" | feedback: {j(list(convo.feedback))}"
        f" | saw_previous_draft: {'yes' if convo.saw_previous_draft else 'no'}"
        f" | context: {j(convo.context)}"
        f" | notes: {j(notes)}"
    )


def _render_readable(label: str, convo: _Conversation, body: str) -> str:
    """A draft for people: see the module docstring."""
    parts = [f"{label} (version {len(convo.feedback) + 1})"]
    if convo.feedback:
        parts[0] += "\nRevised after your feedback:"
        parts[0] += "".join(f"\n✓ {_indented(text)}" for text in convo.feedback)
    values = _values(convo, len(convo.observations))
    parts.append(_fill(body, values).strip() if body.strip() else convo.subject)
    if convo.observations:
        notes = (f"• {tool}: {_indented(observed)}" for tool, observed in convo.observations)
        parts.append("Gathered along the way:\n" + "\n".join(notes))
    if convo.context:
        parts.append(f'Built on: "{_first_line(convo.context)}"')
    return _REACT_KEYWORD_RE.sub(rf"\1\2{_READABLE_COLON}", "\n\n".join(parts))


def _indented(text: str) -> str:
    """Continuation lines of a bullet, indented under it."""
    return "\n  ".join(line.rstrip() for line in text.strip().splitlines())


def _fill(value: Any, values: Mapping[str, object]) -> Any:
    """Fill ``{placeholders}`` in every string inside ``value`` (dicts and lists walked)."""
    if isinstance(value, str):
        return value.format_map(values)
    if isinstance(value, dict):
        return {k: _fill(v, values) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, values) for v in value]
    return value


def _trivial_json(model: type[BaseModel], draft: str) -> str | None:
    """A JSON instance of ``model`` when every required field is a plain type, else None.

    Strings get the draft so structured outputs still show what the model saw.
    """
    trivial: dict[Any, object] = {str: draft, int: 0, float: 0.0, bool: False}
    data: dict[str, object] = {}
    for name, info in model.model_fields.items():
        if not info.is_required():
            continue
        annotation = info.annotation
        if annotation in trivial:
            data[name] = trivial[annotation]
        elif annotation in (list, tuple, set) or get_origin(annotation) in (list, tuple, set):
            data[name] = []
        else:
            return None
    try:
        return model.model_validate(data).model_dump_json()
    except ValidationError:
        return None


class _Reader:
    """Walks a draft's ``| key: <json>`` fields for :func:`parse_draft`."""

    def __init__(self, text: str, pos: int) -> None:
        self.text = text
        self.pos = pos
        self.decoder = json.JSONDecoder()

    def value(self, expected: Any) -> Any:
        try:
            value, self.pos = self.decoder.raw_decode(self.text, self.pos)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not a scripted draft: {exc}") from exc
        if expected is not None and not isinstance(value, expected):
            raise ValueError(f"not a scripted draft: unexpected {value!r}")
        return value

    def field(self, key: str, expected: Any) -> Any:
        prefix = f" | {key}: "
        if not self.text.startswith(prefix, self.pos):
            raise ValueError(f"not a scripted draft: expected {prefix!r} at {self.pos}")
        self.pos += len(prefix)
        if expected is None:  # the bare word yes/no
            word = re.compile(r"yes|no").match(self.text, self.pos)
            if word is None:
                raise ValueError("not a scripted draft: saw_previous_draft is not yes/no")
            self.pos = word.end()
            return word.group()
        return self.value(expected)

    def end(self) -> None:
        if self.pos != len(self.text):
            raise ValueError(f"not a scripted draft: trailing text {self.text[self.pos :]!r}")
