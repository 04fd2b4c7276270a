"""A client of the HTTP API for tests: every answer it gets is checked against the OpenAPI
document the server serves (the status must be documented for the path and method, and the
body must fit that answer's schema)."""

from __future__ import annotations

import json
import re
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from bot.hosting.openapi import document
from bot.tokens import Scope, Tokens
from storage import NewReview, ReviewKind, Store
from tests.support.slack_harness import ALICE, BOB, CHANNEL, MALLORY, configured, slack_and_bot

Json = dict[str, Any]

_DOC = document()
_REGISTRY: Registry[Any] = Registry().with_resource(
    "urn:openapi", Resource.from_contents(_DOC, default_specification=DRAFT202012)
)


@dataclass(frozen=True)
class Answer:
    status: int
    body: Any
    headers: dict[str, str]

    @property
    def error(self) -> Json:
        error: Json = self.body["error"]
        return error


def _template(path: str) -> tuple[str, str]:
    """The documented path ``path`` matches, and its pointer-escaped form."""
    for documented in _DOC["paths"]:
        pattern = re.sub(r"\{[^}]+\}", "[^/]+", documented)
        if re.fullmatch(pattern, path):
            return documented, documented.replace("~", "~0").replace("/", "~1")
    raise AssertionError(f"{path} is not in the OpenAPI document")


def check(method: str, path: str, answer: Answer) -> None:
    """``answer`` is one the document describes for ``method`` on ``path``."""
    documented, escaped = _template(path.split("?")[0])
    responses = _DOC["paths"][documented][method.lower()]["responses"]
    assert str(answer.status) in responses, f"{method} {path}: {answer.status} is not documented"
    pointer = (
        f"urn:openapi#/paths/{escaped}/{method.lower()}/responses/{answer.status}"
        "/content/application~1json/schema"
    )
    validator = Draft202012Validator({"$ref": pointer}, registry=_REGISTRY)
    errors = [e.message for e in validator.iter_errors(answer.body)]
    assert errors == [], f"{method} {path} {answer.status}: {errors}"


class ApiClient:
    """Calls ``base`` (``http://host:port``) with ``token`` unless told otherwise."""

    def __init__(self, base: str, token: str | None = None) -> None:
        self.base = base
        self.token = token

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        token: str | None = None,
        raw: bytes | None = None,
        headers: dict[str, str] | None = None,
        documented: bool = True,
    ) -> Answer:
        """The answer to one request; unless told it is not ``documented`` (a path the API
        does not have), checked against the OpenAPI document."""
        sent = dict(headers or {})
        bearer = token if token is not None else self.token
        if bearer:
            sent.setdefault("Authorization", f"Bearer {bearer}")
        data = raw if raw is not None else None if body is None else json.dumps(body).encode()
        if data is not None:
            sent["Content-Type"] = "application/json"
        request = urllib.request.Request(
            f"{self.base}/api/v1{path}", data=data, method=method, headers=sent
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                answer = Answer(
                    response.status, json.loads(response.read()), dict(response.headers)
                )
        except urllib.error.HTTPError as exc:
            answer = Answer(exc.code, json.loads(exc.read()), dict(exc.headers))
        if documented:
            check(method, path, answer)
        return answer

    def get(self, path: str, **kwargs: Any) -> Answer:
        return self.call("GET", path, **kwargs)

    def post(self, path: str, body: Any = None, **kwargs: Any) -> Answer:
        return self.call("POST", path, body, **kwargs)


@dataclass
class ApiBench:
    store: Store
    api: ApiClient
    tokens: dict[str, str]  # a token by the scopes it has

    def pause(
        self, crew: str = "writer", kind: ReviewKind = ReviewKind.TASK_REVIEW, by: str = ALICE
    ) -> str:
        """A run of ``crew`` paused at one review, as a worker pauses it; the review's id.
        (No run may be queued: the claim takes the oldest.)"""
        self.store.create_run(crew, {"topic": "otters"}, started_by=by, channel=CHANNEL)
        run = self.store.claim_run("w1", timedelta(seconds=30))
        assert run is not None and run.lease_token is not None
        ask = NewReview(kind=kind, stream="task0:Writer", seq=0, prompt="the draft")
        (review,) = self.store.suspend_run(run.id, run.lease_token, [ask])
        return review.id

    def decide(self, review_id: str, **body: object) -> Answer:
        return self.api.post(f"/reviews/{review_id}/decision", body)


@pytest.fixture
def bench(tmp_path: Path, db_url: str) -> Iterator[ApiBench]:
    with configured(tmp_path, db_url, API_CONFIG) as (config, store):
        made = Tokens(store)
        tokens = {
            "all": made.create("all", list(Scope), by="test")[1],
            "read": made.create("reader", [Scope.READ], by="test")[1],
        }
        with slack_and_bot(config, store, workers=0) as (_slack, bot):
            base = f"http://127.0.0.1:{bot.port}"
            yield ApiBench(store, ApiClient(base, tokens["all"]), tokens)


def raw_request(base: str, request: bytes) -> bytes:
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as conn:
        conn.sendall(request)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    return answer


API_CONFIG = f"""
[crews.writer]
factory = "tests.support.crews:writer"
channel = "{CHANNEL}"
reviewers = ["{ALICE}", "{BOB}"]
inputs = ["topic"]

[crews.deal]
factory = "tests.support.crews:writer"
channel = "{CHANNEL}"
reviewers = ["{ALICE}", "{BOB}", "{MALLORY}"]
approvals_required = 2
forbid_self_approval = true

[crews.named]
factory = "tests.support.crews:writer"
inputs = ["topic", "approver"]
reviewers_from_input = "approver"
"""
