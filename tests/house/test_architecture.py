"""The direction of imports (docs/architecture.md, "Layers"): bot → crew_runtime → storage;
inside bot, cli → hosting → slack; no core crew_runtime module imports crew_runtime.offline;
no import circle among bot.cli's modules. The offline sandbox is no part of the product:
only ``bot.cli.demo`` imports it, lazily. And what the wheel's rewrite needs
(docs/architecture.md, "The installed package"): no module named in a string, no
``import a.b`` of a first-party module without ``as``. No test module imports another (what
two share is in tests/support), and bench/ imports from tests/ only tests.support.

Read from the source with ``ast``, so a violation anywhere in a package fails here,
whether or not a test happens to import that module.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("storage", "crew_runtime", "bot", "sandbox", "countersign")
FIRST_PARTY = frozenset(PACKAGES)

# Third-party libraries the packages named may import; the others may not.
OWNED = {
    "crewai": ("crew_runtime",),
    "sqlalchemy": ("storage",),
    "alembic": ("storage",),
    "psycopg": ("storage",),
    "slack_bolt": ("bot",),
    "slack_sdk": ("bot",),
    "aiohttp": ("bot", "sandbox"),
    "apscheduler": ("bot",),
    # crew_runtime.metrics alone: workers count in crew_runtime, and bot serves the
    # counts through it (its Registry alias and exposition), so neither layer below bot
    # depends on the bot to be measured.
    "prometheus_client": ("crew_runtime",),
}
FORBIDDEN_FIRST_PARTY = {
    "storage": {"crew_runtime", "bot", "sandbox", "countersign"},
    "crew_runtime": {"bot", "sandbox", "countersign"},
    # bot.cli.demo alone imports the sandbox, lazily (test_only_the_demo_imports_the_sandbox).
    "bot": {"countersign"},
    # The stand-in for Slack knows nothing of Countersign (it starts fast, on its own).
    "sandbox": {"storage", "crew_runtime", "bot", "countersign"},
    # The facade re-exports crew_runtime's names; its __main__ is the bot's command line.
    "countersign": {"storage", "sandbox"},
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
            if owner is not None and package not in owner:
                problems.append(f"{path.relative_to(ROOT)} imports {name} (only {owner} may)")
            if name in FORBIDDEN_FIRST_PARTY[package]:
                problems.append(f"{path.relative_to(ROOT)} imports {name} (wrong direction)")
    assert problems == []


def test_the_check_sees_a_violation(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import crewai\nfrom bot.cli.main import main\n")
    assert _imports(bad) == {"crewai", "bot"}


def _top_level_imports(tree: ast.Module) -> set[str]:
    """The modules a file imports when it is imported (not in a function's body, nor for
    the type checker alone)."""
    found: set[str] = set()
    pending: list[ast.AST] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            pending.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        pending.extend(ast.iter_child_nodes(node))
    return found


def test_only_the_demo_imports_the_sandbox() -> None:
    """The sandbox is no part of the product: no module of it imports the sandbox but
    ``bot/cli/demo.py``, and that one inside the functions that serve it, so that a bot
    serving Slack never loads it."""
    importing = sorted(
        str(path.relative_to(ROOT))
        for package in PACKAGES
        if package != "sandbox"
        for path in _sources(package)
        if "sandbox" in _imports(path)
    )
    assert importing == ["bot/cli/demo.py"]
    tree = ast.parse((ROOT / "bot" / "cli" / "demo.py").read_text())
    assert not any(_within(name, "sandbox") for name in _top_level_imports(tree))


def test_the_lazy_check_sees_a_top_level_import() -> None:
    tree = ast.parse(
        "import sandbox\nif TYPE_CHECKING:\n    import bot\ndef f():\n    from bot import x\n"
    )
    assert _top_level_imports(tree) == {"sandbox"}


# The packages installed as countersign.<name>: a string naming one of their modules is what
# the wheel's import rewrite would miss.
RENAMED = ("storage", "crew_runtime", "bot", "sandbox")
_DOTTED = re.compile(rf"^({'|'.join(RENAMED)})(\.[a-z_]\w*)+(:\w+)?$")


def _names_a_module(text: str) -> bool:
    """Whether ``text`` is a first-party module's dotted name (``storage.engine``,
    ``bot.cli.main:main``), not a file's (``sandbox.json``)."""
    if not _DOTTED.match(text):
        return False
    try:
        return importlib.util.find_spec(text.partition(":")[0]) is not None
    except ModuleNotFoundError:
        return False


def _strings(tree: ast.Module) -> list[ast.Constant]:
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        if id(node) not in docstrings
    ]


def test_no_module_is_named_in_a_string() -> None:
    """Installed, every module is ``countersign.<its name>`` (hatch_build.py rewrites the
    imports): a module's name in a string (``importlib.import_module("storage.x")``, an
    entry point) would name a module the wheel does not have. ``__name__``, a package's
    ``__name__`` (``python -m`` + ``bot.__name__``) and relative names say it in both
    layouts. (Logger names such as ``countersign.worker`` name no module.)"""
    found = [
        f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}"
        for package in PACKAGES
        for path in _sources(package)
        for node in _strings(ast.parse(path.read_text()))
        if _names_a_module(node.value)
    ]
    assert found == []


def test_the_string_check_sees_a_module_name() -> None:
    tree = ast.parse('"""storage.x in a docstring"""\nimport_module("storage.engine")\nx = "bot"\n')
    assert sorted(node.value for node in _strings(tree)) == ["bot", "storage.engine"]
    assert _names_a_module("storage.engine")
    assert _names_a_module("bot.cli.main:main")
    assert not _names_a_module("sandbox.json")
    assert not _names_a_module("storage.nothing_here")


def test_first_party_imports_can_be_renamed() -> None:
    """``import storage.engine`` binds ``storage``, which the wheel's rewrite cannot keep
    (it would bind ``countersign``): the product writes ``from storage import engine``."""
    found = [
        f"{path.relative_to(ROOT)}:{node.lineno}: import {alias.name}"
        for package in PACKAGES
        for path in _sources(package)
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Import)
        for alias in node.names
        if "." in alias.name and alias.asname is None and alias.name.split(".")[0] in FIRST_PARTY
    ]
    assert found == []


def test_the_facade_exports_what_crews_import() -> None:
    import countersign

    assert {"ask_human", "requires_approval", "idempotency_key", "ScriptedLLM"} <= set(
        countersign.__all__
    )
    assert all(getattr(countersign, name) is not None for name in countersign.__all__)
    assert (ROOT / "countersign" / "py.typed").is_file()
    with pytest.raises(AttributeError, match="no attribute 'Store'"):
        _ = countersign.Store


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
