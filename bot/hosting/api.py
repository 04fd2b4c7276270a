"""The HTTP API under ``/api/v1``: start runs, read runs and reviews, decide reviews.

Each request carries a bearer token (``countersign tokens create``, ``bot.tokens``) whose
scopes allow what it asks: ``start`` for ``POST /runs``, ``read`` for ``GET /runs/{id}``
and ``GET /reviews``, ``decide`` for ``POST /reviews/{id}/decision`` and ``POST /decisions``
(several decisions by one ``by``, each its own, answered each with its own status). The
token is checked before anything else is read, so a request refused for it changes nothing.

A decision is recorded as the person its ``by`` names, and is held to the rules a click in
Slack is: ``by`` must be one of the run's reviewers (or in its channel, for a crew open to
it; or holding the reviews of one of them while they are away), and the runtime's service
applies the crew's quorum, ``forbid_self_approval`` and exactly-once decision. The token
holder vouches for ``by``: a token with ``decide`` may decide as any reviewer.

A run started here is the run ``/crew run`` starts: its root message goes to the crew's
channel through the outbox, so its reviews are in Slack too. The bodies are the CLI's
``--json`` shapes (``bot.documents``); ``/api/v1/openapi.json`` describes every one
(``bot.hosting.openapi``). Storage is synchronous and crosses to the event loop through
``bot.slack.handlers.sync``, as the Slack handlers' calls do.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import json
import logging
import re
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from aiohttp import web

from bot.documents import review_json, run_json
from bot.hosting import openapi
from bot.hosting.api_errors import ApiError, refusal
from bot.slack.authz import CheckFailed
from bot.slack.batch_payloads import MAX_BATCH, BatchItem
from bot.slack.handlers import Handlers, sync
from bot.tokens import Scope, Tokens
from crew_runtime import policy
from crew_runtime.config import UnknownCrewError
from crew_runtime.digests import DIGEST_RE
from storage import (
    HUMAN_DECISIONS,
    ApiToken,
    CountersignError,
    DecisionKind,
    ReviewStatus,
)

__all__ = ["PREFIX", "Api"]

log = logging.getLogger(__name__)

PREFIX = "/api/v1"
PAGE_LIMIT = 50
"""Reviews in a page of ``GET /reviews`` unless ``limit`` says otherwise (at most
:data:`MAX_LIMIT`)."""
MAX_LIMIT = 200
MAX_KEY = 100
"""The longest ``Idempotency-Key`` (the request keys' column holds it with the token's id)."""
_ALL = "all"
# The names CrewAI interpolates as {placeholders} (the CLI's key=value takes the same).
_INPUT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CHANNEL_ID = re.compile(r"[CG][A-Z0-9]{2,}")
# What a run's or a review's id can be (``storage.base.new_id``, in a column of 32).
_ID = re.compile(r"[A-Za-z0-9_-]{1,32}")


def text_nobody(configure: str) -> str:
    return f"nobody could decide this run's reviews: {configure}; or give channel (an id)"


Json = dict[str, Any]
Route = Callable[[web.Request, ApiToken], Awaitable[web.Response]]


class Api(Handlers):
    """The handlers of ``/api/v1``, bound to the service, who may decide, and the wake-up
    of workers and the dispatcher, as the Slack handlers are."""

    def add_routes(self, app: web.Application) -> None:
        tokens = Tokens(self.store)
        routes = (
            ("POST", "/runs", Scope.START, self.start_run),
            ("GET", "/runs/{run_id}", Scope.READ, self.get_run),
            ("GET", "/reviews", Scope.READ, self.list_reviews),
            ("POST", "/reviews/{review_id}/decision", Scope.DECIDE, self.decide),
            ("POST", "/decisions", Scope.DECIDE, self.decide_batch),
        )
        allowed: dict[re.Pattern[str], set[str]] = {}
        for method, path, scope, handler in routes:
            app.router.add_route(method, PREFIX + path, _guarded(tokens, scope, handler))
            allowed.setdefault(_pattern(PREFIX + path), set()).add(method)
        app.router.add_get(PREFIX + "/openapi.json", _document)
        allowed[_pattern(PREFIX + "/openapi.json")] = {"GET", "HEAD"}
        # Last: what no route above matched is answered in JSON too.
        app.router.add_route("*", PREFIX + "/{tail:.*}", functools.partial(_no_route, allowed))

    async def start_run(self, request: web.Request, token: ApiToken) -> web.Response:
        body = await _body(request, {"crew", "inputs", "by", "channel"})
        crew = _text(body, "crew", required=True)
        inputs = body.get("inputs", {})
        if not isinstance(inputs, dict):
            raise ApiError(400, "invalid", "inputs must be an object of strings", "inputs")
        for name, value in inputs.items():
            if not _INPUT_NAME.fullmatch(name):
                said = "an input's name is letters, digits and '_', not starting with a digit"
                raise ApiError(400, "invalid", said, f"inputs.{name}")
            if not isinstance(value, str):
                raise ApiError(
                    400, "invalid", "an input's value must be a string", f"inputs.{name}"
                )
        by = _text(body, "by") or f"api:{token.name}"
        channel = _text(body, "channel")
        if channel is not None and not _CHANNEL_ID.fullmatch(channel):
            said = "channel is a Slack channel id (C…, G…), e.g. C0123456789"
            raise ApiError(400, "invalid", said, "channel")
        try:
            spec = self.config.get(crew)
        except UnknownCrewError as exc:
            known = ", ".join(exc.known) or "none are defined"
            raise ApiError(
                400, "unknown_crew", f"no crew or flow named {crew!r} (known: {known})", "crew"
            ) from None
        if spec.channel and channel is not None and spec.channel.lstrip("#") != channel:
            said = f"crew {crew} runs only in its channel {spec.channel}: leave channel out"
            raise ApiError(400, "invalid", said, "channel")
        nobody = policy.start_refusal(spec, inputs, channel or spec.channel)
        if nobody is not None:
            raise ApiError(422, "nobody_decides", text_nobody(nobody.configure), "channel")
        reviewer = spec.reviewers_from_input
        if reviewer is not None and inputs.get(reviewer):
            await self._check_person(inputs[reviewer], f"inputs.{reviewer}")
        request_key = await self._request_key(request, token, body)
        try:
            run = await sync(
                self.service.start_run,
                crew,
                inputs,
                started_by=by,
                channel=channel,
                request_key=request_key,
            )
        except CountersignError as exc:
            raise refusal(exc) from None
        log.info("run %s (%s) started by %s through token %s", run.id, crew, by, token.name)
        self.wake()
        return _json(run_json(run, []), 201)

    async def get_run(self, request: web.Request, _token: ApiToken) -> web.Response:
        run_id = _path_id(request, "run_id", "run")

        def read() -> Json:
            run = self.store.get_run(run_id)
            return run_json(run, self.store.list_reviews(status=None, run_id=run.id))

        try:
            return _json(await sync(read))
        except CountersignError as exc:
            raise refusal(exc) from None

    async def list_reviews(self, request: web.Request, _token: ApiToken) -> web.Response:
        query = request.query
        unknown = sorted(set(query) - {"status", "crew", "limit", "cursor"})
        if unknown:
            raise ApiError(400, "invalid", "no such query parameter", unknown[0])
        status = _status(query.get("status", ReviewStatus.PENDING.value))
        crew = query.get("crew")
        if crew is not None and crew not in self.config.crews:
            raise ApiError(400, "unknown_crew", f"no crew or flow named {crew!r}", "crew")
        limit = _limit(query.get("limit"))
        after = _cursor(query["cursor"]) if "cursor" in query else None
        page = await sync(
            self.store.review_page, status=status, crew=crew, limit=limit + 1, after=after
        )
        more = len(page) > limit
        page = page[:limit]
        last = page[-1] if more else None
        return _json(
            {
                "reviews": [review_json(review) for review in page],
                "next_cursor": None if last is None else _encode(last.created_at, last.id),
            }
        )

    async def decide(self, request: web.Request, token: ApiToken) -> web.Response:
        review_id = _path_id(request, "review_id", "review")
        body = await _body(request, {"kind", "text", "by", "standing", "digest"})
        item = _item(body, review_id)
        by = _text(body, "by", required=True).strip()
        found = await self._review_and_run(review_id)
        if found is None:
            raise ApiError(404, "not_found", f"no review with id {review_id!r}")
        request_key = await self._request_key(request, token, body)
        try:
            review = await self._recorded(
                *found,
                item.kind,
                item.text,
                by,
                request_key=request_key,
                standing=item.standing,
                digest=item.digest,
            )
        except CountersignError as exc:
            raise refusal(exc) from None
        log.info("review %s: %s by %s through token %s", review_id, item.kind, by, token.name)
        self.wake()
        return _json(review_json(review))

    async def decide_batch(self, request: web.Request, token: ApiToken) -> web.Response:
        """Several decisions by one ``by``, each its own decision (the single route's),
        answered each with its own status: recorded (200) or refused (the status and error
        the single route would give). Nothing spans the items: one refused leaves the
        others recorded."""
        body = await _body(request, {"by", "decisions"})
        by = _text(body, "by", required=True).strip()
        listed = body.get("decisions")
        if not isinstance(listed, list) or not 1 <= len(listed) <= MAX_BATCH:
            said = f"decisions must be a list of 1 to {MAX_BATCH} decisions (send more in several)"
            raise ApiError(400, "invalid", said, "decisions")
        items: list[BatchItem] = []
        for n, entry in enumerate(listed):
            where = f"decisions[{n}]"
            if not isinstance(entry, dict):
                raise ApiError(400, "invalid", "a decision is an object", where)
            unknown = sorted(set(entry) - {"review_id", "kind", "text", "standing", "digest"})
            if unknown:
                raise ApiError(400, "invalid", "no such field", f"{where}.{unknown[0]}")
            review_id = _text(entry, "review_id", required=True, where=where)
            if any(i.review_id == review_id for i in items):
                said = f"review {review_id!r} is listed twice: decide each review once"
                raise ApiError(400, "invalid", said, f"{where}.review_id")
            items.append(_item(entry, review_id, where))
        request_key = await self._request_key(request, token, body)
        ours = [i for i in items if _ID.fullmatch(i.review_id)]
        results = {r.item.review_id: r for r in await self._decide_batch(ours, by, request_key)}
        answers = []
        for item in items:
            result = results.get(item.review_id)
            if result is not None and result.review is not None:
                answers.append(
                    {
                        "review_id": item.review_id,
                        "status": 200,
                        "error": None,
                        "review": review_json(result.review),
                    }
                )
                continue
            error = (
                ApiError(404, "not_found", f"no review with id {item.review_id!r}")
                if result is None or result.error is None
                else refusal(result.error)
            )
            answers.append(
                {
                    "review_id": item.review_id,
                    "status": error.status,
                    "error": error.body(),
                    "review": None,
                }
            )
        log.info("a batch of %d decisions by %s through token %s", len(items), by, token.name)
        return _json({"results": answers})

    async def _request_key(self, request: web.Request, token: ApiToken, body: Json) -> str | None:
        """What the request's ``Idempotency-Key`` makes of it: a key of the token's own, so
        two clients' keys never meet. The key sent again with another request (route or
        body) is refused: only a retry of the first gets the first's answer.

        Raises:
            ApiError: the key is too long, or was first sent with another request (422).
        """
        key = request.headers.get("Idempotency-Key")
        if key is None:
            return None
        if not 1 <= len(key) <= MAX_KEY or not key.isprintable():
            said = f"Idempotency-Key must be 1 to {MAX_KEY} printable characters"
            raise ApiError(400, "invalid", said, "Idempotency-Key")
        request_key = f"api:{token.id}:{key}"
        asked = json.dumps([request.method, request.path, body], sort_keys=True, ensure_ascii=False)
        fingerprint = hashlib.sha256(asked.encode("utf-8", "surrogatepass")).hexdigest()
        if not await sync(self.store.same_request, request_key, fingerprint):
            raise ApiError(
                422,
                "idempotency_key_reused",
                "this Idempotency-Key was sent before with another request (route or body): "
                "send a new key for a new request, the same request to retry",
                "Idempotency-Key",
            )
        return request_key

    async def _check_person(self, user_id: str, field: str) -> None:
        """A run's reviewer input names someone Slack knows, active and not a bot (what
        ``/crew run`` checks of its mention)."""
        try:
            why = await self.reviewers.not_a_person(user_id)
        except CheckFailed:
            raise ApiError(
                503, "check_failed", "Slack did not say who that is: try again"
            ) from None
        if why is not None:
            raise ApiError(400, "invalid", f"{user_id} cannot review: {why}", field)


def _guarded(
    tokens: Tokens, scope: Scope, handler: Route
) -> Callable[[web.Request], Awaitable[web.Response]]:
    """``handler`` behind the bearer token check, its errors answered as JSON."""

    async def guarded(request: web.Request) -> web.Response:
        try:
            token = await _authenticate(tokens, request)
            if scope.value not in token.scopes:
                raise ApiError(
                    403,
                    "insufficient_scope",
                    f"this token's scopes ({','.join(token.scopes)}) do not include {scope}",
                    challenge=f'Bearer error="insufficient_scope", scope="{scope}"',
                )
            return await handler(request, token)
        except ApiError as exc:
            # One line per refusal, whatever was sent (the formatter escapes what came from
            # outside); never a traceback.
            log.log(
                logging.WARNING if exc.status >= 500 else logging.INFO,
                "refused %s %s: %d %s (%s)",
                request.method,
                request.path,
                exc.status,
                exc.code,
                exc.message,
            )
            return exc.response()

    return guarded


async def _authenticate(tokens: Tokens, request: web.Request) -> ApiToken:
    header = request.headers.get("Authorization", "")
    scheme, _, secret = header.partition(" ")
    if not header:
        raise ApiError(401, "unauthorized", "send a token: Authorization: Bearer <token>")
    if scheme.lower() != "bearer" or not secret.strip():
        raise ApiError(401, "unauthorized", "the Authorization header is not 'Bearer <token>'")
    token = await sync(tokens.authenticate, secret.strip())
    if token is None:
        raise ApiError(
            401,
            "invalid_token",
            "the token is unknown or revoked",
            challenge='Bearer error="invalid_token"',
        )
    return token


async def _document(_request: web.Request) -> web.Response:
    return _json(openapi.document())


def _pattern(path: str) -> re.Pattern[str]:
    """What a route's path matches (``{name}``: one segment)."""
    return re.compile(re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(path)))


