"""A webhook receiver a test controls, on an event loop of its own (a thread): it checks each
delivery's signature with docs/guide/webhooks.md's own ``verify`` and counts deliveries by
event id, and fails the first attempts of each event as its script says (an HTTP status, or
``"hang"``: no answer until the sender's timeout). Before :meth:`Receiver.listen` its port refuses
connections, as a receiver that is down does.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
from aiohttp import web

from bot.webhooks.sender import Backoff, WebhookSender
from crew_runtime.config import Config
from crew_runtime.webhooks import webhook_secrets
from storage import Store
from tests.support import docs

PAGE = "docs/guide/webhooks.md"
HANG = "hang"


def readme_verify() -> Callable[[bytes, str, bytes], bool]:
    """The ``verify`` of the guide's Webhooks page, as a receiver would copy it."""
    code = docs.blocks(docs.text(PAGE), "python")
    assert len(code) == 1, f"{PAGE} has no Python snippet, or several"
    scope: dict[str, Any] = {}
    exec(compile(code[0], PAGE, "exec"), scope)
    return scope["verify"]  # type: ignore[no-any-return]


class Receiver:
    """Receives webhooks on ``url``; ``script`` is what the first attempts at each event get
    (``[500, HANG]``: a 500, then no answer), later ones a 200; a 429 or a 503 says
    ``Retry-After: {retry_after}``. ``path`` is the URL's (``/hook?token=abc``)."""

    def __init__(
        self,
        secret: bytes,
        script: Sequence[int | str] = (),
        *,
        retry_after: str = "0",
        path: str = "/hook?token=abc",
    ) -> None:
        self.secret = secret
        self.retry_after = retry_after
        self.script = list(script)
        self.verify = readme_verify()
        self.attempts: Counter[str] = Counter()  # by event id, whatever was answered
        self.delivered: dict[str, list[dict[str, Any]]] = defaultdict(list)  # 2xx answered
        self.bodies: dict[str, set[bytes]] = defaultdict(set)
        self.forged = 0
        self.headers: list[dict[str, str]] = []
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))  # bound, not listening: connections refused
        self.port = self._socket.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}{path}"
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._release: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None

    def listen(self) -> None:
        """Start answering on the port (until now it refused connections)."""
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=30)

    def release(self) -> None:
        """Let the requests left hanging answer (a 200)."""
        if self._release is not None:
            self._loop.call_soon_threadsafe(self._release.set)

    def close(self) -> None:
        if self._thread.is_alive():
            self.release()
            if self._runner is not None:
                asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(30)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=30)
        self._loop.close()
        self._socket.close()

    def ids(self) -> set[str]:
        with self._lock:
            return set(self.delivered)

    def count(self, event_id: str) -> int:
        with self._lock:
            return self.attempts[event_id]

    async def _start(self) -> None:
        self._release = asyncio.Event()
        app = web.Application()
        app.router.add_post("/hook", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.SockSite(self._runner, self._socket).start()

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        if not self.verify(self.secret, request.headers.get("Countersign-Signature", ""), body):
            with self._lock:
                self.forged += 1
            return web.Response(status=401)
        event = json.loads(body)
        event_id = request.headers["Countersign-Delivery"]
        assert event_id == event["id"] and request.headers["Countersign-Event"] == event["type"]
        with self._lock:
            self.attempts[event_id] += 1
            n = self.attempts[event_id]
            self.bodies[event_id].add(body)
            self.headers.append(dict(request.headers))
        what = self.script[n - 1] if n <= len(self.script) else 200
        if what == HANG:
            assert self._release is not None
            await self._release.wait()
            what = 200
        assert isinstance(what, int)
        if 200 <= what < 300:
            with self._lock:
                self.delivered[event_id].append(event)
        headers = {"Retry-After": self.retry_after} if what in (429, 503) else {}
        return web.Response(status=what, headers=headers)


@contextmanager
def receiving(
    secret: bytes, script: Sequence[int | str] = (), *, listen: bool = True, **options: str
) -> Iterator[Receiver]:
    receiver = Receiver(secret, script, **options)
    if listen:
        receiver.listen()
    try:
        yield receiver
    finally:
        receiver.close()


SECRET = b"whsec-test-0123456789"


class SenderThread:
    """A :class:`WebhookSender` running on an event loop of its own, as in ``serve``."""

    def __init__(self, store: Store, config: Config, **options: Any) -> None:
        options.setdefault("backoff", FAST_BACKOFF)
        options.setdefault("timeout", timedelta(seconds=2))
        secrets = webhook_secrets(config, {"HOOK_SECRET": SECRET.decode()})
        self.sender = WebhookSender(store, config, secrets, **options)
        self._loop = asyncio.new_event_loop()
        self._stop = asyncio.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        main = self._loop.create_task(self.sender.run(self._stop, interval=0.05))
        with contextlib.suppress(asyncio.CancelledError):  # killed by die()
            self._loop.run_until_complete(main)
        for task in asyncio.all_tasks(self._loop):
            with contextlib.suppress(asyncio.CancelledError):
                self._loop.run_until_complete(task)
        self._loop.close()

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        self._join()

    def die(self) -> None:
        """End as a killed process does: every request cut short, nothing settled, its
        claims left to run out."""

        def kill() -> None:
            for task in asyncio.all_tasks(self._loop):
                task.cancel()

        self._loop.call_soon_threadsafe(kill)
        self._join()

    def _join(self) -> None:
        self._thread.join(timeout=60)
        assert not self._thread.is_alive()


@pytest.fixture
def sending() -> Iterator[list[SenderThread]]:
    """Senders a test starts, stopped at its end."""
    started: list[SenderThread] = []
    yield started
    for sender in started:
        sender.stop()


def start(sending: list[SenderThread], store: Store, config: Config, **options: Any) -> None:
    sending.append(SenderThread(store, config, **options))


FAST_BACKOFF = Backoff(first=timedelta(milliseconds=20), most=timedelta(milliseconds=200))
