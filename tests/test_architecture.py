"""The direction of imports (docs/architecture.md, "Layers"): bot → crew_runtime → storage.

Read from the source with ``ast``, so a violation anywhere in a package fails here,
whether or not a test happens to import that module.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("storage", "crew_runtime", "bot")

# Third-party libraries each package may import; the others may not.
OWNED = {
    "crewai": "crew_runtime",
    "sqlalchemy": "storage",
    "alembic": "storage",
    "slack_bolt": "bot",
    "slack_sdk": "bot",
    "aiohttp": "bot",
    "apscheduler": "bot",
}
FORBIDDEN_FIRST_PARTY = {
    "storage": {"crew_runtime", "bot"},
    "crew_runtime": {"bot"},
    "bot": set(),
}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def _sources(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("package", PACKAGES)
def test_imports_follow_the_layers(package: str) -> None:
    problems = []
    for path in _sources(package):
        for name in _imports(path):
            owner = OWNED.get(name)
            if owner is not None and owner != package:
                problems.append(f"{path.relative_to(ROOT)} imports {name} (only {owner} may)")
            if name in FORBIDDEN_FIRST_PARTY[package]:
                problems.append(f"{path.relative_to(ROOT)} imports {name} (wrong direction)")
    assert problems == []


def test_the_check_sees_a_violation(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import crewai\nfrom bot.cli import main\n")
    assert _imports(bad) == {"crewai", "bot"}


def test_public_api_of_crew_runtime() -> None:
    import crew_runtime

    assert {"ask_human", "idempotency_key", "Countersign", "Worker"} <= set(crew_runtime.__all__)
    assert all(hasattr(crew_runtime, name) for name in crew_runtime.__all__)


def test_every_lazy_name_is_public() -> None:
    import crew_runtime

    assert sorted(crew_runtime.__all__) == sorted(crew_runtime._WHERE)
