"""The OpenAPI 3.1 document of the HTTP API (``GET /api/v1/openapi.json``).

Written by hand beside the shapes it describes (``bot.documents``, ``bot.hosting.api_errors``),
with the vocabularies (statuses, kinds, scopes) taken from the code that defines them;
``tests/api/test_api.py`` validates the document and every response the tests get against it.
"""

from __future__ import annotations

from typing import Any

from bot.slack.batch_payloads import MAX_BATCH
from bot.tokens import Scope
from storage import HUMAN_DECISIONS, DecisionKind, ReviewKind, ReviewStatus, RunStatus

Json = dict[str, Any]

_NULLABLE_TEXT = {"type": ["string", "null"]}
# An action digest (crew_runtime.digests): SHA-256 in hex; a decision may name its first 8+.
_DIGEST = {
    "type": ["string", "null"],
    "pattern": "^[0-9a-f]{64}$",
    "description": "the action digest: SHA-256 over the RFC 8785 JSON of what would be done",
}
# A person as ``by`` names them (a Slack user id, say): some text, of at most the column's
# length, no NUL (PostgreSQL's text holds none).
_PERSON = {
    "type": "string",
    "minLength": 1,
    "maxLength": 64,
    "pattern": "^[^\\u0000]*[^\\u0000\\s][^\\u0000]*$",
}
_ID = {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,32}$"}
_TIME = {"type": "string", "format": "date-time"}
_NULLABLE_TIME = {"type": ["string", "null"], "format": "date-time"}


def _ref(name: str) -> Json:
    return {"$ref": f"#/components/schemas/{name}"}


def _object(properties: Json, *, required: list[str] | None = None) -> Json:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties) if required is None else required,
        "additionalProperties": False,
    }


def _answer(description: str, schema: Json) -> Json:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _error(description: str) -> Json:
    return _answer(description, _ref("Error"))


_ERROR_BODY: Json = {
    "type": "object",
    "properties": {
        "code": {"type": "string"},
        "message": {"type": "string"},
        "field": _NULLABLE_TEXT,
        "decided_by": _NULLABLE_TEXT,
        "decision": _NULLABLE_TEXT,
        "decided_at": _NULLABLE_TIME,
        "expected": _NULLABLE_TEXT,
        "digest": _NULLABLE_TEXT,
    },
    "required": ["code", "message", "field"],
    "additionalProperties": False,
}
# What a decision asks, alone or in a batch.
_DECISION: Json = {
    "kind": {"enum": [k.value for k in HUMAN_DECISIONS]},
    "text": {
        "type": ["string", "null"],
        "description": "needed by edit, changes and answer; a reason for reject",
    },
    "standing": {
        "type": "boolean",
        "description": "also approve the tool's later calls (the gate's allow_standing)",
    },
    "digest": {
        "type": ["string", "null"],
        "pattern": "^[0-9a-fA-F]{8,64}$",
        "description": "the action digest the decider saw (at least its first 8 hex "
        "digits): a review whose action has another is not decided (409 "
        "digest_mismatch)",
    },
}
_BY = {**_PERSON, "description": "who decides (a Slack user id): held to the crew's reviewers"}

