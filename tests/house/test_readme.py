"""The user documentation's commands work: each one is run here, run by another test, or needs
real credentials; and its links lead somewhere.

The documentation is README.md, docs/README.md and the guide (docs/guide/*.md), read by
``tests/support/docs.py``. Commands are the lines of their ```sh code blocks (comments dropped). The
command-line, retention and PostgreSQL pages are run here literally, line after line, in a shell
from the repository's root, with only three things filled in the way a reader would: ``RUN_ID``
(the id the last ``runs start`` printed), ``REVIEW_ID`` (that run's pending review) and the
database URL (the test's own database). The coverage test fails when a command is added to a
page without a test that exercises it, or names a test that does not exist.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import unquote

import pytest

from crew_runtime.config import load_config
from tests.support import docs
from tests.support.crews import effects
from tests.support.docs import CLI_SESSION, PG_SECTION, SESSIONS
from tests.support.zygote import Zygote

ROOT = docs.ROOT


# Commands another test runs, by that test's node id.
ELSEWHERE = {
    "make test": "tests/house/test_readme.py::test_ci_runs_the_readme_test_command",
    "make demo": "tests/process/test_demo.py::test_make_demo_serves_the_sandbox_and_stops_cleanly",
    "make bench": "tests/process/test_bench_smoke.py::test_every_benchmark_of_make_bench_runs",
    # serve's worker process is this command, with serve's --worker-metrics-port.
    "countersign worker --metrics-port 9102": "tests/process/test_metrics.py::"
    "test_serve_and_its_worker_expose_what_happened_to_a_run_paused_and_decided",
    "LOG_FORMAT=json countersign worker": "tests/process/test_metrics.py::"
    "test_a_worker_logs_one_json_object_per_line_with_its_runs",
    "countersign runs start deal customer=acme approver=U0DANA01": "tests/cli/"
    "test_reviewer_input.py::test_the_cli_takes_a_user_id_as_the_reviewer",
    "countersign reviews claim REVIEW_ID --by U0ANA01": "tests/storage/test_claims.py::"
    "test_only_a_named_reviewer_claims_or_is_given_a_review",
    "countersign reviews reassign REVIEW_ID --to U0BEN01 --by U0ANA01": "tests/storage/"
    "test_claims.py::test_only_a_named_reviewer_claims_or_is_given_a_review",
    "countersign reviews decide rev_5e0c2a91d4b7 approve --standing --by U0ANA01": "tests/runtime/"
    "test_standing.py::test_the_cli_grants_shows_and_revokes_a_standing_approval",
    "countersign reviews decide rev_238112b5263e approve --by U0PRIYA --digest 2eea04005bf4": (
        "tests/runtime/test_digests.py::test_the_cli_refuses_a_decision_for_another_digest"
    ),
    **dict.fromkeys(
        (
            """countersign rules test payments --tool pay --args '{"amount": 42}'""",
            """countersign rules test payments --tool pay --args '{"amount": 250}'""",
            """countersign rules test payments --tool pay --args '{"amount": 25000}'""",
            """countersign rules test payments --tool pay --args '{"amount": 250000}'""",
            "countersign rules test payments --tool send_email "
            """--args '{"to": "board@ourco.com"}'""",
        ),
        "tests/runtime/test_rules.py::test_the_guides_rules_load_and_its_tries_answer_as_it_shows",
    ),
    "countersign reviews revoke std_9b41c07e2d5a --by U0BEN02": "tests/runtime/"
    "test_standing.py::test_the_cli_grants_shows_and_revokes_a_standing_approval",
    # Run with its date moved ahead of today, so that the test does not expire.
    "countersign reviewers away U0ANA --until 2026-12-24 --to U0BEN": "tests/storage/test_away.py::"
    "test_the_readme_commands_hand_reviews_over_and_back",
    "countersign reviewers list": "tests/storage/test_away.py::"
    "test_the_readme_commands_hand_reviews_over_and_back",
    "countersign reviewers back U0ANA": "tests/storage/test_away.py::"
    "test_the_readme_commands_hand_reviews_over_and_back",
    # "Add Countersign to a CrewAI project", run in a project of its own, from its directory.
    "crewai create crew my_project --classic --skip-provider": "tests/process/test_own_crew.py::"
    "test_a_crewai_project_gets_a_reviewed_run_in_the_sandbox",
    "cd my_project": "tests/process/test_own_crew.py::"
    "test_a_crewai_project_gets_a_reviewed_run_in_the_sandbox",
    "countersign demo --config src/countersign.toml": "tests/process/test_own_crew.py::"
    "test_a_crewai_project_gets_a_reviewed_run_in_the_sandbox",
}

# Commands that need what no test may have: a real Slack workspace or an LLM provider's key.
NEEDS_CREDENTIALS = {
    "COUNTERSIGN_LLM=openai/gpt-4o-mini OPENAI_API_KEY=sk-... make demo": "an OpenAI API key",
    "export SLACK_BOT_TOKEN=xoxb-... SLACK_SIGNING_SECRET=...": "a Slack app's tokens",
    "countersign serve --port 3000": "a Slack app reaching a public URL",
    "export SLACK_BOT_TOKEN=xoxb-... SLACK_APP_TOKEN=xapp-...": "a Slack app's tokens",
    "countersign serve --socket-mode": "a Slack app-level token",
    "countersign serve --workers 2": "a Slack app's tokens",
    "countersign serve --no-workers": "a Slack app's tokens",
    "countersign serve --port 3000 --worker-metrics-port 9101": "a Slack app reaching a public URL",
    "countersign serve --socket-mode --metrics-port 9100": "a Slack app-level token",
    # Into the project's environment; a fresh one fetches Countersign and CrewAI from PyPI.
    "pip install crewai-countersign": "the network (PyPI), in an environment of its own",
}


def _test_exists(node_id: str) -> bool:
    path, _, name = node_id.partition("::")
    source = ROOT / path
    if not source.is_file():
        return False
    tree = ast.parse(source.read_text())
    return any(isinstance(n, ast.FunctionDef) and n.name == name for n in tree.body)


def test_the_guide_is_read_and_holds_the_sessions() -> None:
    """The pages read are the README, docs/README.md and every page of docs/guide/."""
    read = docs.pages()
    assert read[:2] == ["README.md", "docs/README.md"]
    assert {page for page, _ in SESSIONS} <= set(read), "a session's page moved?"
    for page, title in SESSIONS:
        assert docs.section_commands(page, title), f"no commands in {page}, {title!r}"


def test_every_code_block_says_what_it_holds() -> None:
    """An untagged block could hide a command from the check below: each one names its
    language (``sh`` for commands a reader runs; ``text`` for output or layouts)."""
    for page in docs.pages():
        fences = re.findall(r"^ *```(\S*)$", docs.text(page), re.MULTILINE)
        openings = fences[0::2]
        assert len(fences) % 2 == 0 and all(openings), (page, openings)


def unaccounted(commands: Sequence[docs.Command]) -> list[str]:
    """The commands no session runs, no test names and no credentials excuse."""
    return [
        f"{c.page}: {c.line}"
        for c in commands
        if (c.page, c.section) not in SESSIONS
        and c.line not in ELSEWHERE
        and c.line not in NEEDS_CREDENTIALS
    ]


def test_every_documented_command_is_exercised_or_needs_credentials() -> None:
    commands = docs.all_commands()
    assert unaccounted(commands) == [], "documented commands no test exercises"
    missing = [node for node in ELSEWHERE.values() if not _test_exists(node)]
    assert missing == [], "tests named in ELSEWHERE do not exist"
    stale = set(ELSEWHERE) | set(NEEDS_CREDENTIALS)
    assert stale <= {c.line for c in commands}, "listed commands no longer documented"


def test_a_command_on_a_guide_page_with_no_test_is_caught() -> None:
    """The check above reads the guide's pages too: a new command there needs a test."""
    new = docs.Command("docs/guide/flows.md", "Flows", "countersign flows replay RUN_ID")
    assert unaccounted([new]) == ["docs/guide/flows.md: countersign flows replay RUN_ID"]
    ran = docs.Command(*CLI_SESSION[0], "countersign crews list")
    assert unaccounted([ran]) == []


