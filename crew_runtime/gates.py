"""Gated tools: a tool call that must not run before a reviewer approves that exact call.

Mark a tool in code::

    from crew_runtime import requires_approval
    pay = requires_approval(PayTool(), when=lambda args: args["amount"] >= 1000)

or by name in ``countersign.toml`` (``approval_tools = ["send_email"]``). The journal's
before-hook stops a gated call that has no decision (the run suspends with a tool
approval review); on resume an approval runs it, an edit runs it with the reviewer's
arguments and tells the model what changed, a denial returns the reason to the model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from crewai.tools import BaseTool
from crewai.utilities.string_utils import sanitize_tool_name
from pydantic import BaseModel, ConfigDict, Field

Condition = Callable[[dict[str, Any]], bool]


class GatedTool(BaseTool):
    """A tool that Countersign runs only with a reviewer's approval."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    inner: BaseTool = Field(exclude=True)
    condition: Condition | None = Field(default=None, exclude=True)

    def _run(self, **kwargs: Any) -> Any:
        return self.inner.run(**kwargs)


def requires_approval(tool: BaseTool, *, when: Condition | None = None) -> GatedTool:
    """Gate ``tool``: every call (or, with ``when``, every call whose arguments match)
    waits for a reviewer's approval in the run's thread."""
    schema: type[BaseModel] = tool.args_schema
    return GatedTool(
        name=tool.name,
        description=tool.description,
        args_schema=schema,
        inner=tool,
        condition=when,
    )


@dataclass(frozen=True)
class Gate:
    """How one tool of a run is gated: its description, argument schema and condition."""

    description: str
    schema: dict[str, Any]
    condition: Condition | None = None

    def applies(self, args: dict[str, Any]) -> bool:
        if self.condition is None:
            return True
        try:
            return bool(self.condition(args))
        except Exception:  # a condition that cannot decide gates the call: safe by default
            return True


def gates_of(agents: list[Any], approval_tools: tuple[str, ...]) -> dict[str, Gate]:
    """The gated tools of a crew, by name: ``GatedTool``s and the configured names."""
    gates: dict[str, Gate] = {}
    for agent in agents:
        for tool in getattr(agent, "tools", None) or []:
            condition = tool.condition if isinstance(tool, GatedTool) else None
            if isinstance(tool, GatedTool) or tool.name in approval_tools:
                # Hooks see sanitised names (utilities/tool_utils.py:273).
                gates[sanitize_tool_name(tool.name)] = Gate(
                    description=tool.description,
                    schema=tool.args_schema.model_json_schema(),
                    condition=condition,
                )
    return gates
