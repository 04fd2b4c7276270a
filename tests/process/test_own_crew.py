"""The README's path from ``crewai create crew`` to a reviewed run in the sandbox, as
written: the project CrewAI makes, the factory and configuration the README shows (read
from it), ``countersign demo --config src/countersign.toml`` from the project's directory,
and both tasks reviewed in the sandbox with readable drafts, the tools not run again after
feedback, and no word of the example crews."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import docs
from tests.support.demo_process import DemoProcess, SandboxClient, pending_button, run_thread

pytestmark = pytest.mark.slow

SECTION = "Add Countersign to a CrewAI project"


def readme_files() -> dict[str, str]:
    """The files the README's section shows, by the path its first line names."""
    section = docs.section(docs.README, SECTION)
    files = {}
    for block in docs.blocks(section, "python") + docs.blocks(section, "toml"):
        first, _, rest = block.partition("\n")
        files[first.lstrip("# ").strip()] = rest
    return files


def test_a_crewai_project_gets_a_reviewed_run_in_the_sandbox(tmp_path: Path) -> None:
    create, cd, install, demo = docs.section_commands(docs.README, SECTION)
    assert create.startswith("crewai create crew my_project") and cd == "cd my_project"
    # Not run: this .venv has Countersign installed already (make venv), and a fresh
    # environment would fetch it from PyPI (tests/house/test_readme.py says so).
    assert install == "pip install crewai-countersign"
    env = {**os.environ, "HOME": str(tmp_path / "home")}
    crewai = Path(sys.executable).parent / "crewai"
    subprocess.run(
        [str(crewai), *create.split()[1:]],
        cwd=tmp_path,
        env=env,
        check=True,
        timeout=120,
        capture_output=True,
    )
    project = tmp_path / "my_project"
    for name, content in readme_files().items():
        (project / name).write_text(content)
    command = [sys.executable, "-m", "bot", *demo.split()[1:], "--port", "0"]
    running = DemoProcess(command, tmp_path, cwd=project)
    try:
        page = SandboxClient(running.url)
        welcome = json.dumps(page.state()["messages"][0])
        assert "/crew run my_project topic=otters current_year=" in welcome
        assert "writer" not in welcome
        page.post("send", {"text": "/crew run my_project topic=otters current_year=2026"})
        for label in ("Research", "Report"):
            button = page.wait(
                lambda s, label=label: (
                    (t := run_thread(s, "my_project"))
                    and (b := pending_button(t, "approve"))
                    and label in json.dumps(t["replies"][-1])
                    and b
                ),
                f"the {label} draft",
            )
            page.post("click", button)
        done = page.wait(
            lambda s: (t := run_thread(s, "my_project")) and "Succeeded" in json.dumps(t) and t,
            "the run to succeed",
        )
        shown = json.dumps(done, ensure_ascii=False)
        assert "(version 1)" in shown  # readable drafts, not the one-line format
    finally:
        running.stop()
    assert "Traceback" not in running.output, running.output
