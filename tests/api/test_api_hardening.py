"""The HTTP API against what a token holder (or anyone) can send: nothing secret in a log,
a 4xx problem body and one log line for input that used to be a 500, an ``Idempotency-Key``
reused with another body refused, and every outside field logged escaped. On SQLite and
PostgreSQL, against the real server.
"""

from __future__ import annotations

import base64
import io
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from bot.log_format import formatter
from bot.tokens import PREFIX
from tests.support.api_harness import ApiBench, bench, raw_request
from tests.support.slack_harness import ALICE, BOB, MALLORY

__all__ = ["bench"]  # the fixture, used by name


@pytest.mark.parametrize(
    "stray", [b"\r", b"\x01", b"\x00", b"\x7f"], ids=["cr", "soh", "nul", "del"]
)
def test_a_token_with_a_stray_byte_is_refused_and_never_logged(
    bench: ApiBench, caplog: pytest.LogCaptureFixture, stray: bytes
) -> None:
    caplog.set_level(logging.DEBUG)
    token = bench.tokens["all"]
    request = (
        b"GET /api/v1/reviews HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Authorization: Bearer " + token.encode() + stray + b"\r\n\r\n"
    )
    answer = raw_request(bench.api.base, request)
    assert answer.startswith(b"HTTP/1.") and b" 400 " in answer.split(b"\r\n")[0]
    secret = token.removeprefix(PREFIX).split("_", 1)[1]  # (it may hold "_" itself)
    assert secret not in caplog.text
    for record in caplog.records:
        assert record.exc_info is None or secret not in repr(record.exc_info[1])
    said = [r for r in caplog.records if r.name == "aiohttp.server"]
    assert len(said) == 1 and said[0].levelno == logging.WARNING and said[0].exc_info is None
    assert "not valid HTTP" in said[0].getMessage()


@contextmanager
def logged(log_format: str) -> Iterator[io.StringIO]:
    """What ``serve``'s own handler (``LOG_FORMAT=log_format``) writes meanwhile."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(formatter(log_format))
    handler.addFilter(lambda record: record.name.startswith(("bot.hosting", "aiohttp.server")))
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield out
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def _cursor(raw: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(raw).encode()).decode().rstrip("=")


def test_input_that_used_to_be_a_500_is_a_4xx_with_one_log_line(bench: ApiBench) -> None:
    bench.pause()
    nested = b'{"crew": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    cases = [
        ("GET", "/runs/run%00x", None, 404, "not_found"),
        ("GET", "/runs/" + "r" * 300, None, 404, "not_found"),
        ("GET", "/runs/%ED%A0%80", None, 404, "not_found"),
        ("POST", "/reviews/rev%00x/decision", {"kind": "approve", "by": ALICE}, 404, "not_found"),
        ("GET", "/reviews?limit=%C2%B2", None, 400, "invalid"),
        ("GET", "/reviews?limit=%D9%A3", None, 400, "invalid"),  # an Arabic-Indic 3
        (
            "GET",
            "/reviews?cursor=" + _cursor(["2026-01-01T00:00:00", "rev\x00"]),
            None,
            400,
            "invalid",
        ),
        ("GET", "/reviews?cursor=" + _cursor(["2026-01-01T00:00:00", 7]), None, 400, "invalid"),
        ("GET", "/reviews?cursor=%00", None, 400, "invalid"),
        ("POST", "/runs", nested, 400, "malformed_json"),
        ("POST", "/reviews/rev_x/decision", b"[" * 100_000, 400, "malformed_json"),
    ]
    for method, path, body, status, code in cases:
        raw = body if isinstance(body, bytes) else None
        with logged("text") as out:
            answer = bench.api.call(
                method, path, None if raw is not None else body, raw=raw, documented=False
            )
        assert (answer.status, answer.error["code"]) == (status, code), path
        lines = out.getvalue().splitlines()
        assert len(lines) == 1 and "refused" in lines[0], (path, lines)
        assert "Traceback" not in out.getvalue()
    assert bench.api.get("/reviews?limit=2").status == 200


def test_an_idempotency_key_sent_again_with_another_request_is_refused(bench: ApiBench) -> None:
    review_id = bench.pause("deal", by=MALLORY)
    decision = f"/reviews/{review_id}/decision"
    keyed = {"Idempotency-Key": "approve-1"}
    first = bench.api.post(decision, {"kind": "approve", "by": ALICE}, headers=keyed)
    assert first.status == 200 and len(first.body["approvals"]) == 1

    # The same request (its fields in another order): the first's answer.
    again = bench.api.post(decision, {"by": ALICE, "kind": "approve"}, headers=keyed)
    assert again.status == 200 and again.body == first.body
    # Another person's approval, another kind or text, another route: refused, saying so.
    for path, body in [
        (decision, {"kind": "approve", "by": BOB}),
        (decision, {"kind": "reject", "by": ALICE}),
        (decision, {"kind": "reject", "by": ALICE, "text": "no"}),
        ("/runs", {"crew": "writer", "inputs": {"topic": "otters"}}),
    ]:
        refused = bench.api.post(path, body, headers=keyed)
        assert (refused.status, refused.error["code"]) == (422, "idempotency_key_reused"), body
        assert refused.error["field"] == "Idempotency-Key"
        assert "another request" in refused.error["message"]
    # Bob's own key counts his approval: the quorum of two is met.
    bob = bench.api.post(
        decision, {"kind": "approve", "by": BOB}, headers={"Idempotency-Key": "approve-2"}
    )
    assert bob.status == 200 and bob.body["status"] == "decided", bob.body
    assert bob.body["decision"]["kind"] == "approve"
    assert len(bench.store.list_runs()) == 1

    start = {"crew": "writer", "inputs": {"topic": "otters"}}
    made = bench.api.post("/runs", start, headers={"Idempotency-Key": "run-1"})
    other = {"crew": "writer", "inputs": {"topic": "beavers"}}
    refused = bench.api.post("/runs", other, headers={"Idempotency-Key": "run-1"})
    assert made.status == 201 and refused.status == 422
    assert bench.api.post("/runs", start, headers={"Idempotency-Key": "run-1"}).body == made.body


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_a_field_from_outside_cannot_forge_a_log_line(bench: ApiBench, log_format: str) -> None:
    forged = "U0EVE\n2026-01-01 00:00:00,000 ERROR x: leaked\r\x1b[2J"
    with logged(log_format) as out:
        answer = bench.api.post("/runs", {"crew": "writer", "inputs": {"topic": "o"}, "by": forged})
        refused = bench.api.post("/runs", {"crew": forged, "inputs": {}})
    assert answer.status == 201 and refused.status == 400
    lines = out.getvalue().splitlines()
    assert len(lines) == 2, lines
    assert not any(line.startswith("2026-01-01") for line in lines)
    assert all("\x1b" not in line and "\r" not in line for line in lines)
    if log_format == "json":
        said = [json.loads(line)["message"] for line in lines]
        assert forged in said[0], "a JSON string holds it exactly"
    else:
        assert "by U0EVE\\n2026-01-01 00:00:00,000 ERROR" in lines[0]
        assert "\\r\\x1b[2J" in lines[0]
