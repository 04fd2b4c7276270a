"""A typed task's output as a reviewer edits it: JSON checked against the output model's schema.

A task with ``output_pydantic`` or ``output_json`` has its model's JSON schema recorded with
its review when the review opens (``TaskReviewDetails.output_schema``), so the CLI, the
service and the Slack modal check an edit here, field by field, without importing the crew
(or crewai).
The resumed run validates the edit again with the model itself (a validator in Python code
can refuse what the schema allows); see ``crew_runtime/review.py``.
"""

from __future__ import annotations

import json
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from crew_runtime.arguments import loads_json

# Where a problem is, when it is with the whole output rather than one field.
WHOLE = "(the output)"
PROBLEM_LIMIT = 150


def output_errors(schema: dict[str, Any], value: Any) -> dict[str, str]:
    """Problems with ``value`` by field path (``sections``, ``items[2].name``); empty when it
    fits ``schema``. A field the model does not have is a problem too: pydantic would drop it
    without a word, and the reviewer's edit with it."""
    validator = Draft202012Validator(_closed(schema))
    errors: dict[str, str] = {}
    for error in validator.iter_errors(value):
        for where, problem in _problems(error):
            errors.setdefault(where, problem[:PROBLEM_LIMIT])
    return dict(sorted(errors.items()))


def parse_edited_output(text: str, schema: dict[str, Any]) -> Any:
    """The output a reviewer typed, as JSON fitting ``schema``.

    Raises:
        ValueError: not JSON, or it does not fit (the message names each field and what is
            wrong).
    """
    try:
        value = loads_json(text)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"the output must be JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None
    except ValueError as exc:
        raise ValueError(f"the output must be JSON: {exc}") from None
    errors = output_errors(schema, value)
    if errors:
        raise ValueError("; ".join(f"{where}: {problem}" for where, problem in errors.items()))
    return value


def _problems(error: ValidationError) -> list[tuple[str, str]]:
    path = list(error.absolute_path)
    instance = error.instance
    if error.validator == "required" and isinstance(instance, dict):
        missing = [name for name in _listed(error.validator_value) if name not in instance]
        return [(_where([*path, name]), "required") for name in missing]
    if error.validator == "additionalProperties" and isinstance(instance, dict):
        schema = error.schema if isinstance(error.schema, dict) else {}
        known = _listed(schema.get("properties"))
        unknown = [name for name in instance if name not in known]
        expected = f"unknown field (expected one of: {', '.join(known)})"
        return [(_where([*path, name]), expected) for name in unknown]
    return [(_where(path), error.message)]


def _listed(names: Any) -> list[str]:
    return [str(name) for name in names] if isinstance(names, list | dict) else []


def _where(path: list[Any]) -> str:
    where = ""
    for step in path:
        where += f"[{step}]" if isinstance(step, int) else (f".{step}" if where else str(step))
    return where or WHOLE


_SCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMAS = ("items", "additionalProperties", "not")


def _closed(schema: Any) -> Any:
    """``schema`` with every object that lists its properties closed to others
    (``additionalProperties: false``), unless it says what others may be."""
    if not isinstance(schema, dict):
        return schema
    closed = dict(schema)
    for key in _SCHEMA_MAPS:
        if isinstance(schema.get(key), dict):
            closed[key] = {name: _closed(sub) for name, sub in schema[key].items()}
    for key in _SCHEMA_LISTS:
        if isinstance(schema.get(key), list):
            closed[key] = [_closed(sub) for sub in schema[key]]
    for key in _SCHEMAS:
        if key in schema:
            closed[key] = _closed(schema[key])
    if "properties" in schema and "additionalProperties" not in schema:
        closed["additionalProperties"] = False
    return closed
