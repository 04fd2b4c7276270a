"""A deterministic scripted LLM, so the real CrewAI agent loop runs without a provider.

Tests, benchmarks and the offline demo need crews whose agents really go through CrewAI's
ReAct loop (tools listed in the prompt, ``Action:``/``Observation:``, ``Final Answer:``,
``human_input`` feedback rounds) but never touch the network. :class:`ScriptedLLM` answers
like an agent would, and its reply is a pure function of the conversation and its plan: the
same messages always get the same reply, in any process. That is what lets a journal replay
a conversation elsewhere and compare prompt hashes.

Its parts: the tool plan (``crew_runtime.offline.plan``), what is read from CrewAI's
conversation (``crew_runtime.offline.conversation``), the reply rules
(``crew_runtime.offline.script``, :func:`~crew_runtime.offline.script.script_reply`) and the
drafts they write (``crew_runtime.offline.drafts``, read back by
:func:`~crew_runtime.offline.drafts.parse_draft`).
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Final

from crewai.llms.base_llm import BaseLLM
from pydantic import BaseModel, Field, PrivateAttr, field_validator, model_validator

from crew_runtime.offline.conversation import message_text, prompt_sha256
from crew_runtime.offline.drafts import DraftStyle
from crew_runtime.offline.plan import PLACEHOLDERS, PlannedToolCall, fill, plan_turns, step_data
from crew_runtime.offline.script import ScriptedReply, script_reply

if TYPE_CHECKING:
    from crewai.agents.agent_builder.base_agent import BaseAgent
    from crewai.task import Task
    from crewai.tools.base_tool import BaseTool
    from crewai.utilities.types import LLMMessage

LOG_ENV_VAR: Final = "COUNTERSIGN_SCRIPTED_LOG"

_CALLS_LOCK = threading.Lock()  # module-level: a Lock in a pydantic model breaks deepcopy


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
        native: Speak native function calling instead of ReAct (see
            ``crew_runtime.offline.script``).
        draft_style: ``"line"`` (the default, read back by :func:`parse_draft`) or
            ``"readable"``: a multi-line draft for people (see ``crew_runtime.offline.drafts``).
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
            return [step_data(item) for item in value]
        return value

    @field_validator("tool_plan")
    @classmethod
    def _check_placeholders(
        cls, plan: list[PlannedToolCall | list[PlannedToolCall]]
    ) -> list[PlannedToolCall | list[PlannedToolCall]]:
        probe = dict.fromkeys(PLACEHOLDERS, "")
        for step in (call for turn in plan_turns(plan) for call in turn):
            try:
                fill(step.args, probe)
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
            fill(body, dict.fromkeys(PLACEHOLDERS, ""))
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
        """Answer from the script; the rules are :func:`script_reply`'s."""
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
        texts = [messages] if isinstance(messages, str) else [message_text(m) for m in messages]
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
