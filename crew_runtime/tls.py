"""One TLS context for every default HTTPS client a worker's crews build, instead of one each.

Every ``LLM(model="openai/…")`` builds two ``openai`` clients (sync and async), and each one's
``httpx`` transport calls ``httpx._config.create_ssl_context``, which loads certifi's CA bundle
into a fresh ``ssl.SSLContext``: 15 to 30 ms of CPU each, six per execution of a three-agent crew,
and a crew is built again at every execution (a resume too). At 200 executions at once that
was a third of the worker's CPU (``bench/concurrency.py``). A context with the default
settings (verify against the default CAs, no client certificate) is shareable: the ``ssl``
module's contexts are thread-safe, and ``httpx`` shares one across a client's connections
already. :func:`install` memoises those (keyed by the environment variables that choose the
CAs); any other setting still gets a context of its own.

The one thing ``httpcore`` changes on a context is its ALPN list, per connection
(``["http/1.1"]``, or with ``"h2"`` for a client built with ``http2=True``); on the shared one
it stays ``["http/1.1"]``, so such a client negotiates HTTP/1.1, which ``httpcore`` speaks
when the server does not choose HTTP/2.
"""

from __future__ import annotations

import logging
import os
import ssl
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

_lock = threading.Lock()
_shared: dict[tuple[str | None, str | None], ssl.SSLContext] = {}


class _SharedContext(ssl.SSLContext):
    """A default client context whose ALPN list a connection cannot change."""

    def set_alpn_protocols(self, alpn_protocols: Any) -> None:
        """Kept at HTTP/1.1 (set once, at creation): see the module's docstring."""


def _shared_context(trust_env: bool) -> ssl.SSLContext:
    key = (
        os.environ.get("SSL_CERT_FILE") if trust_env else None,
        os.environ.get("SSL_CERT_DIR") if trust_env else None,
    )
    with _lock:
        found = _shared.get(key)
        if found is None:
            import certifi

            # What ssl.create_default_context(cafile=…) makes, as httpx asks for it.
            found = _SharedContext(ssl.PROTOCOL_TLS_CLIENT)
            cafile, capath = key
            if cafile:
                found.load_verify_locations(cafile=cafile)
            elif capath:
                found.load_verify_locations(capath=capath)
            else:
                found.load_verify_locations(cafile=certifi.where())
            ssl.SSLContext.set_alpn_protocols(found, ["http/1.1"])
            _shared[key] = found
        return found


def install() -> bool:
    """Share the default context from now on, in this process; False if this ``httpx`` has
    no ``create_ssl_context`` where 0.28 has it (nothing is changed then)."""
    try:
        import httpx._config as config
        import httpx._transports.default as transports
    except ImportError:
        return False
    original = getattr(config, "create_ssl_context", None)
    if original is None or getattr(original, "countersign_shared", False):
        return original is not None

    def create_ssl_context(
        verify: Any = True, cert: Any = None, trust_env: bool = True
    ) -> ssl.SSLContext:
        if verify is True and not cert:
            return _shared_context(trust_env)
        result: ssl.SSLContext = original(verify=verify, cert=cert, trust_env=trust_env)
        return result

    shared: Callable[..., ssl.SSLContext] = create_ssl_context
    shared.countersign_shared = True  # type: ignore[attr-defined]
    config.create_ssl_context = shared
    if getattr(transports, "create_ssl_context", None) is original:
        setattr(transports, "create_ssl_context", shared)  # noqa: B010 (a private name)
    return True
