"""Worker processes for the tests, forked from one that has already imported CrewAI.

A ``countersign worker`` started with ``python -m bot`` spends about 3.5 s importing CrewAI
before it does anything, and the suite starts well over a hundred. The zygote imports
everything a worker needs once, then forks a child per request; the child sets the
environment, working directory and output it was given and runs the same ``bot.cli.main`` as
the command. The child is a real process of its own: it is SIGKILLed, SIGSTOPped and times
out as a spawned command would, and its exit status is reported as ``Popen`` reports it.

The zygote is single-threaded on purpose (forking a process with threads copies their locks in
whatever state they are): it waits for requests and for its children's exits in one loop, and
refuses to fork if anything it imported started a thread.

Protocol, one Unix-socket connection per child: the test sends one JSON line (``argv``,
``env``, ``cwd``, ``script`` if the child is to run that Python file instead of the command,
and ``log``, the file the child's output goes to, or no ``log`` and the
caller's stdin, stdout and stderr passed along with the line's first byte, which the child
takes as its own), the zygote answers ``{"pid": …}`` and, when the child exits,
``{"status": …}`` (negative: killed by that signal), then closes the connection.
``tests/bin/countersign`` is the command that way: a stand-in for the installed command
that the documentation's sessions run, forked warm instead of importing CrewAI each time.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import runpy
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _child(request: dict[str, Any], stdio: list[int]) -> None:
    """In the forked child: become the requested command, run it, exit with its status."""
    # Here, not at the top: ``tests/bin/countersign`` imports this module for its protocol, once
    # a command in the documentation's sessions, and needs none of the product (0.7 s of CPU).
    from bot.hosting.forkserver import exit_with

    def become() -> int:
        os.environ.clear()
        os.environ.update(request["env"])
        time.tzset()  # the C library read TZ when the zygote started
        # Python read PYTHONPATH when the zygote started too.
        for entry in reversed(request["env"].get("PYTHONPATH", "").split(os.pathsep)):
            if entry and entry not in sys.path:
                sys.path.insert(0, entry)
        os.chdir(request["cwd"])
        if stdio:
            for target, fd in enumerate(stdio):
                os.dup2(fd, target)
                os.close(fd)
            sys.stdin = open(0, closefd=False)  # noqa: SIM115 (the child's, for its life)
        else:
            out = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.dup2(out, 1)
            os.dup2(out, 2)
            os.close(out)
        if "script" in request:  # a benchmark's smoke run, as ``python SCRIPT ARGV``
            script = request["script"]
            sys.path.insert(0, os.path.dirname(script))
            sys.argv = [script, *request["argv"]]
            runpy.run_path(script, run_name="__main__")
            return 0  # a script that fails raises (SystemExit, at least)
        from bot.cli.main import main

        sys.argv = ["countersign", *request["argv"]]
        return main(request["argv"])

    exit_with(become)


def _read_request(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    """One request line, and the descriptors that came with its first byte, if any."""
    data, fds, _, _ = socket.recv_fds(conn, 65536, 3)
    while not data.endswith(b"\n"):
        more = conn.recv(65536)
        if not more:
            break
        data += more
    return json.loads(data), fds


def send_request(conn: socket.socket, request: dict[str, Any], stdio: list[int]) -> None:
    """Send a request line, with ``stdio`` (three descriptors) if not empty."""
    line = json.dumps(request).encode() + b"\n"
    if stdio:
        socket.send_fds(conn, [line[:1]], stdio)
        line = line[1:]
    conn.sendall(line)


def serve(path: str) -> None:
    """The zygote's loop: fork on request, report exits, stop when stdin closes.

    Besides the command, it imports what a worker imports only once it runs a crew: the worker
    itself, the test crews' modules (which each child would import again), the providers' SDKs
    the provider tests' crews load (1 to 3 s a child otherwise), and LanceDB's namespace client,
    whose pydantic schemas are most of the 1.5 s that a Flow's or a crew's memory spends
    importing LanceDB. LanceDB itself starts a thread when imported, so the children import the
    rest of it. LiteLLM is told to read its price list from its own package (with the network,
    it fetches it in a thread: the zygote could not fork)."""
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    import crewai.llms.providers.anthropic.completion
    import crewai.llms.providers.gemini.completion  # noqa: F401
    import lance_namespace_urllib3_client  # noqa: F401
    import litellm  # noqa: F401

    import bot.cli.main  # noqa: F401
    import crew_runtime.worker  # noqa: F401

    for crews in sorted((ROOT / "tests" / "support").glob("*crews.py")):  # the test crews
        importlib.import_module(f"tests.support.{crews.stem}")

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    print("ready", flush=True)
    waiting: dict[int, socket.socket] = {}  # child pid -> the connection that asked for it
    while True:
        readable, _, _ = select.select([listener, sys.stdin], [], [], 0.05)
        if sys.stdin in readable and not sys.stdin.readline():
            return  # the test session ended
        if listener in readable:
            conn, _ = listener.accept()
            request, stdio = _read_request(conn)
            if threading.active_count() != 1:
                conn.sendall(b'{"error": "the zygote has threads: it cannot fork safely"}\n')
                conn.close()
                continue
            pid = os.fork()
            if pid == 0:
                listener.close()
                conn.close()
                _child(request, stdio)
            for fd in stdio:
                os.close(fd)
            conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
            waiting[pid] = conn
        while waiting:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            conn = waiting.pop(pid)
            code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
            with contextlib.suppress(OSError):
                conn.sendall(json.dumps({"status": code}).encode() + b"\n")
            conn.close()


class Forked:
    """A child of the zygote, with the part of ``subprocess.Popen`` the tests use."""

    def __init__(self, conn: socket.socket, pid: int, log: Path) -> None:
        self._conn = conn
        self._reader = conn.makefile()
        self.pid = pid
        self.log = log
        self.returncode: int | None = None
        self.args = ["countersign", "(forked)"]

    @property
    def stdout(self) -> str:
        """What the child printed so far (for error messages)."""
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self._conn], [], [], 0)[0]:
            self._read_status()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not select.select([self._conn], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            self._read_status()
        assert self.returncode is not None
        return self.returncode

    def communicate(self, timeout: float | None = None) -> tuple[str, None]:
        self.wait(timeout)
        return self.stdout, None

    def send_signal(self, signum: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(9)

    def terminate(self) -> None:
        self.send_signal(15)

    def _read_status(self) -> None:
        line = self._reader.readline()
        self.returncode = int(json.loads(line)["status"]) if line else -9
        self._reader.close()
        self._conn.close()


class Zygote:
    """The zygote process of this test session, started on first use."""

    _lock = threading.Lock()
    _proc: subprocess.Popen[str] | None = None
    _path: str | None = None

    @classmethod
    def fork(
        cls, argv: list[str], env: dict[str, str], cwd: Path, log: Path, script: Path | None = None
    ) -> Forked:
        """``countersign ARGV`` forked, its output in ``log``; with ``script``, ``python SCRIPT
        ARGV`` instead (a benchmark's smoke run, the script's folder first on its path)."""
        path = cls.started()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(path)
        request = {"argv": argv, "env": env, "cwd": str(cwd), "log": str(log)}
        if script is not None:
            request["script"] = str(script)
        send_request(conn, request, [])
        reader = conn.makefile()
        answer = json.loads(reader.readline())
        reader.close()
        if "pid" not in answer:
            conn.close()
            raise RuntimeError(f"the zygote could not fork: {answer}")
        return Forked(conn, int(answer["pid"]), log)

    @classmethod
    def started(cls) -> str:
        """The zygote's socket, started now if it was not (``tests/bin/countersign`` finds it
        in ``COUNTERSIGN_TEST_ZYGOTE``)."""
        with cls._lock:
            if cls._proc is None or cls._proc.poll() is not None:
                cls._path = os.path.join(tempfile.mkdtemp(prefix="zygote-"), "socket")
                env = dict(os.environ, PYTHONPATH=str(ROOT))
                cls._proc = subprocess.Popen(
                    [sys.executable, "-m", "tests.support.zygote", cls._path],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    cwd=ROOT,
                    env=env,
                    text=True,
                )
                assert cls._proc.stdout is not None
                ready = cls._proc.stdout.readline()
                if ready.strip() != "ready":
                    raise RuntimeError(f"the zygote did not start: {ready!r}")
            assert cls._path is not None
            return cls._path

    @classmethod
    def stop(cls) -> None:
        with cls._lock:
            if cls._proc is not None:
                assert cls._proc.stdin is not None and cls._proc.stdout is not None
                cls._proc.stdin.close()
                try:
                    cls._proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    cls._proc.kill()
                    cls._proc.wait()
                cls._proc.stdout.close()
                cls._proc = None


if __name__ == "__main__":
    serve(sys.argv[1])