async def _no_route(allowed: dict[re.Pattern[str], set[str]], request: web.Request) -> web.Response:
    """A path no route has (404), or a method its route does not take (405, saying which
    it takes)."""
    for pattern, methods in allowed.items():
        if pattern.fullmatch(request.path):
            said = f"{request.path} takes {', '.join(sorted(methods))}, not {request.method}"
            response = ApiError(405, "method_not_allowed", said).response()
            response.headers["Allow"] = ", ".join(sorted(methods))
            return response
    said = f"no endpoint {request.method} {request.path}: see {PREFIX}/openapi.json"
    return ApiError(404, "not_found", said).response()


def _json(document: Json, status: int = 200) -> web.Response:
    return web.json_response(
        document, status=status, dumps=lambda d: json.dumps(d, ensure_ascii=False)
    )


async def _body(request: web.Request, fields: set[str]) -> Json:
    """The request's JSON object, holding no field but ``fields``."""
    try:
        body = json.loads(await request.read())
    except web.HTTPRequestEntityTooLarge:
        raise ApiError(413, "too_large", "the body is larger than 1 MiB") from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ApiError(400, "malformed_json", "the body is not a JSON document") from None
    except RecursionError:
        raise ApiError(
            400, "malformed_json", "the body's JSON is nested too deeply to be read"
        ) from None
    if not isinstance(body, dict):
        raise ApiError(400, "malformed_json", "the body must be a JSON object")
    unknown = sorted(set(body) - fields)
    if unknown:
        raise ApiError(400, "invalid", "no such field", unknown[0])
    return body


