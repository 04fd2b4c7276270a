"""serve's fork server: its worker children forked from a process that imported them once.

``import crewai`` costs seconds of CPU, and a fresh interpreter pays them for every worker
child serve starts, again after each crash. ``countersign serve`` forks this server at its
very start, while it is still one thread (forking a process with threads copies their locks
in whatever state they are): the server imports what a worker runs (``prepare``), then forks
a child per request, which runs the worker's command line (``run``) and exits with its status.

Who dies with whom, without a process of its own to watch: the server sets its death signal
(``PR_SET_PDEATHSIG``, SIGTERM) right after the fork, tied to serve's main thread, the one that
forked it and lives as long as serve; its children set theirs (``--parent-pid``, the server's
pid) tied to the server's only thread. SIGKILL serve and the server gets SIGTERM, whose default
action ends it, and its child gets SIGTERM in turn: the worker's graceful stop. Either death
before its signal was set shows in ``getppid()`` (``bot.hosting.parent``). Ctrl+C reaches the
whole process group: the server ignores SIGINT, serve stops the child with SIGTERM.

Protocol, on a socket pair, one child at a time (the pool runs one): serve sends a JSON line
``{"argv": …, "env": …}`` with its two pipes' ends passed along with the first byte; the
server answers ``{"pid": …}`` (the pipes' numbers in the child go after ``--wake-fd`` and
``--settled-fd``) or ``{"error": …}``, then ``{"status": …}`` when the child exits (negative:
killed by that signal). Serve signals the child itself. Serve closing its end ends the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn

from bot.errors import BotError
from bot.hosting.parent import die_with_parent


class ForkServerGone(BotError):
    """The fork server refused, or is no longer there: start the child another way."""


class ForkServer:
    """serve's end of the fork server."""

    def __init__(self, pid: int, channel: socket.socket) -> None:
        self.pid = pid
        self._channel = channel
        self._buffer = b""

    @classmethod
    def fork(
        cls, prepare: Callable[[], None], run: Callable[[Sequence[str]], int]
    ) -> ForkServer | None:
        """Fork the server now; None if this process has threads already (or cannot fork).

        Args:
            prepare: What the server imports once, before its first child.
            run: The command line a child runs (its arguments), returning its exit status.
        """
        if not hasattr(os, "fork") or threading.active_count() != 1:
            return None
        ours, theirs = socket.socketpair()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # pragma: no branch (the server never returns)
            ours.close()
            _serve(parent, theirs, prepare, run)
        theirs.close()
        ours.setblocking(False)
        return cls(pid, ours)

    async def start(self, argv: Sequence[str], env: Mapping[str, str], fds: Sequence[int]) -> Child:
        """A child running ``argv`` with ``env``, given ``fds`` (the wake and settled pipes)."""
        line = json.dumps({"argv": list(argv), "env": dict(env)}).encode() + b"\n"
        try:
            socket.send_fds(self._channel, [line[:1]], list(fds))
            await asyncio.get_running_loop().sock_sendall(self._channel, line[1:])
            answer = await self.read()
        except OSError as exc:
            raise ForkServerGone(str(exc)) from exc
        if "pid" not in answer:
            raise ForkServerGone(str(answer.get("error", answer)))
        return Child(self, int(answer["pid"]))

    async def read(self) -> dict[str, Any]:
        """The server's next answer; ForkServerGone if it closed its end."""
        loop = asyncio.get_running_loop()
        while b"\n" not in self._buffer:
            data = await loop.sock_recv(self._channel, 4096)
            if not data:
                raise ForkServerGone("the fork server exited")
            self._buffer += data
        line, self._buffer = self._buffer.split(b"\n", 1)
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        """Close serve's end, which ends the server, and reap it."""
        self._channel.close()
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)


class Child:
    """A child of the fork server, with the part of ``asyncio.subprocess.Process`` the pool
    uses. Its pid is not reused while ``returncode`` is None: the server reaps it only
    once it exited, and says so only then."""

    def __init__(self, server: ForkServer, pid: int) -> None:
        self._server = server
        self.pid = pid
        self.returncode: int | None = None

    async def wait(self) -> int:
        if self.returncode is None:
            try:
                self.returncode = int((await self._server.read())["status"])
            except ForkServerGone:
                # Its parent is gone, and so the child, by its death signal (or going).
                self.returncode = -signal.SIGTERM
        return self.returncode

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def _signal(self, signum: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)


def _serve(
    parent: int,
    channel: socket.socket,
    prepare: Callable[[], None],
    run: Callable[[Sequence[str]], int],
) -> None:
    """In the forked server: prepare, then one child per request, until serve closes its end."""
    code = 0
    try:
        die_with_parent(parent)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        prepare()
        while True:
            data, fds, _, _ = socket.recv_fds(channel, 65536, 2)
            if not data:
                break  # serve closed its end: it is stopping
            while not data.endswith(b"\n"):
                data += channel.recv(65536)
            request = json.loads(data)
            if threading.active_count() != 1:  # something prepare imported started one
                channel.sendall(b'{"error": "the fork server has threads"}\n')
                for fd in fds:
                    os.close(fd)
                continue
            pid = os.fork()
            if pid == 0:
                channel.close()
                _child(request, fds, run)
            for fd in fds:
                os.close(fd)
            channel.sendall(json.dumps({"pid": pid}).encode() + b"\n")
            _, status = os.waitpid(pid, 0)
            exited = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
            channel.sendall(json.dumps({"status": exited}).encode() + b"\n")
    except SystemExit as exc:  # die_with_parent: serve is gone already
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        os._exit(code)


def _child(request: dict[str, Any], fds: list[int], run: Callable[[Sequence[str]], int]) -> None:
    """In a forked child: take the requested environment and pipes, run, exit with the status."""

    def become() -> int:
        os.environ.clear()
        os.environ.update(request["env"])
        time.tzset()  # the C library read TZ when serve started
        wake, settled = fds
        argv = [*request["argv"], "--wake-fd", str(wake), "--settled-fd", str(settled)]
        sys.argv = ["countersign", *argv]
        return run(argv)

    exit_with(become)


def exit_with(body: Callable[[], int]) -> NoReturn:
    """End a forked child with the status ``body`` returns (or its ``SystemExit``'s; 1 and the
    traceback printed if it raised), its output flushed, and nothing else of the parent run."""
    code = 1
    try:
        code = body()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)
