"""One checker of a tool call's edited arguments, for every door: the Slack modal types its
fields by the schema and checks them as the service (and so the CLI) checks a JSON object.
``oneOf`` means exactly one branch fits; NaN and Infinity are not JSON, wherever they are."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.slack import modals
from bot.slack.authz import Reviewers
from bot.slack.listeners import Listeners
from crew_runtime.arguments import (
    coerce_fields,
    field_errors,
    loads_json,
    parse_edited_args,
    schema_types,
)
from crew_runtime.config import Config, CrewSpec
from crew_runtime.errors import EditRefused
from crew_runtime.policy import Facts
from crew_runtime.service import Countersign
from sandbox import payloads as slack
from storage import (
    DecisionKind,
    NewReview,
    Review,
    ReviewKind,
    ReviewStatus,
    Store,
    ToolApprovalDetails,
)
from tests.support.records import FAST, JSONISH

# The types a modal's text is read as.
TYPED = {
    "n": {"type": "integer"},
    "x": {"type": "number"},
    "ok": {"type": "boolean"},
    "tags": {"type": "array"},
}


# --- the modal's fields, typed by the schema ---------------------------------------------------


def test_arguments_are_typed_by_the_schema() -> None:
    schema = {
        "properties": {
            **TYPED,
            "opts": {"type": "object"},
            "name": {"type": "string"},
            "maybe": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            "free": {},
        },
        "required": ["n", "name", "maybe"],
    }
    fields = {
        "n": " 900 ",
        "x": "2.5",
        "ok": "True",
        "tags": '["a", 1]',
        "opts": '{"k": null}',
        "name": " 12 ",
        "maybe": "",
        "free": "plain words",
    }
    assert coerce_fields(fields, schema) == (
        {
            "n": 900,
            "x": 2.5,
            "ok": True,
            "tags": ["a", 1],
            "opts": {"k": None},
            "name": " 12 ",
            "maybe": None,
            "free": "plain words",
        },
        {},
    )
    assert coerce_fields({"free": "[1]", "x": "", "ok": ""}, schema) == ({"free": [1]}, {})


def test_every_field_that_does_not_parse_is_reported() -> None:
    schema = {
        "properties": {**TYPED, "to": {"type": "string"}},
        "required": ["to", "n"],
    }
    bad = {"n": "lots", "x": "NaN", "ok": "yes", "tags": "a, b", "to": "ACME"}
    assert coerce_fields(bad, schema)[1] == {
        "n": ("integer",),
        "x": ("number",),
        "ok": ("boolean",),
        "tags": ("array",),
    }
    assert coerce_fields({"n": "1.5", "to": ""}, {**schema, "required": ["n"]})[1] == {
        "n": ("integer",)
    }
    assert coerce_fields({"n": " "}, schema)[1] == {"n": ()}


def test_schema_types() -> None:
    assert schema_types({"type": "integer"}) == ("integer",)
    assert schema_types({"type": ["string", "null"]}) == ("string", "null")
    assert schema_types({"oneOf": [{"type": "array"}, {"anyOf": [{"type": "null"}]}]}) == (
        "array",
        "null",
    )
    assert schema_types({"$ref": "#/$defs/X"}) == ()
    # Optional[SomeModel]: the branch that is not null says no type, so neither does the whole.
    assert schema_types({"anyOf": [{"$ref": "#/$defs/X"}, {"type": "null"}]}) == ()


@FAST
@given(st.dictionaries(st.text(max_size=5), st.text(max_size=30), max_size=5), JSONISH)
def test_coercion_never_raises_and_what_it_makes_is_json(
    fields: dict[str, str], schema: Any
) -> None:
    schema = schema if isinstance(schema, dict) else {"properties": {"a": schema}}
    args, problems = coerce_fields(fields, schema)
    assert set(problems) <= set(fields)
    json.dumps(args, allow_nan=False)  # no NaN or infinity can come out of a field
    field_errors(schema, args)


# --- JSON as the standard has it ---------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["NaN", "Infinity", "-Infinity", "[1, NaN]", '{"a": {"b": Infinity}}', "1e999", "[-1e400]"],
)
def test_nan_and_infinity_are_not_json(text: str) -> None:
    with pytest.raises(ValueError, match=r"not a JSON number|too large for a JSON number"):
        loads_json(text)
    with pytest.raises(ValueError, match=r"the arguments must be a JSON object: .*JSON number"):
        parse_edited_args(f'{{"x": {text}}}', {})


def test_one_of_means_exactly_one_branch() -> None:
    schema = {"properties": {"n": {"oneOf": [{"type": "integer"}, {"type": "number"}]}}}
    assert field_errors(schema, {"n": 2.5}) == {}
    assert field_errors(schema, {"n": 2}) == {
        "n": "fits more than one of integer or number (oneOf: exactly one)"
    }
    assert field_errors(schema, {"n": "2"}) == {"n": "expected integer or number, got string"}
    # A branch that says no type is not checked here, and neither is the property then.
    unknown = {"properties": {"n": {"oneOf": [{"$ref": "#/$defs/X"}, {"type": "integer"}]}}}
    assert field_errors(unknown, {"n": {"a": 1}}) == {}
    optional = {"properties": {"n": {"anyOf": [{"$ref": "#/$defs/X"}, {"type": "null"}]}}}
    assert field_errors(optional, {"n": {"a": 1}}) == {}


# --- the modal and the service agree ----------------------------------------------------------

EITHER = {"oneOf": [{"type": "integer"}, {"type": "boolean"}]}
NUMERIC = {"oneOf": [{"type": "integer"}, {"type": "number"}]}

# (what the argument's schema says, what a reviewer types in the modal's field, the same value
# as JSON on the command line, whether it is taken). These are the cases where the modal and
# the service used to disagree: the service ignored oneOf, and took NaN and Infinity.
AGREEMENT: dict[str, tuple[dict[str, Any], str, str, bool]] = {
    "oneOf, one branch fits": (EITHER, "5", "5", True),
    "oneOf, no branch fits": (EITHER, "lots", '"lots"', False),
    "oneOf, two branches fit": (NUMERIC, "5", "5", False),
    "oneOf, only number fits": (NUMERIC, "5.5", "5.5", True),
    "NaN for a number": ({"type": "number"}, "NaN", "NaN", False),
    "Infinity for a number": ({"type": "number"}, "Infinity", "Infinity", False),
    "a number too large": ({"type": "number"}, "1e999", "1e999", False),
    "NaN in a list": ({"type": "array"}, "[1, NaN]", "[1, NaN]", False),
    "a finite number": ({"type": "number"}, "2.5", "2.5", True),
}


class _EveryoneReviews:
    async def facts(self, asked: Any, away: Any, *, people: Any = ()) -> Facts:
        return Facts(away=dict(away), vouched=True)  # everyone is in every group and channel

    async def name_of(self, user_id: str) -> str | None:
        return None


class _Ack:
    def __init__(self) -> None:
        self.answer: dict[str, Any] | None = None

    async def __call__(self, **answer: Any) -> None:
        self.answer = answer


def _two_tool_reviews(store: Store, prop: dict[str, Any]) -> list[Review]:
    run = store.create_run("payments", {}, channel="C0DRAFTS")
    claim = store.claim_run("w1", timedelta(minutes=5))
    assert claim is not None and claim.lease_token is not None
    details = ToolApprovalDetails(
        tool="pay", args={"x": 1}, schema={"properties": {"x": prop}, "required": ["x"]}
    )
    asks = [
        NewReview(ReviewKind.TOOL_APPROVAL, f"task0:Payer>{n}", 0, "pay(...)", details=details)
        for n in range(2)
    ]
    return store.suspend_run(run.id, claim.lease_token, asks)


def _submit_modal(service: Countersign, review: Review, typed: str) -> dict[str, Any] | None:
    """Fill and submit the edit modal the bot builds; the errors it answers with, if any."""
    view = modals.modal(DecisionKind.EDIT, review, "C0DRAFTS", "1700000250.000400")
    view = {**view, "id": "V0002", "team_id": "T0TEST", "hash": "1.abc"}
    view["state"] = slack.view_state(view, {"arg:x": typed})
    body = {"type": "view_submission", "user": {"id": "U0ALICE"}, "view": view}
    listeners = Listeners(service, cast(Reviewers, _EveryoneReviews()), wake=lambda: None)
    ack = _Ack()
    asyncio.run(listeners.on_submission(ack, body))
    assert ack.answer is not None
    errors: dict[str, Any] | None = ack.answer.get("errors")
    return errors


@pytest.mark.parametrize("case", list(AGREEMENT))
def test_the_modal_and_the_service_take_and_refuse_the_same(store: Store, case: str) -> None:
    prop, typed, as_json, taken = AGREEMENT[case]
    config = Config(Path("countersign.toml"), {"payments": CrewSpec(name="payments", factory="x")})
    service = Countersign(store, config)
    in_modal, on_command_line = _two_tool_reviews(store, prop)

    errors = _submit_modal(service, in_modal, typed)
    assert (errors is None) is taken, errors
    decided = store.get_review(in_modal.id)
    assert (decided.status is ReviewStatus.DECIDED) is taken

    if taken:
        service.decide(on_command_line.id, DecisionKind.EDIT, f'{{"x": {as_json}}}', by="U1")
        assert store.get_review(on_command_line.id).status is ReviewStatus.DECIDED
        assert decided.decision is not None
        assert json.loads(decided.decision.text or "") == {"x": json.loads(as_json)}
    else:
        with pytest.raises(EditRefused):
            service.decide(on_command_line.id, DecisionKind.EDIT, f'{{"x": {as_json}}}', by="U1")
        assert store.get_review(on_command_line.id).status is ReviewStatus.PENDING