def _text(body: Json, field: str, *, required: bool = False, where: str = "") -> Any:
    """A string field (None when absent and not ``required``); ``where``: the object's
    place in the body (``decisions[2]``), for the error's ``field``."""
    value = body.get(field)
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value.strip()):
        said = "is required" if value is None else "must be a non-empty string"
        name = f"{where}.{field}" if where else field
        raise ApiError(400, "invalid", f"{name} {said}", name)
    return value


def _item(body: Json, review_id: str, where: str = "") -> BatchItem:
    """The decision a body (or a batch's entry at ``where``) asks of review ``review_id``.

    Raises:
        ApiError: an unknown kind, text a kind needs missing, a standing or digest that is
            not what it should be (400).
    """
    at = f"{where}." if where else ""
    word = _text(body, "kind", required=True, where=where)
    try:
        kind = DecisionKind(word)
    except ValueError:
        kind = DecisionKind.EXPIRE  # not a person's: refused just below
    if kind not in HUMAN_DECISIONS:
        choices = "|".join(HUMAN_DECISIONS)
        raise ApiError(400, "invalid", f"unknown decision {word!r}: use {choices}", f"{at}kind")
    text = _text(body, "text", where=where)
    if kind.needs_text and not (text or "").strip():
        raise ApiError(400, "invalid", f"{kind.value!r} needs text", f"{at}text")
    standing = body.get("standing", False)
    if not isinstance(standing, bool):
        raise ApiError(400, "invalid", "standing must be true or false", f"{at}standing")
    digest = _text(body, "digest", where=where)
    if digest is not None and not DIGEST_RE.fullmatch(digest):
        raise ApiError(400, "invalid", "digest must be 8 to 64 hex digits", f"{at}digest")
    return BatchItem(review_id, kind, text, digest, standing)


