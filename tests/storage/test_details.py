"""A review's details: typed per kind, stored as JSON, and rows from before still load."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import update

from storage import (
    FlowFeedbackDetails,
    NewReview,
    QuestionDetails,
    ReviewDetails,
    ReviewKind,
    Store,
    TaskReviewDetails,
    ToolApprovalDetails,
    details_from_json,
    details_to_json,
)
from storage.schema import reviews

SCHEMA = {"properties": {"amount": {"type": "integer"}}, "required": ["amount"]}

EVERY_SHAPE: list[ReviewDetails] = [
    QuestionDetails(agent="Researcher"),
    QuestionDetails(),
    TaskReviewDetails(
        task="outline",
        description="Outline the post",
        expected_output="An outline",
        agent="Writer",
        round=2,
        output_model="Outline",
        output_schema={"type": "object", "properties": {"title": {"type": "string"}}},
        output_problem="(the output): Invalid JSON",
        refused_edit="it does not fit Outline",
    ),
    TaskReviewDetails(task="", description="d", expected_output="", agent="Writer", round=0),
    FlowFeedbackDetails(
        task="review", description="Publish?", agent="PostFlow", flow_id="f-1", outcomes=("a",)
    ),
    FlowFeedbackDetails(flow_id="f-2"),
    ToolApprovalDetails(tool="pay", description="Pays", args={"amount": 5}, schema=SCHEMA),
    ToolApprovalDetails(tool="pay", args={}),
]


@pytest.mark.parametrize("details", EVERY_SHAPE, ids=lambda d: type(d).__name__)
def test_details_round_trip_through_json(details: ReviewDetails) -> None:
    stored = json.loads(json.dumps(details_to_json(details)))
    assert details_from_json(details.kind, stored) == details
    assert details_to_json(details_from_json(details.kind, stored)) == stored


def test_the_json_keeps_the_keys_reviews_were_always_stored_with() -> None:
    """What the runtime wrote before the details were typed, key for key."""
    assert details_to_json(TaskReviewDetails(task="t", description="d", agent="A", round=1)) == {
        "task": "t",
        "description": "d",
        "expected_output": "",
        "agent": "A",
        "round": 1,
    }
    tool = ToolApprovalDetails(tool="pay", description="Pays", args={"amount": 5}, schema=SCHEMA)
    assert details_to_json(tool) == {
        "tool": "pay",
        "description": "Pays",
        "args": {"amount": 5},
        "schema": SCHEMA,
    }
    flow = FlowFeedbackDetails(task="m", description="?", agent="F", flow_id="f", outcomes=("x",))
    assert details_to_json(flow) == {
        "task": "m",
        "description": "?",
        "agent": "F",
        "flow_id": "f",
        "outcomes": ["x"],
    }
    assert details_to_json(QuestionDetails(agent="A")) == {"agent": "A"}


@pytest.mark.parametrize("kind", list(ReviewKind))
def test_an_empty_row_reads_as_the_kinds_defaults(kind: ReviewKind) -> None:
    expected = {
        ReviewKind.QUESTION: QuestionDetails(),
        ReviewKind.TASK_REVIEW: TaskReviewDetails(),
        ReviewKind.TOOL_APPROVAL: ToolApprovalDetails(),
    }[kind]
    assert details_from_json(kind, {}) == expected


OLD_ROWS: list[tuple[ReviewKind, dict[str, Any], ReviewDetails]] = [
    # A task review from before typed outputs, rounds and expected outputs were kept.
    (
        ReviewKind.TASK_REVIEW,
        {"task": "t", "description": "d", "agent": "Writer"},
        TaskReviewDetails(task="t", description="d", agent="Writer"),
    ),
    # A tool call recorded without its arguments or schema.
    (ReviewKind.TOOL_APPROVAL, {"tool": "pay"}, ToolApprovalDetails(tool="pay")),
    # Keys no version reads any more are dropped; a value of the wrong type is its default.
    (
        ReviewKind.TASK_REVIEW,
        {"task": 3, "round": "2", "output_schema": [], "gone": True},
        TaskReviewDetails(),
    ),
    (ReviewKind.TASK_REVIEW, {"round": True}, TaskReviewDetails(round=0)),
    (
        ReviewKind.TOOL_APPROVAL,
        {"tool": "pay", "args": "amount=5", "schema": None, "description": None},
        ToolApprovalDetails(tool="pay"),
    ),
    (ReviewKind.QUESTION, {"agent": None, "tool": "x"}, QuestionDetails()),
    (
        ReviewKind.TASK_REVIEW,
        {"flow_id": "f", "outcomes": ["ok", 3]},
        FlowFeedbackDetails(flow_id="f", outcomes=("ok",)),
    ),
    (ReviewKind.TASK_REVIEW, {"flow_id": "f", "outcomes": "ok"}, FlowFeedbackDetails(flow_id="f")),
]


@pytest.mark.parametrize(("kind", "stored", "expected"), OLD_ROWS)
def test_rows_written_before_a_key_existed_still_load(
    kind: ReviewKind, stored: dict[str, Any], expected: ReviewDetails
) -> None:
    assert details_from_json(kind, stored) == expected


def test_a_review_cannot_hold_the_details_of_another_kind() -> None:
    with pytest.raises(TypeError, match="ToolApprovalDetails"):
        NewReview(ReviewKind.QUESTION, "task0:W", 0, "?", details=ToolApprovalDetails())


def test_the_store_hands_back_the_details_it_was_given_and_reads_old_rows(store: Store) -> None:
    run = store.create_run("writer", {})
    claim = store.claim_run("w1", timedelta(minutes=5))
    assert claim is not None and claim.lease_token is not None
    asks = [
        NewReview(details.kind, f"task{i}:W", 0, "draft", details=details)
        for i, details in enumerate(EVERY_SHAPE)
    ]
    asks.append(NewReview(ReviewKind.QUESTION, "task9:W", 0, "?"))
    made = store.suspend_run(run.id, claim.lease_token, asks)
    got = [store.get_review(review.id).details for review in made]
    assert got == [*EVERY_SHAPE, QuestionDetails()]
    old = made[0]
    with store.engine.begin() as conn:
        conn.execute(update(reviews).where(reviews.c.id == old.id).values(details={"x": 1}))
    assert store.get_review(old.id).details == QuestionDetails()
