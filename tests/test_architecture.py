"""The direction of imports (docs/architecture.md, "Layers"): bot → crew_runtime → storage;
inside bot, cli → hosting → slack; no core crew_runtime module imports crew_runtime.offline;
no import circle among bot.cli's modules; no test module imports another (what two share is
in tests/support), and bench/ imports from tests/ only tests.support.

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
    "psycopg": "storage",
    "slack_bolt": "bot",
    "slack_sdk": "bot",
    "aiohttp": "bot",
    "apscheduler": "bot",
    # crew_runtime.metrics alone: workers count in crew_runtime, and bot serves the
    # counts through it (its Registry alias and exposition), so neither layer below bot
    # depends on the bot to be measured.
    "prometheus_client": "crew_runtime",
}
FORBIDDEN_FIRST_PARTY = {
    "storage": {"crew_runtime", "bot"},
    "crew_runtime": {"bot"},
    "bot": set(),
}


# Inside bot: the subpackages each may not import (the sandbox and the shared top-level
# modules, settings and errors, are free to everyone).
FORBIDDEN_IN_BOT = {
    "bot.slack": {"bot.hosting", "bot.cli"},
    "bot.hosting": {"bot.cli"},
    "bot.webhooks": {"bot.hosting", "bot.cli"},
}


def _modules(path: Path) -> set[str]:
    """Every module the file imports, by its full dotted name, at any depth (lazy ones too);
    ``from a import b`` counts as ``a`` and as ``a.b``, as b may be a module."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def _imports(path: Path) -> set[str]:
    return {name.split(".")[0] for name in _modules(path)}


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


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
    bad.write_text("import crewai\nfrom bot.cli.main import main\n")
    assert _imports(bad) == {"crewai", "bot"}


def test_public_api_of_crew_runtime() -> None:
    import crew_runtime

    assert {"ask_human", "idempotency_key", "Countersign", "Worker"} <= set(crew_runtime.__all__)
    assert all(hasattr(crew_runtime, name) for name in crew_runtime.__all__)


def test_every_lazy_name_is_public() -> None:
    import crew_runtime

    assert sorted(crew_runtime.__all__) == sorted(crew_runtime._WHERE)


def test_one_module_imports_prometheus() -> None:
    """Metrics are counted and exposed through ``crew_runtime.metrics`` alone."""
    importing = [
        str(path.relative_to(ROOT))
        for package in PACKAGES
        for path in _sources(package)
        if "prometheus_client" in _imports(path)
    ]
    assert importing == ["crew_runtime/metrics.py"]


def _test_import_problems(root: Path) -> list[str]:
    """Imports of a test module (or a conftest) from tests/ or bench/, and imports by bench/
    of anything in tests/ outside tests.support: each as a sentence."""
    problems: set[str] = set()
    for path in sorted([*(root / "tests").rglob("*.py"), *(root / "bench").rglob("*.py")]):
        where = path.relative_to(root)
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level > 0:
                problems.add(f"{where}:{node.lineno} imports relatively (name tests.support)")
        for name in _modules(path):
            parts = name.split(".")
            if parts[0] != "tests" or len(parts) < 2:
                continue
            test_module = next(
                (
                    ".".join(parts[: i + 1])
                    for i in range(1, len(parts))
                    if parts[i].startswith("test_") or parts[i] == "conftest"
                ),
                None,
            )
            if test_module is not None:
                problems.add(f"{where} imports the test module {test_module}")
            elif where.parts[0] == "bench" and parts[1] != "support":
                problems.add(f"{where} imports tests.{parts[1]}: bench/ imports tests.support only")
    return sorted(problems)


def test_no_test_module_imports_another_and_bench_imports_only_support() -> None:
    assert _test_import_problems(ROOT) == []


def test_the_test_import_check_sees_a_violation(tmp_path: Path) -> None:
    files = {
        "tests/slack/test_a.py": "from tests.storage.test_b import FakeClock\n",
        "tests/test_c.py": "from . import test_d\nimport tests.conftest\n",
        "tests/support/timing.py": "from tests.support.harness import Bench\n",
        "bench/x.py": "from tests.support.tcp_proxy import TcpProxy\nimport tests.sandbox.x\n",
        "bench/y.py": "def main() -> None:\n    from tests.test_e import helper\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert _test_import_problems(tmp_path) == [
        "bench/x.py imports tests.sandbox: bench/ imports tests.support only",
        "bench/y.py imports the test module tests.test_e",
        "tests/slack/test_a.py imports the test module tests.storage.test_b",
        "tests/test_c.py imports the test module tests.conftest",
        "tests/test_c.py:1 imports relatively (name tests.support)",
    ]