def _status(word: str) -> ReviewStatus | None:
    if word == _ALL:
        return None
    try:
        return ReviewStatus(word)
    except ValueError:
        choices = "|".join([*(s.value for s in ReviewStatus), _ALL])
        raise ApiError(
            400, "invalid", f"unknown status {word!r}: use {choices}", "status"
        ) from None


def _path_id(request: web.Request, name: str, what: str) -> str:
    """The id in the path; one that cannot be an id of ours (a NUL, a character a database
    cannot hold, too long) is not found, without asking the database."""
    value = request.match_info[name]
    if not _ID.fullmatch(value):
        raise ApiError(404, "not_found", f"no {what} with id {value!r}")
    return value


def _limit(word: str | None) -> int:
    if word is None:
        return PAGE_LIMIT
    # Only ASCII digits: str.isdigit() takes "²", which int() refuses.
    if not (word.isascii() and word.isdigit()) or not 1 <= int(word) <= MAX_LIMIT:
        raise ApiError(400, "invalid", f"limit must be a number from 1 to {MAX_LIMIT}", "limit")
    return int(word)


def _encode(at: datetime, review_id: str) -> str:
    raw = json.dumps([at.isoformat(), review_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _cursor(word: str) -> tuple[datetime, str]:
    """The position a ``next_cursor`` names."""
    try:
        raw = base64.urlsafe_b64decode(word + "=" * (-len(word) % 4))
        at, review_id = json.loads(raw)
        when = datetime.fromisoformat(at)
        if when.tzinfo is not None or not isinstance(review_id, str):
            raise ValueError(word)
        if not _ID.fullmatch(review_id):  # a NUL, say: never an id of ours
            raise ValueError(word)
        return when, review_id
    except (binascii.Error, ValueError, TypeError, RecursionError):
        raise ApiError(
            400, "invalid", "not a cursor this API gave (use next_cursor as it came)", "cursor"
        ) from None