def test_every_python_block_compiles() -> None:
    """A reader copies these: each one is Python (tests run the ones that can run alone)."""
    for page in docs.pages():
        for number, block in enumerate(docs.blocks(docs.text(page), "python"), 1):
            compile(block, f"{page}, Python block {number}", "exec")


def test_the_first_crews_configuration_loads(tmp_path: Path) -> None:
    """The README's and the guide's first crew: the file they show is a valid configuration."""
    for page, title in ((docs.README, "Write a crew"), ("docs/guide/crews.md", "Writing crews")):
        (example,) = docs.blocks(docs.section(page, title), "toml")
        path = tmp_path / "countersign.toml"
        path.write_text(example)
        spec = load_config(path).get("blog")
        assert (spec.factory, spec.required_inputs) == ("my_crews:blog", ("topic",)), page


def test_the_readmes_rules_load_as_shown(tmp_path: Path) -> None:
    """The README's rules: a valid configuration, whose rules answer as the text says."""
    (example,) = docs.blocks(
        docs.section(docs.README, "Approve exactly this, and let rules take the easy ones"), "toml"
    )
    path = tmp_path / "countersign.toml"
    path.write_text(example)
    rules = load_config(path).get("payments").rules
    run = {"id": "r", "crew": "payments", "started_by": ""}
    small = rules.match("pay", {"amount": 42}, inputs={}, run=run)
    big = rules.match("pay", {"amount": 25000}, inputs={}, run=run)
    assert small is not None and (small.rule.name, small.rule.decide) == (
        "small-payments",
        "approve",
    )
    assert big is not None and (big.rule.name, big.rule.decide) == ("big-payments", None)
    assert rules.match("pay", {"amount": 500}, inputs={}, run=run) is None


