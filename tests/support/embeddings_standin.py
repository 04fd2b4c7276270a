"""A local stand-in for OpenAI's embeddings API (``POST /v1/embeddings``) that records requests.

CrewAI's ``{"provider": "openai", "config": {"api_base": ...}}`` embedder is chromadb's
``OpenAIEmbeddingFunction``, which calls ``POST {api_base}/embeddings`` through the ``openai``
SDK, with the key in ``$CHROMA_OPENAI_API_KEY`` (:data:`KEY_ENV`; a key in the config makes
chromadb warn). Pointing it here takes that real path offline: each request is kept
(:meth:`EmbeddingsStandIn.requests`, the texts it asked for), so a test counts embedding
calls, or proves there were none.

Vectors are deterministic and mean something: each word of a text is hashed into one of
:data:`DIMENSIONS` buckets and the counts normalised, so texts sharing words are near each
other and a knowledge search for "otters" finds the chunk about otters. Any other path is
answered 404 and kept in :attr:`EmbeddingsStandIn.problems`.

The server is a ``ThreadingHTTPServer`` in a daemon thread on port 0; worker processes reach
it over TCP, the test reads what it recorded at any time.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

DIMENSIONS = 32
KEY_ENV = "CHROMA_OPENAI_API_KEY"
_WORD = re.compile(r"[a-z0-9]+")


def vector(text: str) -> list[float]:
    """The stand-in's embedding of ``text`` (a bag of hashed words, unit length)."""
    counts = [0.0] * DIMENSIONS
    for word in _WORD.findall(text.lower()):
        counts[int(hashlib.sha256(word.encode()).hexdigest(), 16) % DIMENSIONS] += 1.0
    norm = math.sqrt(sum(c * c for c in counts)) or 1.0
    return [c / norm for c in counts] if any(counts) else [1.0] + [0.0] * (DIMENSIONS - 1)


class EmbeddingsStandIn:
    """``with EmbeddingsStandIn() as api:`` serves ``api.base_url`` until the block ends."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: list[list[str]] = []
        self.problems: list[str] = []
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path.rstrip("/") != "/v1/embeddings":
                    standin._problem(f"POST {self.path}: not an endpoint the stand-in serves")
                    self._send(404, {"error": {"message": "not found"}})
                    return
                request = json.loads(body)
                texts = request["input"]
                texts = [texts] if isinstance(texts, str) else list(texts)
                with standin._lock:
                    standin._requests.append(texts)
                data = [
                    {"object": "embedding", "index": i, "embedding": vector(t)}
                    for i, t in enumerate(texts)
                ]
                usage = {"prompt_tokens": len(texts), "total_tokens": len(texts)}
                model = request.get("model", "")
                self._send(200, {"object": "list", "data": data, "model": model, "usage": usage})

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                blob = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(blob)))
                self.end_headers()
                self.wfile.write(blob)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def _problem(self, text: str) -> None:
        with self._lock:
            self.problems.append(text)

    def __enter__(self) -> EmbeddingsStandIn:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def requests(self) -> list[list[str]]:
        """The texts of each embeddings request, in the order they arrived."""
        with self._lock:
            return [list(texts) for texts in self._requests]

    def clear(self) -> None:
        """Forget the requests recorded so far."""
        with self._lock:
            self._requests.clear()
