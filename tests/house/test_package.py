"""The package a user installs: the wheel built from this repository (hatch_build.py), what
it holds, and a crew run through its ``countersign`` command beside a user's project that
has its own ``storage`` and ``bot`` modules (docs/guide/installing.md).

The rewrite of the imports is checked here on sources made for it; the wheel test builds
and installs the real thing, offline: the third-party dependencies come from this .venv
(a ``.pth`` naming its site-packages, whose own ``.pth`` files, this repository's editable
install among them, are not read), Countersign from the wheel alone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from pathlib import Path

import pytest

from hatch_build import FIRST_PARTY, UnsupportedImport, rewrite, stage

ROOT = Path(__file__).resolve().parents[2]
DIST_INFO = "crewai_countersign-0.1.0.dist-info/"


def test_first_party_imports_are_renamed_and_nothing_else() -> None:
    source = textwrap.dedent(
        '''\
        """Names storage.engine and bot in a docstring."""
        from __future__ import annotations

        import os, bot
        import storage.engine as engine
        from crew_runtime.config import Config
        from  sandbox import (
            SlackStandIn,  # a comment
        )
        from . import sibling
        from .errors import Problem
        from crewai import Crew

        LABEL = "é"; from storage import Store
        NAME = "storage.engine"


        def f(exc: Exception) -> None:
            from bot.cli import main
            raise RuntimeError("bot.x") from exc
        '''
    )
    assert rewrite(source) == textwrap.dedent(
        '''\
        """Names storage.engine and bot in a docstring."""
        from __future__ import annotations

        import os, countersign.bot as bot
        import countersign.storage.engine as engine
        from countersign.crew_runtime.config import Config
        from  countersign.sandbox import (
            SlackStandIn,  # a comment
        )
        from . import sibling
        from .errors import Problem
        from crewai import Crew

        LABEL = "é"; from countersign.storage import Store
        NAME = "storage.engine"


        def f(exc: Exception) -> None:
            from countersign.bot.cli import main
            raise RuntimeError("bot.x") from exc
        '''
    )


def test_a_dotted_first_party_import_without_as_is_refused() -> None:
    with pytest.raises(UnsupportedImport, match="write `from storage import engine`"):
        rewrite("import storage.engine\n", "x.py")
    # Another project's dotted import is not ours to rename.
    assert rewrite("import botocore.session\n") == "import botocore.session\n"


def test_every_package_of_the_repository_is_in_the_wheel() -> None:
    """A new top-level package joins hatch_build.py's list (and test_architecture's)."""
    packages = {path.parent.name for path in ROOT.glob("*/__init__.py")} - {"tests"}
    assert packages == FIRST_PARTY


@pytest.mark.slow
def test_the_staged_package_holds_every_source_and_data_file(tmp_path: Path) -> None:
    written = {str(path) for path in stage(ROOT, tmp_path / "countersign")}
    assert {"__init__.py", "__main__.py", "py.typed", "manifest.yml"} <= written
    for package in ("bot", "crew_runtime", "storage", "sandbox"):
        tracked = subprocess.run(
            ["git", "ls-files", package], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.split()
        assert set(tracked) <= written, package
    assert "sandbox/page/index.html" in written
    assert "storage/migrations/versions/0001_initial.py" in written
    assert not any("__pycache__" in name for name in written)


# A project as `crewai create crew my_project` lays it out (src/my_project/crew.py, main.py,
# config/*.yaml), with a module and a package of its own named as Countersign's folders are.
PROJECT = {
    "pyproject.toml": """\
        [project]
        name = "my_project"
        version = "0.1.0"
        requires-python = ">=3.11"
        dependencies = ["crewai", "crewai-countersign"]
        """,
    "src/my_project/__init__.py": "",
    "src/my_project/config/agents.yaml": """\
        reporter:
          role: Reporter on {topic}
          goal: Write a short report on {topic}
          backstory: A careful reporter.
        """,
    "src/my_project/config/tasks.yaml": """\
        report_task:
          description: Write a short report on {topic}, and note it.
          expected_output: A short report
          agent: reporter
        """,
    "src/my_project/crew.py": """\
        from typing import Any

        from crewai import Agent, Crew, Process, Task
        from crewai.project import CrewBase, agent, crew, task
        from crewai.tools import BaseTool

        import storage
        from bot import signature
        from countersign import ScriptedLLM


        class NoteTool(BaseTool):
            name: str = "note"
            description: str = "Keep a note in the project's own storage."

            def _run(self, text: str) -> str:
                storage.remember(text)
                return "noted"


        @CrewBase
        class MyProject:
            agents: list[Any]
            tasks: list[Task]

            @agent
            def reporter(self) -> Agent:
                return Agent(
                    config=self.agents_config["reporter"],
                    tools=[NoteTool()],
                    llm=ScriptedLLM(
                        label="Report",
                        draft_style="readable",
                        tool_plan=[("note", {"text": signature()})],
                        replan_after_feedback=False,
                    ),
                )

            @task
            def report_task(self) -> Task:
                return Task(config=self.tasks_config["report_task"], human_input=True)

            @crew
            def crew(self) -> Crew:
                return Crew(agents=self.agents, tasks=self.tasks, process=Process.sequential)


        def factory(inputs: dict[str, str]) -> Crew:
            return MyProject().crew()
        """,
    "src/my_project/main.py": """\
        from my_project.crew import MyProject


        def run() -> None:
            MyProject().crew().kickoff(inputs={"topic": "otters"})
        """,
    "src/storage.py": """\
        import os
        from pathlib import Path


        def remember(text: str) -> None:
            with Path(os.environ["MY_NOTES"]).open("a") as notes:
                notes.write(text + "\\n")
        """,
    "src/bot/__init__.py": """\
        def signature() -> str:
            return "noted by the my_project bot"
        """,
    "src/countersign.toml": """\
        [crews.my_project]
        factory = "my_project.crew:factory"
        description = "Writes a report; you review it"
        inputs = ["topic"]
        """,
}


def _fresh_venv(tmp_path: Path) -> Path:
    """A venv with this .venv's third-party packages and none of this repository."""
    venv = tmp_path / "fresh"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(site) / "dev_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return venv


