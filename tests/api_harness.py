"""A client of the HTTP API for tests: every answer it gets is checked against the OpenAPI
document the server serves (the status must be documented for the path and method, and the
body must fit that answer's schema)."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from bot.hosting.openapi import document

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
