"""crew_runtime.tls: the default HTTPS clients of a worker's crews share one TLS context."""

from __future__ import annotations

import ssl

import httpx
from crewai import LLM

from crew_runtime import tls


def _context(client: httpx.Client | httpx.AsyncClient) -> ssl.SSLContext:
    context = client._transport._pool._ssl_context  # type: ignore[attr-defined]
    assert isinstance(context, ssl.SSLContext)
    return context


def test_default_clients_share_one_context_and_others_keep_their_own() -> None:
    assert tls.install()
    assert tls.install()  # twice is once
    first, second = httpx.Client(), httpx.AsyncClient()
    shared = _context(first)
    assert _context(second) is shared
    assert shared.verify_mode == ssl.CERT_REQUIRED and shared.check_hostname
    assert shared.cert_store_stats()["x509_ca"] > 50  # certifi's bundle, loaded once
    assert _context(httpx.Client(verify=False)) is not shared
    # httpcore sets the ALPN list per connection; a client asking for h2 cannot change it
    shared.set_alpn_protocols(["http/1.1", "h2"])
    assert _context(httpx.Client(http2=False)) is shared


def test_an_openai_provider_model_builds_its_clients_on_the_shared_context() -> None:
    tls.install()
    llm = LLM(model="openai/gpt-4o-mini", api_key="sk-test")
    sync_client = llm._client._client  # type: ignore[attr-defined]
    assert _context(sync_client) is _context(httpx.Client())
