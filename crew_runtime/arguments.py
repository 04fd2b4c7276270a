"""Tool arguments a reviewer edits, checked against the tool's JSON schema: one checker for
every door.

Pure and without crewai, so the CLI and the Slack modal refuse a bad edit, field by field,
before anything is recorded. The CLI and the service take the arguments as a JSON object
(:func:`parse_edited_args`); the Slack modal has one text input per argument, which
:func:`coerce_fields` types by the schema, and the arguments it makes are checked by the same
:func:`field_errors`. It checks what a reviewer can get wrong in a form: unknown or missing
fields and the JSON types of the values (CrewAI validates the call again with the tool's
pydantic model when it runs). The rules:

- JSON as the standard has it (:func:`loads_json`): Python's ``json`` also reads ``NaN``,
  ``Infinity`` and ``-Infinity``, and reads ``1e999`` as infinity; no other JSON reader takes
  them, so they are refused, wherever they are in the value.
- A property's types are its ``type`` (a name or a list of names); under ``anyOf`` at least
  one branch must fit, under ``oneOf`` exactly one. A branch that states no type (a ``$ref``,
  ``{}``) is not checked here, and neither is a property that needs it.
- ``true`` and ``false`` are never numbers; an integer is written without a fraction (``5``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

__all__ = [
    "coerce_fields",
    "field_errors",
    "loads_json",
    "parse_edited_args",
    "schema_types",
]

_PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    "null": (type(None),),
    "boolean": (bool,),
    "integer": (int,),
    "number": (int, float),
    "string": (str,),
    "array": (list,),
    "object": (dict,),
}

# A modal's text is tried as each type the schema allows in this order, so "900" is a number
# before it is text; text comes last.
_COERCION_ORDER = ("null", "boolean", "integer", "number", "array", "object", "string")


def loads_json(text: str) -> Any:
    """``text`` read as standard JSON.

    Raises:
        json.JSONDecodeError: not JSON (its ``msg`` says why, its position where).
        ValueError: ``NaN``, ``Infinity`` or a number too large for JSON (the message says
            which), or a value nested too deeply to read.
    """
    try:
        return json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except RecursionError:
        raise ValueError("it is nested too deeply") from None


def schema_types(prop: Mapping[str, Any]) -> tuple[str, ...]:
    """The JSON types a schema property allows (``anyOf``/``oneOf`` flattened).

    Empty when the schema does not say, for the property or for one of its branches (a
    ``$ref``, ``{}``): then any JSON may fit.

    >>> schema_types({"anyOf": [{"type": "integer"}, {"type": "null"}]})
    ('integer', 'null')
    """
    kinds = prop.get("type")
    if isinstance(kinds, str):
        return (kinds,)
    if isinstance(kinds, list):
        return tuple(k for k in kinds if isinstance(k, str))
    branches = _branches(prop)
    if not branches:
        return ()
    flattened = [schema_types(branch) for branch in branches]
    if not all(flattened):
        return ()
    return tuple(k for kinds in flattened for k in kinds)


def field_errors(schema: Mapping[str, Any], args: Mapping[str, Any]) -> dict[str, str]:
    """Problems with ``args`` by field name; empty when they fit ``schema``."""
    properties = _properties(schema)
    errors: dict[str, str] = {}
    for name in args:
        if properties and name not in properties:
            errors[name] = f"unknown argument (expected one of: {', '.join(properties)})"
    for name in _required(schema):
        if name not in args:
            errors[name] = "required"
    for name, value in args.items():
        prop = properties.get(name)
        problem = _value_problem(value, prop if isinstance(prop, Mapping) else {})
        if problem is not None:
            errors[name] = problem
    return errors


def parse_edited_args(text: str, schema: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments a reviewer typed as a JSON object (the CLI, and the service for every
    door).

    Raises:
        ValueError: not a JSON object, or it does not fit the schema (the message
            names each field and what is wrong).
    """
    try:
        args = loads_json(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"the arguments must be a JSON object: {exc.msg}") from None
    except ValueError as exc:
        raise ValueError(f"the arguments must be a JSON object: {exc}") from None
    if not isinstance(args, dict):
        raise ValueError('the arguments must be a JSON object, like {"amount": 10}')
    errors = field_errors(schema, args)
    if errors:
        raise ValueError("; ".join(f"{name}: {problem}" for name, problem in errors.items()))
    return args


