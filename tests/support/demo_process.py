"""The demo as a reader starts it: a process group printing the sandbox's URL, and its page API.

``DemoProcess`` starts a command (``make demo`` or ``countersign demo``) from the
repository's root in its own process group, waits for the URL line, and stops it as Ctrl+C
does (SIGINT to the whole group). ``SandboxClient`` acts on the page's JSON routes, the way
the page's script does.

The demo keeps its state between starts in ``--state-dir`` (``.countersign-demo/`` in the
working directory by default); a test's demo must keep it in the test's folder, never in the
repository: ``DemoProcess`` adds ``--state-dir <tmp>/demo-state`` to a ``countersign demo``
command that names none, and refuses a ``make demo`` whose ``ARGS`` name none.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[2]
URL_LINE = re.compile(r"Countersign demo: open (http://\S+) in your browser")

T = TypeVar("T")
Json = dict[str, Any]


class DemoProcess:
    """A running demo; ``url`` is the sandbox page, ``output`` everything it printed."""

    def __init__(
        self, command: list[str], tmp: Path, *, timeout: float = 120.0, cwd: Path = ROOT
    ) -> None:
        if not any("--state-dir" in part for part in command):
            if command[0] == "make":
                raise ValueError('give make demo ARGS="... --state-dir DIR", out of the repository')
            command = [*command, "--state-dir", str(tmp / "demo-state")]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        names = ("DATABASE_URL", "COUNTERSIGN_CONFIG", "COUNTERSIGN_LLM", "COUNTERSIGN_OUTBOX_FILE")
        for name in names:
            env.pop(name, None)  # the demo's own defaults, as a newcomer gets them
        self.process = subprocess.Popen(
            command,
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.lines: list[str] = []
        self._url = threading.Event()
        self.url = ""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if not self._url.wait(timeout):
            self.stop()
            raise AssertionError("the demo printed no URL:\n" + self.output)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)
            found = URL_LINE.search(line)
            if found and not self._url.is_set():
                self.url = found.group(1)
                self._url.set()

    def stop(self, timeout: float = 60.0) -> None:
        """Ctrl+C: SIGINT to the process group, then wait for every process in it to end."""
        pgid = self.process.pid
        try:
            os.killpg(pgid, signal.SIGINT)
            self.process.wait(timeout)
            deadline = time.monotonic() + timeout
            while _group_alive(pgid):
                assert time.monotonic() < deadline, "a process of the demo outlived it"
                time.sleep(0.1)
        finally:
            if _group_alive(pgid):
                os.killpg(pgid, signal.SIGKILL)
            self._reader.join(10)
            if self.process.stdout is not None:
                self.process.stdout.close()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


class SandboxClient:
    """The sandbox page's JSON routes, called as its script calls them."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")

    def state(self) -> Json:
        with urllib.request.urlopen(f"{self.url}/sandbox/state", timeout=10) as response:
            body: Json = json.load(response)
            return body

    def post(self, route: str, body: Json) -> Json:
        request = urllib.request.Request(
            f"{self.url}/sandbox/{route}",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            answer: Json = json.load(response)
        assert answer.get("ok"), answer
        return answer

    def wait(self, predicate: Callable[[Json], T | None], what: str, timeout: float = 90.0) -> T:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = predicate(self.state())
            if found:
                return found
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what}:\n{json.dumps(self.state())[:4000]}")


def run_thread(state: Json, crew: str) -> Json | None:
    """The latest root message of a run of ``crew`` (the bot's, not the welcome), with replies."""
    for message in reversed(state["messages"]):
        text = json.dumps([message.get("text"), message.get("blocks")])
        if message.get("user") == state["bot_user_id"] and "Welcome" not in text and crew in text:
            return message
    return None


def pending_button(thread: Json, action: str) -> Json | None:
    """The latest reply with a button ``countersign:<action>``, and that button."""
    for reply in reversed(thread["replies"]):
        for block in reply.get("blocks") or []:
            for element in block.get("elements") or []:
                if element.get("action_id") == f"countersign:{action}":
                    return {"ts": reply["ts"], "block_id": block["block_id"], **element}
    return None
