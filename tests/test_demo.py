"""README's demo command, run as a reader runs it: a URL appears, a run completes, Ctrl+C stops it.

The run is driven over HTTP through the sandbox page's own routes (the browser test drives the
same page through Chromium): `/crew run writer`, *Request changes* through the modal, then
*Approve* on the outline and on the article, and the result in the thread.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from bot.cli import main
from tests.demo_process import DemoProcess, SandboxClient, pending_button, run_thread

FEEDBACK = "Add a section on otter tools"


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
    demo = DemoProcess(["make", "demo", "ARGS=--port 0"], tmp_path)
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


def test_a_port_in_use_is_named_with_the_way_out(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["demo", "--port", str(port)], environ={}) == 2
    err = capsys.readouterr().err
    assert "address already in use" in err and "--port" in err