def _env(tmp_path: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("COUNTERSIGN_", "CREWAI_", "PYTHON", "XDG_"))
    }
    env.pop("DATABASE_URL", None)
    (tmp_path / "home").mkdir(exist_ok=True)
    env.update(HOME=str(tmp_path / "home"), USER="ada")
    return env


@pytest.mark.slow
def test_the_wheel_installs_beside_a_project_with_its_own_storage_and_bot(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    build = ["wheel", "--quiet", "--no-build-isolation", "--no-deps", "--no-index"]
    subprocess.run(
        [sys.executable, "-m", "pip", *build, "--wheel-dir", str(dist), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (wheel,) = dist.glob("crewai_countersign-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert [n for n in names if not n.startswith(("countersign/", DIST_INFO))] == []
    assert {
        "countersign/__init__.py",
        "countersign/py.typed",
        "countersign/manifest.yml",
        "countersign/bot/cli/demo.py",
        "countersign/sandbox/page/index.html",
        "countersign/storage/migrations/env.py",
    } <= set(names)
    entry_points = zipfile.ZipFile(wheel).read(f"{DIST_INFO}entry_points.txt").decode()
    assert "countersign = countersign.__main__:main" in entry_points

    venv = _fresh_venv(tmp_path)
    env = _env(tmp_path)
    python, countersign = venv / "bin" / "python", venv / "bin" / "countersign"
    install = ["install", "--quiet", "--no-deps", "--no-index", str(wheel)]
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), *install],
        check=True,
        capture_output=True,
        env=env,
    )
    # Nothing of this repository but the wheel: its top-level names are not importable.
    probe = (
        "import importlib.util, countersign, crewai\n"
        "print(countersign.__file__)\n"
        "print([n for n in ('storage', 'bot', 'crew_runtime', 'sandbox', 'tests')"
        " if importlib.util.find_spec(n)])\n"
        # What `countersign demo` serves, importable and with its files.
        "from countersign.bot.cli import demo\n"
        "from countersign.sandbox.scopes import read_manifest\n"
        "from countersign.sandbox.web import PAGE_DIR\n"
        "read_manifest(); assert (PAGE_DIR / 'index.html').is_file()\n"
    )
    seen = subprocess.run(
        [str(python), "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert seen.returncode == 0, seen.stderr
    where, importable = seen.stdout.splitlines()
    assert where.startswith(str(venv)) and importable == "[]"

    project = tmp_path / "my_project"
    for name, content in PROJECT.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(textwrap.dedent(content))
    notes = tmp_path / "notes.txt"
    env.update(
        COUNTERSIGN_CONFIG=str(project / "src" / "countersign.toml"),
        DATABASE_URL=f"sqlite:///{tmp_path / 'countersign.db'}",
        MY_NOTES=str(notes),
    )

    def run(*args: str) -> str:
        done = subprocess.run(
            [str(countersign), *args],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, f"countersign {' '.join(args)}:\n{done.stdout}{done.stderr}"
        assert "Traceback" not in done.stderr, done.stderr
        return done.stdout

    run_id = run("runs", "start", "my_project", "topic=otters").split()[-1]
    run("worker", "--until-idle")
    (review,) = json.loads(run("reviews", "list", "--run", run_id, "--json"))
    assert review["status"] == "pending"
    run("reviews", "decide", review["id"], "approve", "--by", "ada")
    run("worker", "--until-idle")
    shown = json.loads(run("runs", "show", run_id, "--json"))
    assert shown["status"] == "succeeded", shown
    # The project's own storage module did the tool's work, once, with its own bot's words.
    assert notes.read_text() == "noted by the my_project bot\n"
    assert run("demo", "--help").startswith("usage: countersign demo")
