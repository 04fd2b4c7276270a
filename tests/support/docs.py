"""The user documentation as tests read it: README.md, docs/README.md and the guide's pages
(docs/guide/*.md), their sections by heading, their code blocks and the commands in them.

A page's commands are the lines of its ```sh blocks (comments dropped), each under the
nearest heading of level 1 or 2 above it: a page's title, or one of its ``##`` sections.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = "README.md"
GUIDE = ROOT / "docs" / "guide"

_HEADING = re.compile(r"^(#{1,6}) (.+)$", re.MULTILINE)
_SH_BLOCK = re.compile(r"^( *)```sh\n(.*?)^\1```", re.MULTILINE | re.DOTALL)


def pages() -> list[str]:
    """Every page of the user documentation, by its path from the repository's root."""
    guide = sorted(str(p.relative_to(ROOT)) for p in GUIDE.glob("*.md"))
    return [README, "docs/README.md", *guide]


def text(page: str) -> str:
    return (ROOT / page).read_text()


def _headings(body: str) -> list[tuple[int, int, str]]:
    """(offset, level, title) of each heading outside code blocks."""
    fenced = [m.span() for m in re.finditer(r"^ *```.*?^ *```", body, re.MULTILINE | re.DOTALL)]
    return [
        (m.start(), len(m.group(1)), m.group(2).strip())
        for m in _HEADING.finditer(body)
        if not any(start <= m.start() < end for start, end in fenced)
    ]


def section(page: str, title: str) -> str:
    """The text under the heading ``title`` of ``page``, up to the next heading of its level
    or a higher one."""
    body = text(page)
    headings = _headings(body)
    found = [(at, level) for at, level, name in headings if name == title]
    assert len(found) == 1, f"{page} has {len(found)} sections titled {title!r}"
    (start, level) = found[0]
    end = next((at for at, lv, _ in headings if at > start and lv <= level), len(body))
    return body[start:end]


def blocks(body: str, language: str) -> list[str]:
    """The code blocks of ``body`` in ``language``, in order (one inside a list item without
    its indent)."""
    found = re.findall(rf"^ *```{language}\n(.*?)^ *```", body, re.MULTILINE | re.DOTALL)
    return [textwrap.dedent(block) for block in found]


@dataclass(frozen=True)
class Command:
    page: str
    section: str
    line: str


def commands(page: str) -> list[Command]:
    body = text(page)
    titles = [(at, name) for at, level, name in _headings(body) if level <= 2]
    found: list[Command] = []
    for block in _SH_BLOCK.finditer(body):
        title = next((name for at, name in reversed(titles) if at < block.start()), "")
        indent = len(block.group(1))
        for raw in block.group(2).splitlines():
            line = re.sub(r"\s+#\s.*$", "", raw[indent:]).strip()
            if line and not line.startswith("#"):
                found.append(Command(page, title, line))
    return found


def all_commands() -> list[Command]:
    return [c for page in pages() for c in commands(page)]


def section_commands(page: str, title: str) -> list[str]:
    """The command lines of one section (a page's title: the page before its first ``##``)."""
    return [c.line for c in commands(page) if c.section == title]


# Pages whose every command the session tests below run, in order: (page, section).
CLI_SESSION = [
    ("docs/guide/cli.md", "The command line"),
    # Its prune and audit commands run on the database the session above filled.
    ("docs/guide/retention.md", "Retention and the audit trail"),
]
PG_SECTION = ("docs/guide/postgresql.md", "PostgreSQL, replicas and remote workers")
# Run line after line against a bot on its port by tests/api/test_api_e2e.py.
API_SECTION = ("docs/guide/http-api.md", "HTTP API")
SESSIONS = [*CLI_SESSION, PG_SECTION, API_SECTION]
