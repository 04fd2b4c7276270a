"""Tool arguments a reviewer edits: parsed and checked against the tool's JSON schema.

Pure and without crewai, so the CLI and the Slack modal refuse a bad edit, field by
field, before anything is recorded. It checks what a reviewer can get wrong in a form:
unknown or missing fields and the JSON types of the values (CrewAI validates the call
again with the tool's pydantic model when it runs).
"""

from __future__ import annotations

import json
from typing import Any

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
}


def field_errors(schema: dict[str, Any], args: dict[str, Any]) -> dict[str, str]:
    """Problems with ``args`` by field name; empty when they fit ``schema``."""
    properties: dict[str, Any] = schema.get("properties") or {}
    errors: dict[str, str] = {}
    for name in args:
        if properties and name not in properties:
            errors[name] = f"unknown argument (expected one of: {', '.join(properties)})"
    for name in schema.get("required") or []:
        if name not in args:
            errors[name] = "required"
    for name, value in args.items():
        expected = _expected_types(properties.get(name) or {})
        if expected and not _fits(value, expected):
            errors[name] = f"expected {' or '.join(expected)}, got {_json_type(value)}"
    return errors


def parse_edited_args(text: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The arguments a reviewer typed as a JSON object.

    Raises:
        ValueError: not a JSON object, or it does not fit the schema (the message
            names each field and what is wrong).
    """
    try:
        args = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"the arguments must be a JSON object: {exc.msg}") from None
    if not isinstance(args, dict):
        raise ValueError('the arguments must be a JSON object, like {"amount": 10}')
    errors = field_errors(schema, args)
    if errors:
        raise ValueError("; ".join(f"{name}: {problem}" for name, problem in errors.items()))
    return args


def _expected_types(prop: dict[str, Any]) -> list[str]:
    if "type" in prop:
        kinds = prop["type"]
        return [kinds] if isinstance(kinds, str) else list(kinds)
    return [t for option in prop.get("anyOf") or [] for t in _expected_types(option)]


def _fits(value: Any, expected: list[str]) -> bool:
    if value is None:
        return "null" in expected
    for kind in expected:
        python_types = _TYPES.get(kind)
        if python_types is None:
            continue
        if isinstance(value, bool) and kind in ("integer", "number"):
            continue  # JSON true is not a number, though Python says bool is an int
        if isinstance(value, python_types):
            return True
    return False


def _json_type(value: Any) -> str:
    for kind, python_types in _TYPES.items():
        if isinstance(value, python_types) and not (isinstance(value, bool) and kind != "boolean"):
            return kind
    return "null" if value is None else type(value).__name__