def coerce_fields(
    fields: Mapping[str, str], schema: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, tuple[str, ...]]]:
    """The texts of a tool call's edit modal, typed by the tool's JSON schema: the arguments,
    and the fields that do not hold a type they may (by name, the types they may hold; ``()``
    for a required field left empty).

    A field of a type the schema gives is read as JSON (``900``, ``true``, ``[1, 2]``),
    except text, taken as typed. A field whose type the schema does not state is JSON
    when it parses, else text. An optional field left empty is left out, so the tool's
    default applies. Whether the arguments fit the schema otherwise (unknown or missing
    ones, ``oneOf``) is for :func:`field_errors`.
    """
    properties = _properties(schema)
    required = _required(schema)
    args: dict[str, Any] = {}
    problems: dict[str, tuple[str, ...]] = {}
    for name, raw in fields.items():
        prop = properties.get(name)
        kinds = schema_types(prop if isinstance(prop, Mapping) else {})
        if not raw.strip():
            if name not in required:
                continue
            if "string" in kinds:
                args[name] = raw
            elif "null" in kinds:
                args[name] = None
            else:
                problems[name] = ()
            continue
        try:
            args[name] = _coerce(raw, kinds)
        except ValueError:
            problems[name] = kinds
    return args, problems


def _coerce(raw: str, kinds: tuple[str, ...]) -> Any:
    if not kinds:
        try:
            return loads_json(raw)
        except ValueError:
            return raw
    for kind in _COERCION_ORDER:
        if kind not in kinds:
            continue
        if kind == "string":
            return raw
        word = raw.strip()
        try:
            value = loads_json(word.lower() if kind in ("null", "boolean") else word)
        except ValueError:
            continue
        if _is(value, kind):
            return value
    raise ValueError(f"not {' or '.join(kinds)}")


def _value_problem(value: Any, prop: Mapping[str, Any]) -> str | None:
    """Why ``value`` does not fit ``prop``; None when it does or the schema does not say."""
    if _fits(value, prop) is not False:
        return None
    if (branches := prop.get("oneOf")) and _fits(value, {"anyOf": branches}):
        return f"fits more than one of {' or '.join(schema_types(prop))} (oneOf: exactly one)"
    return f"expected {' or '.join(dict.fromkeys(schema_types(prop)))}, got {_json_type(value)}"


def _fits(value: Any, prop: Mapping[str, Any]) -> bool | None:
    """Whether ``value`` is of a type ``prop`` allows; None when ``prop`` does not say."""
    kinds = prop.get("type")
    if isinstance(kinds, str | list):
        return any(_is(value, k) for k in ([kinds] if isinstance(kinds, str) else kinds))
    branches = _branches(prop)
    if not branches:
        return None
    fits = [_fits(value, branch) for branch in branches]
    if "oneOf" in prop:
        return None if None in fits else fits.count(True) == 1
    return True if True in fits else (None if None in fits else False)


def _branches(prop: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    options = prop.get("anyOf") or prop.get("oneOf")
    if not isinstance(options, list):
        return []
    return [o for o in options if isinstance(o, Mapping)]


def _is(value: Any, kind: str) -> bool:
    if isinstance(value, bool) and kind in ("integer", "number"):
        return False  # JSON true is not a number, though Python says bool is an int
    return isinstance(value, _PYTHON_TYPES.get(kind, ()))


def _json_type(value: Any) -> str:
    for kind in _COERCION_ORDER:
        if _is(value, kind):
            return kind
    return type(value).__name__


def _properties(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    properties = schema.get("properties")
    return properties if isinstance(properties, Mapping) else {}


def _required(schema: Mapping[str, Any]) -> list[Any]:
    required = schema.get("required")
    return required if isinstance(required, list) else []


def _no_constant(word: str) -> Any:
    raise ValueError(f"{word} is not a JSON number (JSON has no NaN or Infinity)")


def _finite(word: str) -> float:
    value = float(word)
    if not math.isfinite(value):
        raise ValueError(f"{word[:20]} is too large for a JSON number")
    return value
