"""What keeps Countersign working across CrewAI releases and providers, tested without a
process: the supported range, and the check that a replayed tool-call turn reads as one."""

from __future__ import annotations

import pytest

from crew_runtime.shapes import TurnUnreadable, check_readable


def test_a_list_crewai_does_not_read_as_tool_calls_is_refused() -> None:
    """The check itself: Gemini's Part as a plain dict is what CrewAI read as no tool call."""
    part = {"function_call": {"name": "pay", "args": {"amount": 1}}, "text": None}
    with pytest.raises(TurnUnreadable, match="does not read as tool calls"):
        check_readable([part], None, "LLM turn 0 of task0:Clerk")
    call = {"id": "c1", "type": "function", "function": {"name": "pay", "arguments": "{}"}}
    check_readable([call], [call], "LLM turn 0 of task0:Clerk")
