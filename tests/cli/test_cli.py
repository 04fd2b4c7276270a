"""The ``countersign`` command line against real databases and real (scripted) crews.

Most tests call ``bot.cli.main(argv)`` in this process: a subprocess would import crewai
again for every call. A few run the installed entry point, to check what only a fresh
process shows: that it starts, which modules it imports, how it stops on a signal.

Every bad request must print exactly one ``error:`` line, exit 2 and change nothing;
"nothing" is checked by comparing the runs, reviews and unsent outbox rows before and
after.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest

from bot.cli.admin import parse_inputs
from bot.cli.context import CliError
from bot.cli.main import main
from bot.settings import Settings, SettingsError, mask_url
from crew_runtime.digests import draft_digest
from storage import (
    DEFAULT_URL,
    DecisionKind,
    NewDecision,
    NewReview,
    ReviewKind,
    Store,
)
from storage.migrate import current_revision
from tests.support.cli import Cli, assert_refused

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent

CONFIG = """\
[crews.writer]
factory = "tests.support.crews:writer"
description = "Outline, then write an article"
inputs = ["topic"]
optional_inputs = ["extra"]

[crews.research]
factory = "tests.support.crews:research"
description = "Research, ask a human, publish"

[crews.broken]
factory = "tests.support.crews:broken"

