"""What the scripted model reads from a conversation: CrewAI's task prompt, feedback, tool
observations and native tool-call turns; and the conversation's hash."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from crewai.utilities.types import LLMMessage

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
FINAL_ANSWER_MARK: Final = "Final Answer:"
# Every third tool use in a task, CrewAI appends the whole tool list to the observation
# (tools/tool_usage.py:760-776, slice "tools"); it is noise in a note.
_TOOLS_REMINDER: Final = "\nYou ONLY have access to the following tools"


def prompt_sha256(messages: str | list[LLMMessage]) -> str:
    """Hash of the conversation's roles and texts (and native tool calls), stable across
    processes. Messages without native tool fields hash as before they existed."""
    canonical: list[dict[str, Any]] = [
        {"role": role, "content": text} for role, text in normalise(messages)
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


def tool_names(tools: Sequence[Any]) -> frozenset[str]:
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


def native_info(messages: str | list[LLMMessage]) -> list[tuple[int, str]]:
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


@dataclass(frozen=True)
class Conversation:
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
    ) -> Conversation:
        """Read the conversation. ``native`` gives each message's count of native tool calls
        and tool name (see :func:`native_info`); ``tools_offered`` are the names of native
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
            if (role == "assistant" and FINAL_ANSWER_MARK in text) or draft_head.search(text):
                saw_draft = True
        return cls(
            subject=first_line(description),
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


def normalise(messages: str | list[LLMMessage]) -> list[tuple[str, str]]:
    if isinstance(messages, str):
        return [("user", messages)]
    return [(str(m.get("role", "")), message_text(m)) for m in messages]


def message_text(message: LLMMessage) -> str:
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


def first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")
