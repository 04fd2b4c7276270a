"""What a review holds besides its prompt: one frozen type per kind of review.

The runtime builds them where it opens a review (``ask_human``, a task's draft, a gated tool
call, a flow's ``@human_feedback``); the service, the CLI and the bot read their attributes.
They are stored as a JSON object (``reviews.details``), written by :func:`details_to_json`
and read back by :func:`details_from_json`, which takes rows written before a key existed:
a key that is missing, or does not hold its type, reads as its default.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from storage.status import ReviewKind

__all__ = [
    "FlowFeedbackDetails",
    "QuestionDetails",
    "ReviewDetails",
    "TaskReviewDetails",
    "ToolApprovalDetails",
    "details_from_json",
    "details_to_json",
]


@dataclass(frozen=True)
class QuestionDetails:
    """An agent's question (``ask_human``)."""

    kind: ClassVar[ReviewKind] = ReviewKind.QUESTION

    agent: str = ""  # the role of the agent asking


@dataclass(frozen=True)
class TaskReviewDetails:
    """A task's draft (``human_input=True``), reviewed before the task completes."""

    kind: ClassVar[ReviewKind] = ReviewKind.TASK_REVIEW

    task: str = ""  # the task's name, if it has one
    description: str = ""
    expected_output: str = ""
    agent: str = ""  # the role of the agent that drafted it
    round: int = 0  # 0 for the first draft, then one more per change request
    output_model: str | None = None  # a typed task's output model (its class name)
    output_schema: dict[str, Any] | None = None  # its JSON schema, when JSON can say it
    output_problem: str | None = None  # why the draft is not JSON of the model
    refused_edit: str | None = None  # why the last edit was not taken


@dataclass(frozen=True)
class FlowFeedbackDetails:
    """A flow's ``@human_feedback`` on a step's output (a task review of the flow)."""

    kind: ClassVar[ReviewKind] = ReviewKind.TASK_REVIEW

    task: str = ""  # the flow method asking
    description: str = ""  # the flow's message to the reviewer
    agent: str = ""  # the flow's class name
    flow_id: str = ""
    outcomes: tuple[str, ...] = ()  # the outcomes the decision routes to
    reads_feedback: bool | None = None  # True: the flow names a model (llm=) to read words


@dataclass(frozen=True)
class ToolApprovalDetails:
    """A gated tool call, held until a reviewer approves it."""

    kind: ClassVar[ReviewKind] = ReviewKind.TOOL_APPROVAL

    tool: str = ""
    description: str = ""  # the tool's
    args: dict[str, Any] | None = None  # the proposed arguments (None in rows from before)
    schema: dict[str, Any] = field(default_factory=dict)  # the tool's argument JSON schema
    rule: str | None = None  # the rule that raised the review (crew_runtime.rules), if any


ReviewDetails = QuestionDetails | TaskReviewDetails | FlowFeedbackDetails | ToolApprovalDetails


def details_to_json(details: ReviewDetails) -> dict[str, Any]:
    """The JSON object stored for ``details``; a field that is ``None`` is left out."""
    stored: dict[str, Any] = {}
    for f in fields(details):
        value = getattr(details, f.name)
        if value is not None:
            stored[f.name] = list(value) if isinstance(value, tuple) else value
    return stored


def details_from_json(kind: ReviewKind, data: Mapping[str, Any]) -> ReviewDetails:
    """The details of a review of ``kind`` from their stored JSON, however old the row."""
    if kind is ReviewKind.QUESTION:
        return QuestionDetails(agent=_str(data, "agent"))
    if kind is ReviewKind.TOOL_APPROVAL:
        return ToolApprovalDetails(
            tool=_str(data, "tool"),
            description=_str(data, "description"),
            args=_dict(data, "args"),
            schema=_dict(data, "schema") or {},
            rule=_optional_str(data, "rule"),
        )
    task, description, agent = (_str(data, key) for key in ("task", "description", "agent"))
    if "flow_id" in data:
        outcomes = data.get("outcomes")
        return FlowFeedbackDetails(
            task=task,
            description=description,
            agent=agent,
            flow_id=_str(data, "flow_id"),
            outcomes=tuple(o for o in outcomes if isinstance(o, str))
            if isinstance(outcomes, list)
            else (),
            reads_feedback=True if data.get("reads_feedback") is True else None,
        )
    round_ = data.get("round")
    return TaskReviewDetails(
        task=task,
        description=description,
        expected_output=_str(data, "expected_output"),
        agent=agent,
        round=round_ if isinstance(round_, int) and not isinstance(round_, bool) else 0,
        output_model=_optional_str(data, "output_model"),
        output_schema=_dict(data, "output_schema"),
        output_problem=_optional_str(data, "output_problem"),
        refused_edit=_optional_str(data, "refused_edit"),
    )


def _str(data: Mapping[str, Any], key: str) -> str:
    return _optional_str(data, key) or ""


def _optional_str(data: Mapping[str, Any], key: str) -> str | None:
    value = data.get(key)
    return value if isinstance(value, str) else None


def _dict(data: Mapping[str, Any], key: str) -> dict[str, Any] | None:
    value = data.get(key)
    return value if isinstance(value, dict) else None
