"""The HTTP API against what a token holder (or anyone) can send: nothing secret in a log,
a 4xx problem body and one log line for input that used to be a 500, an ``Idempotency-Key``
reused with another body refused, and every outside field logged escaped. On SQLite and
PostgreSQL, against the real server.
"""

from __future__ import annotations

import logging
import socket

import pytest

from tests.test_api import Bench, bench

__all__ = ["bench"]  # the fixture, used by name


def raw_request(base: str, request: bytes) -> bytes:
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as conn:
        conn.sendall(request)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    return answer


@pytest.mark.parametrize(
    "stray", [b"\r", b"\x01", b"\x00", b"\x7f"], ids=["cr", "soh", "nul", "del"]
)
def test_a_token_with_a_stray_byte_is_refused_and_never_logged(
    bench: Bench, caplog: pytest.LogCaptureFixture, stray: bytes
) -> None:
    caplog.set_level(logging.DEBUG)
    token = bench.tokens["all"]
    request = (
        b"GET /api/v1/reviews HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Authorization: Bearer " + token.encode() + stray + b"\r\n\r\n"
    )
    answer = raw_request(bench.api.base, request)
    assert answer.startswith(b"HTTP/1.") and b" 400 " in answer.split(b"\r\n")[0]
    secret = token.split("_")[-1]
    assert secret not in caplog.text
    for record in caplog.records:
        assert record.exc_info is None or secret not in repr(record.exc_info[1])
    said = [r for r in caplog.records if r.name == "aiohttp.server"]
    assert len(said) == 1 and said[0].levelno == logging.WARNING and said[0].exc_info is None
    assert "not valid HTTP" in said[0].getMessage()