_SCHEMAS: Json = {
    "Error": _object({"error": _ERROR_BODY}),
    "Decision": _object(
        {
            "kind": {"enum": [k.value for k in DecisionKind]},
            "text": _NULLABLE_TEXT,
            "original": _NULLABLE_TEXT,
            "by": {"type": "string"},
            "at": _TIME,
            "digest": {**_DIGEST, "description": "the action digest it covers (an edit's own)"},
        }
    ),
    "Review": _object(
        {
            "id": {"type": "string"},
            "run_id": {"type": "string"},
            "kind": {"enum": [k.value for k in ReviewKind]},
            "status": {"enum": [s.value for s in ReviewStatus]},
            "prompt": {"type": "string"},
            "details": {"type": "object", "description": "what this kind of review holds"},
            "created_at": _TIME,
            "decision": {"oneOf": [_ref("Decision"), {"type": "null"}]},
            "approvals": {
                "type": "array",
                "description": "the approvals so far of a review that needs several",
                "items": _object(
                    {
                        "by": {"type": "string"},
                        "at": _TIME,
                        "stage": {
                            **_NULLABLE_TEXT,
                            "description": "the approval chain's stage it was given at",
                        },
                    }
                ),
            },
            "stage": {
                "type": "integer",
                "minimum": 0,
                "description": "where an approval chain stands: its current stage, from 0",
            },
            "claimed_by": _NULLABLE_TEXT,
            "claimed_at": _NULLABLE_TIME,
            "digest": {**_DIGEST, "description": "the action digest of what it proposes"},
        }
    ),
    "Run": _object(
        {
            "id": {"type": "string"},
            "crew": {"type": "string"},
            "status": {"enum": [s.value for s in RunStatus]},
            "inputs": {"type": "object", "additionalProperties": {"type": "string"}},
            "output": _NULLABLE_TEXT,
            "error": _NULLABLE_TEXT,
            "started_by": _NULLABLE_TEXT,
            "created_at": _TIME,
            "updated_at": _TIME,
            "reviews": {"type": "array", "items": _ref("Review")},
        }
    ),
    "ReviewPage": _object(
        {
            "reviews": {"type": "array", "items": _ref("Review")},
            "next_cursor": {
                "type": ["string", "null"],
                "description": "pass as ?cursor= for the next page; null on the last one",
            },
        }
    ),
    "StartRun": _object(
        {
            "crew": {
                "type": "string",
                "minLength": 1,
                "pattern": "\\S",
                "description": "a crew or flow of the configuration",
            },
            "inputs": {
                "type": "object",
                "propertyNames": {"pattern": "^[A-Za-z_][A-Za-z0-9_]*$"},
                "additionalProperties": {"type": "string"},
            },
            "by": {
                **_PERSON,
                "description": "who starts it (a Slack user id, say); default api:<token name>",
            },
            "channel": {
                "type": "string",
                "pattern": "^[CG][A-Z0-9]{2,}$",
                "description": "the Slack channel id its thread goes to and whose members "
                "decide where the crew names no reviewers; default the crew's channel",
            },
        },
        required=["crew"],
    ),
    "NewDecision": _object(
        {**_DECISION, "by": _BY},
        required=["kind", "by"],
    ),
    "NewDecisions": _object(
        {
            "by": _BY,
            "decisions": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_BATCH,
                "description": f"at most {MAX_BATCH}, each review once; each is decided as "
                "if sent alone to /reviews/{review_id}/decision",
                "items": _object({"review_id": _ID, **_DECISION}, required=["review_id", "kind"]),
            },
        }
    ),
    "DecisionResults": _object(
        {
            "results": {
                "type": "array",
                "description": "one per decision sent, in their order",
                "items": _object(
                    {
                        "review_id": {"type": "string"},
                        "status": {
                            "type": "integer",
                            "description": "200 recorded (or a replay answered as the first "
                            "time); else the status the single route would answer",
                        },
                        "review": {"oneOf": [_ref("Review"), {"type": "null"}]},
                        "error": {
                            "oneOf": [_ERROR_BODY, {"type": "null"}],
                            "description": "why it was refused (the Error document's error)",
                        },
                    }
                ),
            }
        }
    ),
}

_AUTH = {
    "401": _error("no token, or one unknown or revoked (WWW-Authenticate says so)"),
    "403": _error("the token lacks the scope"),
}
_IDEMPOTENCY = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": (
        "the same key (per token) sent again with the same request is answered as the first "
        "time; with another route or body it is refused (422, idempotency_key_reused)"
    ),
    "schema": {"type": "string", "minLength": 1, "maxLength": 100},
}


def _secured(scope: Scope, operation: Json) -> Json:
    operation["security"] = [{"bearer": [scope.value]}]
    operation["responses"] = {**_AUTH, **operation["responses"]}
    return operation


def _path_id(name: str) -> Json:
    return {"name": name, "in": "path", "required": True, "schema": _ID}


def _query(name: str, schema: Json, description: str) -> Json:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "schema": schema,
        "description": description,
    }


