"""The wheel of crewai-countersign: the repository's packages, installed under ``countersign``.

The repository keeps its packages at the top (``bot``, ``crew_runtime``, ``storage``,
``sandbox``, and the public facade ``countersign``), and they import each other by those
names. Installed that way they would take names a user's project has too (its own
``storage.py`` or ``bot/``), and ``sys.modules`` is one for the whole process. So the wheel
installs one top-level package, ``countersign``, holding the others (``countersign.bot``,
``countersign.storage``, …), and this hook writes their sources into it with each
first-party absolute import rewritten to its new name: ``from storage.engine import x``
becomes ``from countersign.storage.engine import x``, ``import bot`` becomes
``import countersign.bot as bot``. The imports are found with ``ast`` and changed where
``tokenize`` puts them (as pip's ``vendoring`` tool does), never by a pattern over the
text, so a docstring or a string that names a module is left as it is. The code names no
module in a string (``tests/house/test_architecture.py`` checks it), so nothing else needs
rewriting.

Editable installs (``make venv``) are not rewritten: they put the repository's root on
``sys.path`` (``dev-mode-dirs`` in pyproject.toml), and the code runs under its own names.
See docs/architecture.md, "The installed package".
"""

from __future__ import annotations

import ast
import io
import shutil
import tempfile
import tokenize
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

ROOT_PACKAGE = "countersign"
# The repository's packages that are installed inside ``countersign``.
INNER = ("bot", "crew_runtime", "storage", "sandbox")
FIRST_PARTY = frozenset((ROOT_PACKAGE, *INNER))
# Files from the repository's root shipped inside ``countersign`` (the sandbox reads the
# Slack app's manifest one directory above its own).
ROOT_FILES = ("manifest.yml",)
SKIPPED_DIRS = frozenset({"__pycache__"})
SKIPPED_SUFFIXES = (".pyc", ".pyo")


class UnsupportedImport(ValueError):
    """A first-party import the rewrite cannot keep the meaning of."""


def _new_name(dotted: str) -> str | None:
    """``dotted``'s name inside the wheel, or None when it is not first-party."""
    top = dotted.partition(".")[0]
    if top not in INNER:
        return None
    return f"{ROOT_PACKAGE}.{dotted}"


def rewrite(source: str, filename: str = "<source>") -> str:
    """``source`` with its first-party absolute imports renamed into ``countersign``.

    Relative imports and every other line are kept byte for byte. ``import a.b`` of a
    first-party module without ``as`` is refused (it binds ``a``, which the rename would
    change); write ``from a import b``.
    """
    tree = ast.parse(source, filename=filename)
    lines = source.splitlines(keepends=True)
    starts = _from_module_starts(source)
    inserts: list[tuple[int, int, str]] = []  # (line, column in characters, text)

    def column(line: int, byte_offset: int) -> int:
        return len(lines[line - 1].encode()[:byte_offset].decode())

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if _new_name(node.module) is None:
                continue
            line, col = starts[(node.lineno, column(node.lineno, node.col_offset))]
            inserts.append((line, col, f"{ROOT_PACKAGE}."))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if _new_name(alias.name) is None:
                    continue
                if alias.asname is None and "." in alias.name:
                    raise UnsupportedImport(
                        f"{filename}:{alias.lineno}: `import {alias.name}` binds "
                        f"{alias.name.partition('.')[0]!r}: write `from "
                        f"{alias.name.rpartition('.')[0]} import {alias.name.rpartition('.')[2]}`"
                    )
                inserts.append(
                    (alias.lineno, column(alias.lineno, alias.col_offset), f"{ROOT_PACKAGE}.")
                )
                if alias.asname is None:
                    assert alias.end_lineno is not None and alias.end_col_offset is not None
                    end = column(alias.end_lineno, alias.end_col_offset)
                    inserts.append((alias.end_lineno, end, f" as {alias.name}"))
    for line, col, text in sorted(inserts, reverse=True):
        old = lines[line - 1]
        lines[line - 1] = old[:col] + text + old[col:]
    rewritten = "".join(lines)
    _check(rewritten, filename)
    return rewritten


def _from_module_starts(source: str) -> dict[tuple[int, int], tuple[int, int]]:
    """Where the module name of each ``from`` statement starts, by where its ``from`` is."""
    found: dict[tuple[int, int], tuple[int, int]] = {}
    after_from: tuple[int, int] | None = None
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.NAME and token.string == "from" and after_from is None:
            after_from = token.start
        elif after_from is not None and token.type == tokenize.NAME:
            found[after_from] = token.start
            after_from = None
        elif after_from is not None and token.type not in (tokenize.NL, tokenize.COMMENT):
            after_from = None  # ``raise … from exc``'s ``from`` is followed by a name too
    return found


def _check(source: str, filename: str) -> None:
    """Every first-party absolute import of ``source`` names ``countersign``."""
    for node in ast.walk(ast.parse(source, filename=filename)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        for name in names:
            if name.partition(".")[0] in INNER:
                raise UnsupportedImport(f"{filename}:{node.lineno}: {name} left unrewritten")


def stage(root: Path, target: Path) -> list[Path]:
    """Lay the ``countersign`` package out at ``target`` from the repository at ``root``:
    the facade's files at its top, each of :data:`INNER` inside it, sources rewritten.
    Returns the files written, relative to ``target``."""
    written: list[Path] = []
    sources = [(root / ROOT_PACKAGE, Path())] + [(root / name, Path(name)) for name in INNER]
    for directory, inside in sources:
        for path in sorted(directory.rglob("*")):
            relative = path.relative_to(directory)
            if path.is_dir() or SKIPPED_DIRS & set(relative.parts):
                continue
            if any(part.startswith(".") for part in relative.parts):
                continue  # an editor's or a tool's, not the package's
            if path.name.endswith(SKIPPED_SUFFIXES):
                continue
            out = target / inside / relative
            out.parent.mkdir(parents=True, exist_ok=True)
            if path.suffix == ".py":
                out.write_text(rewrite(path.read_text(), str(path.relative_to(root))))
            else:
                shutil.copyfile(path, out)
            written.append(inside / relative)
    for name in ROOT_FILES:
        shutil.copyfile(root / name, target / name)
        written.append(Path(name))
    return written


class CountersignBuildHook(BuildHookInterface):  # type: ignore[type-arg]
    """Hatchling's hook: the wheel gets the staged ``countersign`` package, nothing else."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or version == "editable":
            return
        self._staging = Path(tempfile.mkdtemp(prefix="countersign-wheel-"))
        stage(Path(self.root), self._staging / ROOT_PACKAGE)
        build_data["force_include"][str(self._staging / ROOT_PACKAGE)] = ROOT_PACKAGE

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        staging = getattr(self, "_staging", None)
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