def test_ci_runs_the_readme_test_command() -> None:
    """`make test` is what CI runs (.ci/run), so CI itself exercises it on every push."""
    script = (ROOT / ".ci" / "run").read_text().splitlines()
    assert "make test" in [line.strip() for line in script]
    assert "make test" in docs.section_commands(docs.README, "Try it")
    target = re.search(r"^test:.*\n(?:\t.*\n)*", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert target and re.search(r"\bunit\b", target.group(0)), "make test runs no unit tests"


# -- links -------------------------------------------------------------------------------------

_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def anchor(title: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    title = re.sub(r"[`*_]|<[^>]*>", "", title).strip().lower()
    return re.sub(r"[^\w\- ]", "", title).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    body = page.read_text()
    fenced = re.sub(r"^ *```.*?^ *```", "", body, flags=re.MULTILINE | re.DOTALL)
    return {anchor(m) for m in re.findall(r"^#{1,6} (.+)$", fenced, re.MULTILINE)}


def broken_links(page: Path) -> list[str]:
    """The relative links of ``page`` to a file that is not there, or to a heading that is not
    in the page they name."""
    body = re.sub(r"^ *```.*?^ *```", "", page.read_text(), flags=re.MULTILINE | re.DOTALL)
    broken = []
    for target in _LINK.findall(body):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:: not ours to check offline
        path, _, fragment = unquote(target).partition("#")
        resolved = Path(os.path.normpath(page.parent / path)) if path else page
        if not resolved.exists():
            broken.append(f"{target} (no such file)")
        elif fragment and resolved.suffix == ".md" and fragment not in anchors(resolved):
            broken.append(f"{target} (no such heading)")
    return broken


def test_every_relative_link_leads_to_a_file_and_heading_that_exist() -> None:
    broken = {page: broken_links(ROOT / page) for page in docs.pages()}
    assert {page: links for page, links in broken.items() if links} == {}


def test_a_broken_link_is_caught(tmp_path: Path) -> None:
    (tmp_path / "cli.md").write_text("# The command line\n")
    page = tmp_path / "page.md"
    page.write_text(
        "# A page\n\n[fine](cli.md#the-command-line) [gone](no-such.md) "
        "[no heading](cli.md#nowhere) [here](#a-page) [not here](#elsewhere) "
        "[code](cli.md) [web](https://example.com/#x)\n"
        "```text\n[in a block](nowhere.md)\n```\n"
    )
    assert broken_links(page) == [
        "no-such.md (no such file)",
        "cli.md#nowhere (no such heading)",
        "#elsewhere (no such heading)",
    ]


# -- running a section like a reader ----------------------------------------------------------


@dataclass
class Session:
    """A shell session from the repository's root, on the test's database."""

    database_url: str
    tmp: Path
    env: dict[str, str] = field(default_factory=dict)
    run_id: str | None = None
    ran: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        # `countersign` is the installed command's stand-in that forks it warm (tests/bin).
        bin_dirs = [str(ROOT / "tests" / "bin"), str(Path(sys.executable).parent)]
        self.env = {
            **os.environ,
            "PATH": os.pathsep.join([*bin_dirs, os.environ.get("PATH", "")]),
            "COUNTERSIGN_TEST_ZYGOTE": Zygote.started(),
            "DATABASE_URL": self.database_url,
            "COUNTERSIGN_OUTBOX_FILE": str(self.tmp / "sent-emails.jsonl"),
            "COUNTERSIGN_TEST_EFFECTS": str(self.tmp / "effects.jsonl"),
            "USER": "alice",
        }
        self.env.pop("COUNTERSIGN_LLM", None)

    def run(self, line: str) -> str:
        if line.startswith("export "):
            for pair in shlex.split(line)[1:]:
                name, _, value = pair.partition("=")
                # The reader's own database would be theirs; ours is the test's.
                self.env[name] = self.database_url if name == "DATABASE_URL" else value
            self.ran.append(line)
            return ""
        command = self._fill(line)
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, f"{command!r} failed:\n{done.stdout}\n{done.stderr}"
        if " runs start " in f" {line} ":
            self.run_id = done.stdout.strip().split()[-1]
        self.ran.append(line)
        return done.stdout

    def long_running(self, line: str, until: str) -> None:
        """Start a command that runs until stopped; stop it once ``until`` is logged."""
        process = subprocess.Popen(
            ["bash", "-c", f"exec {self._fill(line)}"],
            cwd=ROOT,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            seen = self._wait_for(process, until)
            process.send_signal(signal.SIGTERM)
            _, rest = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
        assert process.returncode == 0, seen + rest
        self.ran.append(line)

    def _wait_for(self, process: subprocess.Popen[str], until: str) -> str:
        assert process.stderr is not None
        seen = ""
        deadline = time.monotonic() + 120
        while until not in seen:
            line = process.stderr.readline()
            assert line or process.poll() is None, f"exited before {until!r}:\n{seen}"
            assert time.monotonic() < deadline, f"no {until!r} in:\n{seen}"
            seen += line
        return seen

    def _fill(self, line: str) -> str:
        if "RUN_ID" in line or "REVIEW_ID" in line:
            assert self.run_id, f"{line!r} before any runs start"
            line = line.replace("RUN_ID", self.run_id)
        if "REVIEW_ID" in line:
            line = line.replace("REVIEW_ID", self.pending_review())
        return line

    def pending_review(self) -> str:
        listed = subprocess.run(
            ["countersign", "reviews", "list", "--all", "--run", str(self.run_id), "--json"],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            check=True,
        )
        reviews = json.loads(listed.stdout)
        pending = [r for r in reviews if r["status"] == "pending"]
        return str((pending or reviews)[-1]["id"])

    def json(self, *args: str) -> object:
        return json.loads(self.run(shlex.join(["countersign", *args, "--json"])))


@pytest.fixture
def session(db_url: str, tmp_path: Path) -> Session:
    return Session(db_url, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_the_command_line_section_runs_as_written(session: Session) -> None:
    for page, title in CLI_SESSION:
        for line in docs.section_commands(page, title):
            session.run(line)
    runs = {
        run["crew"] + ":" + run["inputs"].get("topic", ""): run
        for run in session.json("runs", "list")
    }  # type: ignore[union-attr]
    assert runs["writer:durable agents"]["status"] == "cancelled"
    assert runs["research:sea otters"]["status"] == "succeeded"
    assert runs["outreach:otter tours"]["status"] == "succeeded"
    assert runs["writer:otters"]["status"] == "rejected"
    assert runs["writer:tides"]["status"] == runs["writer:kelp"]["status"] == "rejected"
    sent = effects(session.tmp / "sent-emails.jsonl")
    assert [e["subject"] for e in sent] == ["Otter tours, this spring"]
    today = datetime.now(UTC).date()
    since, until = str(today - timedelta(days=1)), str(today + timedelta(days=1))
    exported = session.run(f"countersign audit export --since {since} --until {until}")
    records = [json.loads(line) for line in exported.splitlines()]
    edit = next(r for r in records if r["review_kind"] == "tool_approval")
    assert edit["executed_args"]["subject"] == "Otter tours, this spring"


@pytest.mark.slow
@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
def test_the_postgresql_section_runs_as_written(session: Session) -> None:
    session.env["COUNTERSIGN_CONFIG"] = "examples/countersign.toml"
    for line in docs.section_commands(*PG_SECTION):
        if line in NEEDS_CREDENTIALS:
            continue
        if line.startswith("countersign worker") and "--until-idle" not in line:
            session.run("countersign runs start writer topic=otters")
            session.long_running(line, until=": waiting")
        else:
            session.run(line)
    [run] = session.json("runs", "list")  # type: ignore[misc]
    assert run["status"] == "waiting"