_PATHS: Json = {
    "/openapi.json": {
        "get": {
            "summary": "This document (no token needed)",
            "security": [],
            "responses": {"200": _answer("the OpenAPI document", {"type": "object"})},
        }
    },
    "/runs": {
        "post": _secured(
            Scope.START,
            {
                "summary": "Start a run of a crew (its Slack thread is posted as for /crew run)",
                "parameters": [_IDEMPOTENCY],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _ref("StartRun")}},
                },
                "responses": {
                    "201": _answer("the run, queued", _ref("Run")),
                    "400": _error("malformed JSON, an unknown crew, missing or unknown inputs"),
                    "413": _error("a body larger than 1 MiB"),
                    "422": _error(
                        "nobody could decide the run (nobody_decides): the crew names no "
                        "reviewers and no channel is given; or the Idempotency-Key was sent "
                        "before with another request"
                    ),
                    "503": _error("Slack could not say who the run's reviewer input names"),
                },
            },
        )
    },
    "/runs/{run_id}": {
        "get": _secured(
            Scope.READ,
            {
                "summary": "A run with its reviews and their decisions",
                "parameters": [_path_id("run_id")],
                "responses": {
                    "200": _answer("the run", _ref("Run")),
                    "404": _error("no run with that id"),
                },
            },
        )
    },
    "/reviews": {
        "get": _secured(
            Scope.READ,
            {
                "summary": "Reviews by status and crew, oldest first, a page at a time",
                "parameters": [
                    _query(
                        "status",
                        {"enum": [*(s.value for s in ReviewStatus), "all"]},
                        "default pending",
                    ),
                    _query("crew", {"type": "string"}, "only this crew's runs"),
                    _query(
                        "limit", {"type": "integer", "minimum": 1, "maximum": 200}, "default 50"
                    ),
                    _query(
                        "cursor",
                        {"type": "string", "minLength": 1},
                        "the next_cursor of the page before",
                    ),
                ],
                "responses": {
                    "200": _answer("a page of reviews", _ref("ReviewPage")),
                    "400": _error("an unknown status, crew or parameter, a bad limit or cursor"),
                },
            },
        )
    },
    "/reviews/{review_id}/decision": {
        "post": _secured(
            Scope.DECIDE,
            {
                "summary": "Decide a review, as a click in Slack would (who may, quorum, once)",
                "parameters": [_path_id("review_id"), _IDEMPOTENCY],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _ref("NewDecision")}},
                },
                "responses": {
                    "200": _answer(
                        "the review: decided, or still pending with one more approval",
                        _ref("Review"),
                    ),
                    "400": _error("malformed JSON, an unknown kind, text missing"),
                    "403": _error(
                        "the token lacks the scope, or the review policy refuses by "
                        "(not_a_reviewer, not_your_stage, self_approval)"
                    ),
                    "404": _error("no review with that id"),
                    "409": _error(
                        "decided already (saying by whom), by approved already, the "
                        "approval chain moved on to another stage meanwhile (stage_moved), or "
                        "digest names another action than the review's (digest_mismatch)"
                    ),
                    "413": _error("a body larger than 1 MiB"),
                    "422": _error(
                        "a decision this review cannot take, or the Idempotency-Key was sent "
                        "before with another request"
                    ),
                    "503": _error("Slack could not say who may decide; try again"),
                },
            },
        )
    },
    "/decisions": {
        "post": _secured(
            Scope.DECIDE,
            {
                "summary": f"Decide up to {MAX_BATCH} reviews as one person, each its own "
                "decision (who may, quorum, once), each with its own result",
                "parameters": [_IDEMPOTENCY],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _ref("NewDecisions")}},
                },
                "responses": {
                    "200": _answer(
                        "each decision's result: recorded, or refused with the status and "
                        "error the single route would answer (nothing spans them)",
                        _ref("DecisionResults"),
                    ),
                    "400": _error(
                        f"malformed JSON, no decisions or more than {MAX_BATCH}, a review "
                        "listed twice, an unknown kind, text missing"
                    ),
                    "413": _error("a body larger than 1 MiB"),
                    "422": _error("the Idempotency-Key was sent before with another request"),
                },
            },
        )
    },
}


def document() -> Json:
    """The whole document, paths relative to its server, ``/api/v1``."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Countersign",
            "version": "1",
            "description": "Start crews' runs, read them and decide their reviews.",
        },
        "servers": [{"url": "/api/v1"}],
        "security": [{"bearer": []}],
        "components": {
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "countersign tokens create NAME --scopes start,read,decide",
                }
            },
            "schemas": _SCHEMAS,
        },
        "paths": _PATHS,
    }
