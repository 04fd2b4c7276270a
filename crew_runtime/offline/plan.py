"""The tool plan of a scripted model: the calls to make in each round, and the placeholders
their arguments may use (filled from the conversation)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field

from crew_runtime.offline.conversation import Conversation

# Placeholders a planned tool argument may use, e.g. {"query": "{subject}"}; filled with
# str.format, so literal braces are doubled.
PLACEHOLDERS: Final = ("subject", "context", "feedback", "observation", "revision", "step")


class PlannedToolCall(BaseModel):
    """One tool call in a :class:`ScriptedLLM` plan; string args may use :data:`PLACEHOLDERS`."""

    model_config = ConfigDict(frozen=True)

    tool: str
    args: dict[str, Any] = Field(default_factory=dict)


ToolStep = PlannedToolCall | str | tuple[str, Mapping[str, Any]] | Mapping[str, Any]
"""One planned call: a :class:`PlannedToolCall`, a tool name, ``(tool, args)`` or a dict."""

PlanItem = ToolStep | Sequence[ToolStep]
"""A plan item: one call, or a list of calls made in one native turn."""


def step_data(item: Any) -> Any:
    if isinstance(item, str):
        return {"tool": item}
    if isinstance(item, tuple) and len(item) == 2:
        return {"tool": item[0], "args": item[1]}
    if isinstance(item, list):
        return [step_data(call) for call in item]
    return item


def _call(step: Any) -> PlannedToolCall:
    if isinstance(step, PlannedToolCall):
        return step
    return PlannedToolCall.model_validate(step_data(step))


def plan_turns(plan: Sequence[Any]) -> list[list[PlannedToolCall]]:
    """The plan as turns: a list item is one turn, any other item a turn of one call."""
    return [[_call(c) for c in item] if isinstance(item, list) else [_call(item)] for item in plan]


def placeholder_values(convo: Conversation, step: int) -> dict[str, object]:
    return {
        "subject": convo.subject,
        "context": convo.context or "",
        "feedback": convo.feedback[-1] if convo.feedback else "",
        "observation": convo.observations[-1][1] if convo.observations else "",
        "revision": len(convo.feedback),
        "step": step,
    }


def fill(value: Any, values: Mapping[str, object]) -> Any:
    """Fill ``{placeholders}`` in every string inside ``value`` (dicts and lists walked)."""
    if isinstance(value, str):
        return value.format_map(values)
    if isinstance(value, dict):
        return {k: fill(v, values) for k, v in value.items()}
    if isinstance(value, list):
        return [fill(v, values) for v in value]
    return value
