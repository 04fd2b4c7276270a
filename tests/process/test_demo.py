"""README's demo command, run as a reader runs it: a URL appears, a run completes, Ctrl+C stops it.

The run is driven over HTTP through the sandbox page's own routes (the browser test drives the
same page through Chromium): `/crew run writer`, *Request changes* through the modal, then
*Approve* on the outline and on the article, and the result in the thread. Then the promise
the demo shows: stopped while a review waits, started again, the review's buttons are there
and the run carries on.

Each demo keeps its state in the test's folder (``--state-dir``), never in the repository.
"""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import pytest

from bot.cli.main import main
from bot.slack import home_text
from tests.support.demo_process import DemoProcess, SandboxClient, pending_button, run_thread

FEEDBACK = "Add a section on otter tools"
DEMO = [sys.executable, "-m", "bot", "demo", "--port", "0"]


def review_writer_run(page: SandboxClient) -> str:
    """Run the writer crew to the end through the page; returns the thread's text."""
    page.post("send", {"text": "/crew run writer topic=otters"})
    changes = page.wait(
        lambda s: (t := run_thread(s, "writer")) and pending_button(t, "changes"), "the outline"
    )
    page.post("click", changes)
    # The modal opens at once ("Loading…") and is filled in by views.update.
    view = page.wait(
        lambda s: s["views"] and "submit" in s["views"][-1] and s["views"][-1], "the modal's form"
    )
    page.post("submit", {"view_id": view["id"], "values": {"text": FEEDBACK}})

    def revised(state: dict) -> dict | None:
        thread = run_thread(state, "writer")
        button = thread and pending_button(thread, "approve")
        text = json.dumps(thread["replies"][-1]) if thread and thread["replies"] else ""
        return button if button and FEEDBACK in text else None

    page.post("click", page.wait(revised, "the outline, revised with the feedback"))
    return approve_the_article(page)


def approve_the_article(page: SandboxClient) -> str:
    """Approve the writer's article once it is there; returns the thread's text when done."""
    article = page.wait(
        lambda s: (
            (t := run_thread(s, "writer"))
            and (b := pending_button(t, "approve"))
            and "Article" in json.dumps(t["replies"][-1])
            and b
        ),
        "the article",
    )
    page.post("click", article)
    done = page.wait(
        lambda s: (t := run_thread(s, "writer")) and "Succeeded" in json.dumps(t) and t,
        "the run to succeed",
    )
    return json.dumps(done)


@pytest.mark.slow
def test_make_demo_serves_the_sandbox_and_stops_cleanly(tmp_path: Path) -> None:
    state_dir = tmp_path / "demo-state"
    demo = DemoProcess(["make", "demo", f"ARGS=--port 0 --state-dir {state_dir}"], tmp_path)
    try:
        page = SandboxClient(demo.url)
        assert "Welcome" in json.dumps(page.state()["messages"][0])
        thread = review_writer_run(page)
        assert "offline scripted model" in thread
        assert "finished" in thread and "otters" in thread
    finally:
        demo.stop()
    assert "Traceback" not in demo.output, demo.output
    assert "demo stopped" in demo.output, demo.output


@pytest.mark.slow
def test_what_the_demo_sends_is_kept_in_its_state_directory(tmp_path: Path) -> None:
    demo = DemoProcess(DEMO, tmp_path)
    try:
        page = SandboxClient(demo.url)
        page.post("send", {"text": "/crew run outreach to=ada@example.com topic=otters"})
        call = page.wait(
            lambda s: (t := run_thread(s, "outreach")) and pending_button(t, "approve"),
            "the send_email call to approve",
        )
        page.post("click", call)
        page.wait(
            lambda s: (t := run_thread(s, "outreach")) and "Succeeded" in json.dumps(t) and t,
            "the run to succeed",
        )
    finally:
        demo.stop()
    sent = (tmp_path / "demo-state" / "sent-emails.jsonl").read_text().splitlines()
    assert [json.loads(line)["to"] for line in sent] == ["ada@example.com"]


