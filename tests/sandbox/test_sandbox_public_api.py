"""The sandbox's public names, and the packages it must never import (only ``bot``
talks to Slack; the stand-in stays free of CrewAI, storage and the runtime so it starts fast
and can serve the offline sandbox on its own)."""

from __future__ import annotations

import ast
from pathlib import Path

import sandbox

FORBIDDEN = {"crewai", "sqlalchemy", "storage", "crew_runtime", "slack_bolt"}


def test_public_names() -> None:
    assert set(sandbox.__all__) == {
        "Call",
        "Delivery",
        "Ephemeral",
        "PersonActionRefused",
        "Problem",
        "SandboxError",
        "SandboxPage",
        "SlackApiFailure",
        "SlackStandIn",
        "StandInThread",
        "StoredFile",
        "Tamper",
        "sign",
        "validate_blocks",
        "validate_view",
    }
    assert all(hasattr(sandbox, name) for name in sandbox.__all__)


def test_sandbox_imports_nothing_forbidden() -> None:
    imported: set[str] = set()
    for path in Path(sandbox.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                imported.add(node.module.split(".")[0])
    assert "aiohttp" in imported  # the walk found the imports at all
    assert imported & FORBIDDEN == set()
