"""A provider's tool-call turn, journaled as JSON and replayed as the objects it gave.

CrewAI's native providers hand a turn of tool calls back as their SDK's own objects: OpenAI's
``ChatCompletionMessageToolCall``, Anthropic's ``ToolUseBlock``, Gemini's ``types.Part``,
LiteLLM's ``ChatCompletionMessageToolCall`` (streamed turns are often plain dicts). CrewAI
reads them by their shape (``crewai.utilities.agent_utils.extract_tool_call_info``) and, for
Gemini, by their class (a ``Part`` keeps its thought signature for the next request). A dict
of a ``Part`` is not read as a tool call at all: the turn ended the task with no answer and
the approved call never ran. So each item is journaled with the class it was, and replayed
as an instance of it again.

Only classes of the provider SDKs named in :data:`_PACKAGES` are rebuilt (by pydantic
validation, never by unpickling); a class that cannot be had, or a turn CrewAI cannot read
back, is a :class:`TurnUnreadable`, which fails the run with the reason instead of letting
it end as if the model had answered.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import re
from typing import Any

from crewai.utilities.agent_utils import extract_tool_call_info, is_tool_call_list
from pydantic import BaseModel

from crew_runtime.errors import CrewRuntimeError

# The SDKs whose response classes a replay may rebuild, by module prefix.
_PACKAGES = ("openai.", "anthropic.", "google.genai.", "litellm.")
# The id CrewAI makes up for a tool call that has none of its own (Gemini's):
# ``call_{id(part)}``, a memory address, different in every process. A match counts only where a
# word starts (:func:`made_up_id`): a leading ``\b`` in the pattern makes re try it at every
# character instead of searching for the literal, which cost 4x the whole prompt hash of a long
# conversation (a resume after 300 review rounds took twice the CPU; docs/benchmarks.md).
MADE_UP_ID = re.compile(r"call_\d{5,}\b")


def made_up_id(match: re.Match[str]) -> bool:
    """Whether a :data:`MADE_UP_ID` match starts a word (not ``recall_12345``)."""
    start = match.start()
    return start == 0 or not (match.string[start - 1].isalnum() or match.string[start - 1] == "_")


class TurnUnreadable(CrewRuntimeError):
    """A model turn the journal cannot give back as CrewAI must read it."""


def class_name(value: Any) -> str | None:
    """``module:qualname`` of a provider SDK's model, else None (plain JSON)."""
    kind = type(value)
    if isinstance(value, BaseModel) and kind.__module__.startswith(_PACKAGES):
        return f"{kind.__module__}:{kind.__qualname__}"
    return None


def rebuild(name: str, data: Any) -> Any:
    """An instance of the SDK class ``name`` (see :func:`class_name`) from its JSON."""
    module, _, qualname = name.partition(":")
    if not module.startswith(_PACKAGES):
        raise TurnUnreadable(f"the journal names {name}, not a provider SDK's class")
    try:
        found: Any = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError) as exc:
        raise TurnUnreadable(
            f"the turn was recorded as {name}, which this worker cannot import ({exc}): "
            "install the provider's SDK (the CrewAI extra) the run was recorded with"
        ) from None
    if not (isinstance(found, type) and issubclass(found, BaseModel)):
        raise TurnUnreadable(f"the journal names {name}, which is not a pydantic model")
    return found.model_validate(data)


def calls_read(response: Any) -> list[tuple[str, Any]] | None:
    """The (name, arguments) CrewAI reads from a list it is given as a turn; None when the
    list is not one of tool calls CrewAI can read."""
    if not (isinstance(response, list) and response and is_tool_call_list(response)):
        return None
    infos = [extract_tool_call_info(item) for item in response]
    if any(info is None for info in infos):
        return None
    read = []
    for info in infos:
        assert info is not None
        _, name, args = info
        if isinstance(args, str):
            with contextlib.suppress(json.JSONDecodeError):
                args = json.loads(args) if args else {}
        read.append((name, args))
    return read


def check_readable(response: Any, recorded: Any, where: str) -> None:
    """Raise when ``response`` (a replayed turn, or a turn as the journal will replay it) is
    a list CrewAI cannot read as the tool calls ``recorded`` made."""
    if not isinstance(response, list):
        return
    read = calls_read(response)
    if read is None:
        raise TurnUnreadable(
            f"{where}: the model's tool calls would reach CrewAI as {_kinds(response)}, "
            "which it does not read as tool calls (the approved calls would never run)"
        )
    if recorded is not None and read != calls_read(recorded):
        raise TurnUnreadable(f"{where}: replayed, the model's tool calls would read differently")


def _kinds(items: list[Any]) -> str:
    return ", ".join(sorted({type(item).__name__ for item in items}))