@pytest.mark.slow
def test_the_home_tab_shows_what_waits_for_you(tmp_path: Path) -> None:
    """The tour's Home tab: empty at first, then the outline waiting, with its thread's link."""
    demo = DemoProcess(DEMO, tmp_path)
    try:
        page = SandboxClient(demo.url)
        page.post("home", {})
        page.wait(
            lambda s: s["home"] and home_text.HOME_NOTHING_PENDING in json.dumps(s["home"]), "Home"
        )
        page.post("send", {"text": "/crew run writer topic=otters"})
        page.wait(
            lambda s: s["home"] and home_text.home_pending_count(1) in json.dumps(s["home"]),
            "the outline on the Home tab",
        )
    finally:
        demo.stop()
    assert "Traceback" not in demo.output, demo.output


def outline_approval(state: dict) -> dict | None:
    return (t := run_thread(state, "writer")) and pending_button(t, "approve")


@pytest.mark.slow
def test_a_review_waiting_when_the_demo_stops_is_there_when_it_starts_again(
    tmp_path: Path,
) -> None:
    demo = DemoProcess(DEMO, tmp_path)
    try:
        page = SandboxClient(demo.url)
        page.post("send", {"text": "/crew run writer topic=otters"})
        before = page.wait(outline_approval, "the outline's review")
        thread = run_thread(page.state(), "writer")
        assert thread is not None
    finally:
        demo.stop()
    assert "Traceback" not in demo.output, demo.output

    demo = DemoProcess(DEMO, tmp_path)  # the same state directory
    try:
        page = SandboxClient(demo.url)
        state = page.state()
        assert "continuing from" in demo.output, demo.output
        texts = [json.dumps(m) for m in state["messages"]]
        assert sum("Welcome" in t for t in texts) == 1 and "Demo restarted" in texts[-1]
        restored = run_thread(state, "writer")
        assert restored is not None and restored["ts"] == thread["ts"]
        replies = [r["ts"] for r in thread["replies"]]
        assert [r["ts"] for r in restored["replies"]][: len(replies)] == replies
        assert outline_approval(state) == before  # the same message, with its buttons
        page.post("click", before)
        done = approve_the_article(page)  # the run resumed and wrote it
        assert "finished" in done and "otters" in done
    finally:
        demo.stop()
    assert "Traceback" not in demo.output, demo.output


def test_the_demo_outside_the_repository_says_where_to_run_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["demo"], environ={}) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no examples/countersign.toml here: run the demo from")


def test_a_bad_port_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--port", "70000"], environ={}) == 2
    assert "expected a port number from 0 to 65535" in capsys.readouterr().err


def demo_with_its_port_taken(*args: str) -> int:
    """``countersign demo`` up to serving the page, where it stops: the port is in use. Its
    workers would be in this process (``--workers-in-process``: it forks no fork server, and
    the test starts no process)."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        argv = ["demo", "--port", str(port), "--workers-in-process", *args]
        return main(argv, environ={})


def test_a_port_in_use_is_named_with_the_way_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert demo_with_its_port_taken("--state-dir", str(tmp_path)) == 2
    err = capsys.readouterr().err
    assert "address already in use" in err and "--port" in err


@pytest.mark.parametrize("fresh", [False, True], ids=["unreadable", "fresh"])
def test_the_sandbox_and_the_database_start_over_together(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fresh: bool
) -> None:
    """An unreadable sandbox.json (or --fresh) takes demo.db with it: its runs' threads are gone."""
    (tmp_path / "sandbox.json").write_text("{not json")
    (tmp_path / "demo.db").write_text("not a database either")
    (tmp_path / "sent-emails.jsonl").write_text('{"to": "ada@example.com"}\n')

    assert demo_with_its_port_taken("--state-dir", str(tmp_path), *["--fresh"] * fresh) == 2

    err = capsys.readouterr().err
    assert "address already in use" in err, err  # so the database opened: a new one
    assert (tmp_path / "sandbox.json.broken").exists() != fresh
    assert ("starting over" in err) != fresh
    assert (tmp_path / "sent-emails.jsonl").exists() != fresh  # what it "sent" goes too
