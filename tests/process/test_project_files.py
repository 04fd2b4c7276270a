"""What Countersign and CrewAI write outside a project, checked on a fresh home directory:
a worker run from a project's directory keeps the database and CrewAI's record of its
kickoffs in that directory, says at start where the database is, and leaves under the home
directory only what CrewAI writes there whatever it is told (docs/guide/configuration.md
lists it)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.harness import ROOT

pytestmark = pytest.mark.slow


def countersign(cwd: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CREWAI_", "XDG_"))}
    env.update(HOME=str(home), PYTHONPATH=str(ROOT), COUNTERSIGN_LLM="")
    env.pop("DATABASE_URL", None)
    env.pop("COUNTERSIGN_CONFIG", None)
    return subprocess.run(
        [sys.executable, "-m", "bot", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )


def test_a_projects_database_and_crewais_records_stay_in_the_project(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    shutil.copytree(ROOT / "examples", project)
    countersign(project, home, "runs", "start", "writer", "topic=otters", "--by", "me")
    worked = countersign(project, home, "worker", "--until-idle")
    assert f"database sqlite:///countersign.db (the file {project / 'countersign.db'})" in (
        worked.stderr
    )
    assert (project / "countersign.db").is_file()
    assert (project / ".countersign" / "crewai" / "latest_kickoff_task_outputs.db").is_file()
    written = sorted(str(p.relative_to(home)) for p in home.rglob("*") if p.is_file())
    # CrewAI makes a key for `crewai login` tokens when it is imported, wherever it runs.
    assert written == [".local/share/crewai/credentials/secret.key"]