[crews.payments]
factory = "tests.support.crews:payments"
description = "Pays a supplier; large payments are gated"
"""


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "countersign.toml"
    path.write_text(CONFIG)
    return path


@pytest.fixture
def cli(db_url: str, config_file: Path, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(db_url, config_file, capsys)


# --- pure parts ---------------------------------------------------------------------------


def test_inputs_keep_everything_after_the_first_equals_sign() -> None:
    tokens = ["topic=durable agents", "query=a=b", "note=", "_x1=y"]
    assert parse_inputs(tokens) == {
        "topic": "durable agents",
        "query": "a=b",
        "note": "",
        "_x1": "y",
    }


@pytest.mark.parametrize(
    ("token", "why"),
    [
        ("topic", "expected key=value"),
        ("=otters", "name before '=' is empty"),
        ("my-topic=x", "letters, digits and '_'"),
        ("1topic=x", "letters, digits and '_'"),
    ],
)
def test_malformed_inputs_are_refused(token: str, why: str) -> None:
    with pytest.raises(CliError, match=why):
        parse_inputs([token])


def test_an_input_given_twice_is_refused() -> None:
    with pytest.raises(CliError, match="given twice"):
        parse_inputs(["topic=a", "topic=b"])


def test_settings_defaults_and_overrides() -> None:
    assert Settings.from_env({}) == Settings(DEFAULT_URL, None, "INFO", "cli")
    settings = Settings.from_env(
        {
            "DATABASE_URL": "postgresql://app:s3cret@db/countersign",
            "COUNTERSIGN_CONFIG": "/etc/countersign.toml",
            "LOG_LEVEL": "debug",
            "USER": "alice",
        }
    )
    assert settings.config_path == Path("/etc/countersign.toml")
    assert settings.log_level == "DEBUG"
    assert settings.default_user == "alice"
    assert "s3cret" not in repr(settings)
    assert "app:***@db" in repr(settings)


def test_a_bad_log_level_is_a_settings_error() -> None:
    with pytest.raises(SettingsError, match="LOG_LEVEL"):
        Settings.from_env({"LOG_LEVEL": "loud"})


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("sqlite:///countersign.db", "sqlite:///countersign.db"),
        ("postgresql://app:s3cret@db:5432/c", "postgresql://app:***@db:5432/c"),
        ("postgresql://app:p@ss@db/c", "postgresql://app:***@db/c"),
        (
            "postgresql://app@db/c?password=s3cret&sslmode=require",
            "postgresql://app@db/c?password=***&sslmode=require",
        ),
        ("postgresql://[::1", "***"),
    ],
)
def test_mask_url_hides_passwords(url: str, shown: str) -> None:
    assert mask_url(url) == shown


# --- runs ---------------------------------------------------------------------------------


def test_start_list_and_show(cli: Cli) -> None:
    started = cli.ok("runs", "start", "writer", "topic=durable agents", "extra=a=b", "--by", "ann")
    run_id = started.out.strip()
    assert started.out == run_id + "\n"
    assert run_id.startswith("run_")

    table = cli.ok("runs", "list").out.splitlines()
    assert table[0].split() == ["ID", "CREW", "STATUS", "PENDING", "CREATED", "STARTED", "BY"]
    assert table[1].split()[:4] == [run_id, "writer", "queued", "0"]
    assert table[1].split()[-1] == "ann"

    (listed,) = cli.ok("runs", "list", "--json").json()
    shown = cli.ok("runs", "show", run_id, "--json").json()
    assert listed == shown
    assert shown["id"] == run_id
    assert shown["crew"] == "writer"
    assert shown["status"] == "queued"
    assert shown["inputs"] == {"topic": "durable agents", "extra": "a=b"}
    assert shown["output"] is None and shown["error"] is None
    assert shown["reviews"] == []
    assert shown["created_at"].endswith("Z")

    block = cli.ok("runs", "show", run_id).out
    assert f"run      {run_id}" in block
    assert "inputs   topic=durable agents extra=a=b" in block
    assert "reviews  (none)" in block


def test_list_filters_by_status_and_crew_and_limits(cli: Cli) -> None:
    first = cli.ok("runs", "start", "writer", "topic=a").out.strip()
    second = cli.ok("runs", "start", "research", "topic=b").out.strip()
    cli.ok("runs", "cancel", first)

    def ids(*argv: str) -> list[str]:
        return [run["id"] for run in cli.ok("runs", "list", "--json", *argv).json()]

    assert set(ids()) == {first, second}
    assert ids("--status", "cancelled") == [first]
    assert ids("--crew", "research") == [second]
    assert len(ids("--limit", "1")) == 1
    assert cli.ok("runs", "list", "--status", "succeeded").out == "no runs\n"


def test_a_task_review_flow_from_pause_to_success(cli: Cli) -> None:
    run_id = cli.ok("runs", "start", "writer", "topic=otters").out.strip()
    cli.worker()

    (outline,) = cli.ok("reviews", "list", "--json").json()
    assert outline["run_id"] == run_id
    assert outline["kind"] == "task_review"
    assert outline["status"] == "pending"
    assert outline["decision"] is None
    assert "otters" in outline["prompt"]
    assert cli.ok("runs", "list").out.splitlines()[1].split()[2:4] == ["waiting", "1"]
    assert outline["id"] in cli.ok("reviews", "list").out

    confirmed = cli.ok("reviews", "decide", outline["id"], "approve", "--by", "alice").out
    assert confirmed == f"{outline['id']}: approve by alice; run {run_id} is queued\n"
    assert cli.ok("reviews", "list").out == "no pending reviews\n"
    cli.worker()

    (article,) = cli.ok("reviews", "list", "--json").json()
    edited = "The edited article.\nSecond line."
    cli.ok("reviews", "decide", article["id"], "edit", "-", "--by", "bob", stdin=edited + "\n")
    cli.worker()

    shown = cli.ok("runs", "show", run_id, "--json").json()
    assert shown["status"] == "succeeded"
    assert shown["output"] == edited
    first, second = shown["reviews"]
    assert first["decision"]["kind"] == "approve"
    assert first["decision"]["by"] == "alice"
    assert first["decision"]["at"].endswith("Z")
    assert first["decision"]["original"] is None
    assert second["decision"] == {
        "kind": "edit",
        "text": edited,
        "original": article["prompt"],
        "by": "bob",
        "at": second["decision"]["at"],
        # The edit covers the edited draft's own digest, not the one reviewed.
        "digest": draft_digest(second["run_id"], "task1:Editor", 0, edited, typed=False),
    }
    assert second["digest"] != second["decision"]["digest"]
    assert cli.ok("reviews", "show", second["id"], "--json").json() == second

    block = cli.ok("runs", "show", run_id).out
    assert "status   succeeded" in block
    assert "decided  approve by alice at " in block
    assert "text     The edited article.\n           Second line." in block
    assert "original " in block
    review_block = cli.ok("reviews", "show", second["id"]).out
    assert review_block.startswith(f"run      {run_id} (writer, succeeded)\n")
    assert "decided  edit by bob at " in review_block
    assert [r["id"] for r in cli.ok("reviews", "list", "--all", "--json").json()] == [
        first["id"],
        second["id"],
    ]


def test_a_question_is_answered(cli: Cli) -> None:
    run_id = cli.ok("runs", "start", "research", "topic=otters", "subject=otters").out.strip()
    cli.worker()
    paused = cli.ok("runs", "show", run_id, "--json").json()
    assert paused["status"] == "waiting", paused
    (question,) = paused["reviews"]
    assert question["kind"] == "question"
    assert "tone" in question["prompt"]

    before = cli.snapshot()
    assert_refused(cli("reviews", "decide", question["id"], "approve", "--by", "a"), "question")
    assert cli.snapshot() == before

    cli.ok("reviews", "decide", question["id"], "answer", "Formal, please.", "--by", "carol")
    cli.worker()
    shown = cli.ok("runs", "show", run_id, "--json").json()
    assert shown["status"] == "succeeded"
    assert shown["reviews"][0]["decision"]["text"] == "Formal, please."


def test_a_tool_call_edit_names_only_the_arguments_it_changes(cli: Cli) -> None:
    run_id = cli.ok("runs", "start", "payments", "amount=1500").out.strip()
    cli.worker()
    (call,) = cli.ok("runs", "show", run_id, "--json").json()["reviews"]
    assert call["kind"] == "tool_approval"

    assert_refused(
        cli("reviews", "decide", call["id"], "edit", '{"amount": "lots"}', "--by", "a"),
        "amount: expected integer, got string",
    )
    cli.ok("reviews", "decide", call["id"], "edit", '{"amount": 900}', "--by", "carol")
    decided = cli.ok("reviews", "show", call["id"], "--json").json()
    assert json.loads(decided["decision"]["text"]) == {"amount": 900, "to": "ACME"}


def test_a_crew_that_cannot_be_built_fails_its_run(cli: Cli) -> None:
    run_id = cli.ok("runs", "start", "broken").out.strip()
    cli.worker()
    shown = cli.ok("runs", "show", run_id, "--json").json()
    assert shown["status"] == "failed"
    assert "could not be built" in shown["error"]


def test_cancel_closes_the_run_and_its_pending_reviews(cli: Cli) -> None:
    run_id = cli.ok("runs", "start", "writer", "topic=otters").out.strip()
    cli.worker()
    (review,) = cli.ok("reviews", "list", "--json").json()

    assert cli.ok("runs", "cancel", run_id, "--by", "dave").out == f"{run_id}: cancelled by dave\n"
    shown = cli.ok("runs", "show", run_id, "--json").json()
    assert shown["status"] == "cancelled"
    assert shown["error"] == "cancelled by dave"
    assert shown["reviews"][0]["status"] == "cancelled"
    assert "(no decision)" in cli.ok("reviews", "show", review["id"]).out

    before = cli.snapshot()
    assert_refused(cli("runs", "cancel", run_id), "already ended (cancelled)")
    assert_refused(cli("reviews", "decide", review["id"], "approve", "--by", "e"), "cancelled")
    assert cli.snapshot() == before


def test_cancel_is_recorded_as_user_by_default(cli: Cli) -> None:
    run_id = cli.ok("runs", "start", "writer", "topic=otters").out.strip()
    assert cli("runs", "cancel", run_id, environ={"USER": "erin"}).out.endswith("by erin\n")


# --- bad requests -------------------------------------------------------------------------


@dataclass(frozen=True)
class Seeded:
    run_id: str
    pending: str  # a pending task review
    decided: str  # a task review bob approved
    question: str  # a pending question


@pytest.fixture
def seeded(cli: Cli) -> Seeded:
    """Runs paused at reviews, made through the store: the paths under test never reach a
    crew, so there is no need to pay for executing one."""
    store = Store.open(cli.db_url)
    lease = timedelta(seconds=30)
    runs = [store.create_run("writer", {"topic": str(i)}) for i in range(2)]
    tokens = {}
    for _ in runs:
        claimed = store.claim_run("w", lease)
        assert claimed is not None and claimed.lease_token is not None
        tokens[claimed.id] = claimed.lease_token
    pending, decided = store.suspend_run(
        runs[0].id,
        tokens[runs[0].id],
        [
            NewReview(kind=ReviewKind.TASK_REVIEW, stream="task0:Writer", seq=0, prompt="a"),
            NewReview(kind=ReviewKind.TASK_REVIEW, stream="task1:Editor", seq=0, prompt="b"),
        ],
    )
    (question,) = store.suspend_run(
        runs[1].id,
        tokens[runs[1].id],
        [NewReview(kind=ReviewKind.QUESTION, stream="t", seq=0, prompt="?")],
    )
    store.decide(decided.id, NewDecision(DecisionKind.APPROVE, "bob"))
    store.close()
    return Seeded(runs[0].id, pending.id, decided.id, question.id)


BAD_REQUESTS: dict[str, tuple[list[str], list[str]]] = {
    # name: (argv with {placeholders} from Seeded, texts the error line must contain)
    "unknown crew": (["runs", "start", "nope", "topic=x"], ['"nope"', "research, writer"]),
    "no equals sign": (["runs", "start", "writer", "topic"], ["'topic'", "key=value"]),
    "empty key": (["runs", "start", "writer", "=x"], ["'=x'", "empty"]),
    "missing input": (["runs", "start", "writer", "other=x"], ["topic"]),
    "unknown run": (["runs", "show", "run_nope"], ["run_nope"]),
    "cancel unknown run": (["runs", "cancel", "run_nope"], ["run_nope"]),
    "unknown run filter": (["reviews", "list", "--run", "run_nope"], ["run_nope"]),
    "unknown review": (["reviews", "show", "rev_nope"], ["rev_nope"]),
    "decide unknown review": (
        ["reviews", "decide", "rev_nope", "approve", "--by", "x"],
        ["rev_nope"],
    ),
    "already decided": (
        ["reviews", "decide", "{decided}", "reject", "--by", "x"],
        ["{decided}", "by bob", "approve"],
    ),
    "not allowed for a question": (
        ["reviews", "decide", "{question}", "approve", "--by", "x"],
        ["question", "answer"],
    ),
    "answer on a task review": (
        ["reviews", "decide", "{pending}", "answer", "yes", "--by", "x"],
        ["task review", "approve, changes, edit, reject"],
    ),
    "edit without text": (["reviews", "decide", "{pending}", "edit", "--by", "x"], ["'edit'"]),
    "changes with blank stdin": (
        ["reviews", "decide", "{pending}", "changes", "-", "--by", "x"],
        ["'changes'", "feedback"],
    ),
    "answer without text": (["reviews", "decide", "{question}", "answer", "--by", "x"], ["text"]),
    "unknown decision": (
        ["reviews", "decide", "{pending}", "maybe", "--by", "x"],
        ["'maybe'", "approve|edit"],
    ),
    "blank reviewer": (["reviews", "decide", "{pending}", "approve", "--by", " "], ["--by"]),
    "an input the crew does not take": (
        ["runs", "start", "writer", "topic=otters", "colour=blue"],
        ["crew 'writer' does not take the input(s) colour; it takes topic (required) and extra"],
    ),
    # A byte that is not UTF-8 reaches Python's argv as a lone surrogate (U+DC80..U+DCFF).
    "undecodable byte in an input": (
        ["runs", "start", "writer", "topic=caf\udce9"],
        ["the input 'topic'", "U+DCE9", "cannot be stored"],
    ),
    "NUL in feedback": (
        ["reviews", "decide", "{pending}", "changes", "a\x00b", "--by", "x"],
        ["decision's text", "U+0000"],
    ),
    "undecodable byte in --by": (
        ["reviews", "decide", "{pending}", "approve", "--by", "\udcff"],
        ["--by", "U+DCFF"],
    ),
    "undecodable byte in revise feedback": (
        ["runs", "revise", "{run_id}", "1", "caf\udce9", "--by", "x"],
        ["the feedback", "U+DCE9"],
    ),
    "a reviewer's name longer than its column": (
        ["reviews", "decide", "{pending}", "approve", "--by", "x" * 65],
        ["--by", "longer than 64"],
    ),
    "undecodable byte in cancel --by": (
        ["runs", "cancel", "{run_id}", "--by", "\udcff"],
        ["--by", "U+DCFF"],
    ),
}


@pytest.mark.parametrize("case", list(BAD_REQUESTS))
def test_a_bad_request_says_why_in_one_line_and_changes_nothing(
    cli: Cli, seeded: Seeded, case: str
) -> None:
    argv, expected = BAD_REQUESTS[case]
    fields = vars(seeded)
    before = cli.snapshot()
    result = cli(*(arg.format(**fields) for arg in argv), stdin=" \n")
    assert_refused(result, *(text.format(**fields) for text in expected))
    assert cli.snapshot() == before


def test_a_refused_decision_is_named_plainly(cli: Cli, seeded: Seeded) -> None:
    result = cli("reviews", "decide", seeded.pending, "answer", "yes", "--by", "x")
    assert "'answer' is not a valid decision" in result.err
    assert "expire" not in result.err


@pytest.mark.parametrize(
    ("config_text", "expected"),
    [
        (None, "configuration file not found"),
        ("[crews.writer\n", "invalid TOML"),
        ('[crews.writer]\nfactory = "tests.support.crews:writer"\nreviewer = []\n', "reviewers"),
    ],
)
@pytest.mark.parametrize(
    "argv",
    [["runs", "start", "writer", "topic=x"], ["crews", "list"], ["worker", "--until-idle"]],
)
def test_a_bad_configuration_is_reported(
    cli: Cli, config_file: Path, config_text: str | None, expected: str, argv: list[str]
) -> None:
    if config_text is None:
        config_file.unlink()
    else:
        config_file.write_text(config_text)
    before = cli.snapshot()
    assert_refused(cli(*argv), str(config_file), expected)
    assert cli.snapshot() == before


def test_a_bad_log_level_is_refused(cli: Cli) -> None:
    assert_refused(cli("runs", "list", environ={"LOG_LEVEL": "loud"}), "LOG_LEVEL", "'loud'")


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["runs"],
        ["runs", "list", "--limit", "0"],
        ["runs", "list", "--status", "sleeping"],
        ["reviews", "decide", "rev_x", "approve"],
        ["worker", "--lease", "-1"],
        ["worker", "--concurrency", "two"],
    ],
)
def test_usage_errors_exit_2(cli: Cli, argv: list[str]) -> None:
    result = cli(*argv)
    assert result.code == 2
    assert result.out == ""
    assert "error:" in result.err


@pytest.mark.parametrize("argv", [["runs", "list"], ["db", "upgrade"]])
def test_an_unreachable_database_is_named_without_its_password(cli: Cli, argv: list[str]) -> None:
    cli.db_url = "postgresql://app:s3cret@127.0.0.1:1/countersign"
    result = cli(*argv)
    assert result.code == 2
    assert result.err.startswith("error: cannot open the database postgresql://app:***@127.0.0.1")
    assert len(result.err.splitlines()) == 1
    assert "s3cret" not in result.err


# --- database and configuration -----------------------------------------------------------


@pytest.mark.empty_database
def test_db_upgrade_prints_the_revision(db_url: str, cli: Cli) -> None:
    first = cli.ok("db", "upgrade")
    store = Store.open(db_url, upgrade=False)
    head = current_revision(store.engine)
    store.close()
    assert head is not None
    assert first.out == head + "\n"
    assert "upgraded from empty" in first.err
    again = cli.ok("db", "upgrade")
    assert again.out == head + "\n"
    assert "already up to date" in again.err


def test_crews_list_shows_names_and_descriptions(cli: Cli) -> None:
    lines = cli.ok("crews", "list").out.splitlines()
    assert lines[0].split() == ["NAME", "KIND", "INPUTS", "DESCRIPTION"]
    assert [line.split()[0] for line in lines[1:]] == ["broken", "payments", "research", "writer"]
    assert lines[4].split() == [
        "writer",
        "crew",
        "topic",
        "Outline,",
        "then",
        "write",
        "an",
        "article",
    ]


def test_global_options_may_follow_the_command(
    db_url: str, config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["crews", "list", "--config", str(config_file), "--database-url", db_url], {})
    assert code == 0
    assert "writer" in capsys.readouterr().out


# --- the installed entry point ------------------------------------------------------------


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "COUNTERSIGN_CONFIG"}}
    env["PYTHONPATH"] = str(ROOT)
    env["DATABASE_URL"] = f"sqlite:///{tmp_path / 'cli.db'}"
    env.update(extra)
    return env


@pytest.mark.slow
def test_the_entry_points_start_a_run_and_list_it(tmp_path: Path, config_file: Path) -> None:
    env = _env(tmp_path, COUNTERSIGN_CONFIG=str(config_file))
    started = subprocess.run(
        [str(VENV_BIN / "countersign"), "runs", "start", "writer", "topic=otters"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    run_id = started.stdout.strip()
    listed = subprocess.run(
        [sys.executable, "-m", "bot", "runs", "list"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert run_id in listed.stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["runs", "list"], 0),
        (["runs", "start", "writer", "topic=otters"], 0),
        (["reviews", "list", "--all"], 0),
        (["reviews", "decide", "rev_nope", "approve", "--by", "x"], 2),
        (["runs", "cancel", "run_nope"], 2),
        (["crews", "list"], 0),
        (["db", "upgrade"], 0),
    ],
)
def test_only_the_worker_imports_crewai(
    tmp_path: Path, config_file: Path, argv: list[str], code: int
) -> None:
    """``import crewai`` costs seconds; an admin command must not pay it."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "bot", "--config", str(config_file), *argv],
        env=_env(tmp_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == code, done.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()}
    assert "bot.cli.main" in imported  # the import log was read, so the next line can fail
    assert not {name for name in imported if name.split(".")[0] == "crewai"}


