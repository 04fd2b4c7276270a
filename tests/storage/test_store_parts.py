"""The Store is its parts side by side (docs/architecture.md, "The Store's parts"): each public
method lives in exactly one part, no part calls another part's methods, and the table in
docs/architecture.md names every method's part, so a reader finds a method's home from its
name without walking the MRO.

Read from the classes and the source, so a method added anywhere fails here until the table
says where it lives.
"""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

from storage import Store
from storage.base import StoreBase

ROOT = Path(__file__).resolve().parents[2]
ARCHITECTURE = ROOT / "docs" / "architecture.md"
SECTION = "## The Store's parts"
# `| `storage/runs.py` (`RunStore`) | `create_run`, `get_run`, ... |`
ROW = re.compile(r"^\| `(storage/[a-z_]+\.py)` \(`(\w+)`\) \| (.+) \|$")


def _parts() -> list[type]:
    """The Store's parts: the classes it is composed of."""
    return list(Store.__bases__)


def _public(cls: type) -> set[str]:
    return {name for name in _own(cls) if not name.startswith("_")}


def _own(cls: type) -> set[str]:
    """Every method the part defines, private ones included, with those of the bases it is
    built on (``ReviewStore`` on ``ApprovalCounting``), StoreBase's aside."""
    return {
        name
        for base in cls.__mro__
        if issubclass(base, StoreBase) and base is not StoreBase
        for name, value in vars(base).items()
        if inspect.isfunction(value)
    }


def _table(text: str) -> dict[str, tuple[str, str]]:
    """method → (module, part) as the architecture's table states it."""
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    found: dict[str, tuple[str, str]] = {}
    for line in text[start : end if end != -1 else None].splitlines():
        row = ROW.match(line)
        if row is None:
            continue
        module, part, methods = row.groups()
        for method in re.findall(r"`(\w+)`", methods):
            assert method not in found, f"{method} is listed twice"
            found[method] = (module, part)
    return found


def _expected() -> dict[str, tuple[str, str]]:
    """Every public method of the Store and its home; the Store's own (opening, closing,
    upkeep of the engine) in ``storage/store.py``."""
    expected = {
        name: ("storage/store.py", "Store")
        for name, value in vars(Store).items()
        if not name.startswith("_")
        and (inspect.isfunction(value) or isinstance(value, classmethod))
    }
    for part in _parts():
        module = "storage/" + part.__module__.rsplit(".", 1)[1] + ".py"
        for method in _public(part):
            expected[method] = (module, part.__name__)
    return expected


def _rows(expected: dict[str, tuple[str, str]]) -> str:
    """The table as it should read, for the failure message."""
    by_part: dict[tuple[str, str], list[str]] = {}
    for method, home in expected.items():
        by_part.setdefault(home, []).append(method)
    return "\n".join(
        f"| `{module}` (`{part}`) | " + ", ".join(f"`{m}`" for m in sorted(methods)) + " |"
        for (module, part), methods in sorted(by_part.items())
    )


def test_every_public_method_lives_in_exactly_one_part() -> None:
    homes: dict[str, list[str]] = {}
    for part in [*_parts(), Store]:
        for method in _own(part) if part is not Store else set(vars(Store)):
            if not method.startswith("__"):
                homes.setdefault(method, []).append(part.__name__)
    twice = {method: parts for method, parts in homes.items() if len(parts) > 1}
    assert twice == {}, "a method defined in two parts: the MRO would pick one silently"


def test_no_part_calls_another_parts_methods() -> None:
    """Parts share only StoreBase and module functions: one part never reaches into another
    through ``self``, so each can be read alone."""
    owner = {method: part for part in _parts() for method in _own(part)}
    for part in _parts():
        tree = ast.parse(inspect.getsource(inspect.getmodule(part)))  # type: ignore[arg-type]
        classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == part.__name__]
        foreign = {
            node.func.attr
            for node in ast.walk(classes[0])
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "self"
            and owner.get(node.func.attr, part) is not part
        }
        assert foreign == set(), f"{part.__name__} calls {sorted(foreign)} of another part"


def test_the_architecture_table_names_every_methods_home() -> None:
    expected = _expected()
    assert _table(ARCHITECTURE.read_text()) == expected, (
        f"docs/architecture.md, {SECTION!r}, should list:\n{_rows(expected)}"
    )


def test_a_wrong_or_missing_row_fails() -> None:
    """The table check can fail: a method moved to the wrong part, or left out."""
    expected = _expected()
    good = f"{SECTION}\n\n{_rows(expected)}\n"
    assert _table(good) == expected
    method = sorted(expected)[0]
    assert _table(good.replace(f"`{method}`, ", "").replace(f", `{method}`", "")) != expected
    with pytest.raises(AssertionError, match="listed twice"):
        _table(good + _rows({method: expected[method]}) + "\n")
