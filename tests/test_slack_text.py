"""The words the bot says in Slack: every entry of the text modules is said somewhere.

An entry only tests use is dead wording: it is reviewed and translated for nothing. Each
module-level name of a text module must be read by the bot's code: by another entry of its
module, or as ``module.NAME`` / ``from module import NAME`` in ``bot``.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TEXT_MODULES = ["bot.slack.text"]


def _path(module: str, root: Path = ROOT) -> Path:
    return root.joinpath(*module.split(".")).with_suffix(".py")


def _entries(module: str, root: Path = ROOT) -> list[str]:
    names: list[str] = []
    for node in ast.parse(_path(module, root).read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
    return names


def _uses(module: str, root: Path = ROOT) -> Counter[str]:
    """How often each name of ``module`` is read in ``bot``'s code, its own reads included."""
    package, _, short = module.rpartition(".")
    uses: Counter[str] = Counter()
    for path in sorted((root / "bot").rglob("*.py")):
        tree = ast.parse(path.read_text())
        aliases = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == package:
                aliases |= {a.asname or a.name for a in node.names if a.name == short}
            elif isinstance(node, ast.ImportFrom) and node.module == module:
                uses.update(a.name for a in node.names)
        for node in ast.walk(tree):
            if path == _path(module, root) and isinstance(node, ast.Name):
                uses[node.id] += isinstance(node.ctx, ast.Load)
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                uses[node.attr] += node.value.id in aliases
    return uses


@pytest.mark.parametrize("module", TEXT_MODULES)
def test_every_entry_is_said_somewhere(module: str) -> None:
    assert _unused(module) == [], f"{module} has entries the bot never says"


def _unused(module: str, root: Path = ROOT) -> list[str]:
    uses = _uses(module, root)
    return [name for name in _entries(module, root) if not uses[name]]


def test_the_check_sees_an_unused_entry(tmp_path: Path) -> None:
    (tmp_path / "bot" / "slack").mkdir(parents=True)
    (tmp_path / "bot" / "slack" / "text.py").write_text(
        'SAID = "a"\nINNER = "b"\nUNSAID = "c"\n\n\ndef said() -> str:\n    return INNER\n'
    )
    (tmp_path / "bot" / "slack" / "listeners.py").write_text(
        "from bot.slack import text as t\nfrom bot.slack.text import said\n\nt.SAID, said()\n"
    )
    assert _unused("bot.slack.text", tmp_path) == ["UNSAID"]
