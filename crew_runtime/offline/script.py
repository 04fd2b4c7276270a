"""The scripted model's reply: a pure function of the conversation and the plan.

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

The draft and its two styles: see ``crew_runtime.offline.drafts``.

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

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, get_origin

from pydantic import BaseModel, ValidationError

from crew_runtime.offline.conversation import (
    Conversation,
    native_info,
    normalise,
    prompt_sha256,
    tool_names,
)
from crew_runtime.offline.drafts import DraftStyle, line_draft, readable_draft
from crew_runtime.offline.plan import PlanItem, fill, placeholder_values, plan_turns

if TYPE_CHECKING:
    from crewai.utilities.types import LLMMessage


@dataclass(frozen=True)
class ScriptedReply:
    """What :func:`script_reply` answers: the text and whether it calls a tool or finishes."""

    kind: Literal["action", "tool_calls", "final"]
    text: str
    tool_calls: tuple[dict[str, Any], ...] = ()


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
    normalised = normalise(messages)
    convo = Conversation.read(
        normalised, label, native_info(messages), tools_offered=_offered(tools)
    )
    if draft_style == "readable":
        draft = readable_draft(label, convo, draft_body)
    else:
        draft = line_draft(label, convo)
    if response_model is not None:
        structured = _trivial_json(response_model, draft)
        if structured is not None:
            return ScriptedReply("final", structured)
    turns = [[c for c in turn if c.tool in convo.tools_offered] for turn in plan_turns(tool_plan)]
    if tools:
        turns = [turn for turn in turns if turn]
        done = convo.turns_in_round(replan_after_feedback)
        if done >= len(turns):
            return ScriptedReply("final", draft)
        digest = prompt_sha256(messages)[:16]
        values = placeholder_values(convo, done + 1)
        calls = tuple(
            {
                "id": f"call_{digest}_{n}",
                "type": "function",
                "function": {
                    "name": call.tool,
                    "arguments": json.dumps(fill(call.args, values), ensure_ascii=False),
                },
            }
            for n, call in enumerate(turns[done])
        )
        return ScriptedReply("tool_calls", json.dumps(list(calls), ensure_ascii=False), calls)
    offered = [call for turn in turns for call in turn]
    done = convo.observations_in_round(replan_after_feedback)
    if done < len(offered):
        step = offered[done]
        args = json.dumps(fill(step.args, placeholder_values(convo, done + 1)), ensure_ascii=False)
        return ScriptedReply(
            "action",
            f"Thought: I should use {step.tool} (step {done + 1} of {len(offered)})\n"
            f"Action: {step.tool}\nAction Input: {args}",
        )
    return ScriptedReply("final", f"Thought: I now know the final answer\nFinal Answer: {draft}")


def _offered(tools: Sequence[Any] | None) -> frozenset[str] | None:
    return tool_names(tools) if tools else None


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