@pytest.mark.slow
def test_the_worker_stops_gracefully_on_sigterm(tmp_path: Path, config_file: Path) -> None:
    argv = [sys.executable, "-m", "bot", "--config", str(config_file), "worker", "--poll", "0.1"]
    lines: list[str] = []
    started = threading.Event()
    with subprocess.Popen(
        argv, env=_env(tmp_path), cwd=tmp_path, stderr=subprocess.PIPE, text=True
    ) as worker:

        def read() -> None:
            assert worker.stderr is not None
            for line in worker.stderr:
                lines.append(line)
                if " started: " in line:
                    started.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            assert started.wait(120), "".join(lines)
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(30) == 0, "".join(lines)
        finally:
            if worker.poll() is None:
                worker.kill()
        reader.join(5)
    log = "".join(lines)
    assert "SIGTERM: stopping" in log, log
    assert " stopped after 0 execution(s)" in log, log


@pytest.mark.parametrize(
    "argv", [["serve", "--workers", "0", "--port"], ["worker", "--until-idle", "--metrics-port"]]
)
def test_a_port_in_use_is_named_in_one_line(cli: Cli, argv: list[str]) -> None:
    slack = {"SLACK_BOT_TOKEN": "xoxb-test", "SLACK_SIGNING_SECRET": "test-secret"}
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = cli(*argv, str(port), environ=slack)
    assert result.code == 2
    # serve has logged where it is serving before it tries to listen: the last line is the error
    assert result.err.splitlines()[-1] == (
        f"error: cannot listen on 127.0.0.1:{port}: Address already in use"
    )
