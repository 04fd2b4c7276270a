"""The pieces of a configuration file's validation that every table's checks share: where
an error is (:class:`Where`), how a value the user wrote is shown in it, and the readers of
strings, lists of strings and counts."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crew_runtime.specs import ConfigError


@dataclass(frozen=True)
class Where:
    """The file being validated; turns a dotted key and a complaint into a ConfigError."""

    file: Path

    def error(self, key: str, problem: str) -> ConfigError:
        return ConfigError(f"{self.file}: {key}: {problem}")


def read_count(value: object, key: str, where: Where) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise where.error(
            key, f"expected a whole number of approvals, 1 or more, got {show(value)}"
        )
    return value


def read_string(value: object, key: str, where: Where) -> str:
    if not isinstance(value, str):
        raise where.error(key, f"expected a string, got {show(value)}")
    return value


def read_strings(
    table: dict[str, Any],
    key: str,
    name: str,
    pattern: re.Pattern[str] | None,
    expected: str,
    where: Where,
) -> tuple[str, ...]:
    values = table.get(name, [])
    if not isinstance(values, list):
        raise where.error(f"{key}.{name}", f"expected a list like [...], got {show(values)}")
    seen: list[str] = []
    for i, item in enumerate(values):
        item_key = f"{key}.{name}[{i}]"
        ok = isinstance(item, str) and item != ""
        if ok and pattern is not None:
            ok = pattern.fullmatch(item) is not None
        if not ok:
            raise where.error(item_key, f"expected {expected}, got {show(item)}")
        if item in seen:
            raise where.error(item_key, f"{show(item)} is listed twice")
        seen.append(item)
    return tuple(seen)


def show(value: object) -> str:
    """Render a TOML value the way the user wrote it, for error messages."""
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "a list"
    return repr(value)


def suggest(word: str, choices: Mapping[str, object] | tuple[str, ...]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f' (did you mean "{close[0]}"?)' if close else ""


def check_keys(
    table: Collection[str],
    known: tuple[str, ...],
    key: str,
    complain: Callable[[str, str], ConfigError],
) -> None:
    """Refuse the first of ``table``'s keys not in ``known`` (at ``key.KEY``), suggesting
    the closest known one."""
    for k in table:
        if k not in known:
            raise complain(
                f"{key}.{k}", f"unknown key{suggest(k, known)}; known keys: {', '.join(known)}"
            )
