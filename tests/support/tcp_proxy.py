"""A TCP proxy a test controls: the way to make a database unreachable for one process only.

Point a process at the proxy (``url_through``) instead of the server; ``cut()`` closes
every connection in flight and refuses new ones, as a network partition or a server
restart does to a client; ``restore()`` lets connections through again. Other processes,
connected to the server directly, go on working, which is what an unlucky deployment
meets: one worker cut off from the database while its peers are not.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from urllib.parse import urlsplit, urlunsplit


class TcpProxy:
    """Forwards ``127.0.0.1:<port>`` to ``target``, on an event loop of its own (a thread).

    Use as a context manager; ``port`` is chosen by the system.
    """

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self.connections = 0  # accepted while open, for tests that check the proxy was used
        self.refused = 0  # connections turned away while cut or refusing new ones
        self._open = True
        self._accepting = True
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="tcp-proxy")
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    def __enter__(self) -> TcpProxy:
        self._thread.start()
        self._call(self._start())
        return self

    def __exit__(self, *exc: object) -> None:
        self._call(self._stop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def url_through(self, url: str) -> str:
        """``url`` (a database URL naming the target) with the proxy as its host and port."""
        parts = urlsplit(url)
        user, at, _ = parts.netloc.rpartition("@")
        return urlunsplit(parts._replace(netloc=f"{user}{at}127.0.0.1:{self.port}"))

    def cut(self) -> None:
        """Close every proxied connection now and refuse new ones until ``restore()``."""
        self._call(self._cut())

    def refuse_new(self) -> None:
        """Turn new connections away; those in flight go on (a server at its connection limit)."""
        self._accepting = False

    def restore(self) -> None:
        self._open = True
        self._accepting = True

    # -- the loop's side

    def _call(self, coro: object) -> None:
        asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)  # type: ignore[arg-type]

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _stop(self) -> None:
        await self._cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        # The connections' own tasks end with their sockets; let none outlive the loop.
        pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    async def _cut(self) -> None:
        self._open = False
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not (self._open and self._accepting):
            self.refused += 1
            writer.transport.abort()
            return
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        self.connections += 1
        self._writers.update((writer, upstream_writer))
        await asyncio.gather(
            self._pipe(reader, upstream_writer),
            self._pipe(upstream_reader, writer),
        )

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while self._open and (data := await reader.read(65536)):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            self._writers.discard(writer)
            with contextlib.suppress(Exception):
                writer.transport.abort()
