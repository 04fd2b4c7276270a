"""README.md's shell sessions, read as the tests run them."""

from __future__ import annotations

import re
from dataclasses import dataclass

from tests.support.harness import ROOT

# Run line after line against a bot on its port by tests/test_api_e2e.py.
API_SECTION = "HTTP API"


def readme_commands() -> list[Command]:
    text = README.read_text()
    headings = [(m.start(), m.group(1)) for m in _HEADING.finditer(text)]
    found: list[Command] = []
    for block in _BLOCK.finditer(text):
        section = next((h for at, h in reversed(headings) if at < block.start()), "")
        indent = len(block.group(1))
        for raw in block.group(2).splitlines():
            line = re.sub(r"\s+#\s.*$", "", raw[indent:]).strip()
            if line and not line.startswith("#"):
                found.append(Command(section, line))
    return found


@dataclass(frozen=True)
class Command:
    section: str
    line: str


README = ROOT / "README.md"


_BLOCK = re.compile(r"^( *)```sh\n(.*?)^\1```", re.MULTILINE | re.DOTALL)


_HEADING = re.compile(r"^## (.+)$", re.MULTILINE)
