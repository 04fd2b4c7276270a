"""The HTTP API's errors: one JSON shape, and which status each refusal of the runtime gets.

Every error is ``{"error": {"code": …, "message": …, "field": …}}``: ``code`` is for programs
(stable), ``message`` for people (one sentence), ``field`` names the part of the request at
fault (``inputs.topic``, ``kind``; null when none is). A review decided already adds who
decided it, and how, and when.

400: the request is wrong whatever the review (malformed JSON, an unknown field, crew,
status or decision, missing inputs or text). 401/403: no valid token, or a scope it lacks;
403 too for a ``by`` the review policy refuses (``not_a_reviewer``, ``not_your_stage``,
``self_approval``). 404: an unknown id. 409: the review was decided already, ``by`` approved
it already, its approval chain moved on meanwhile (``stage_moved``), or the decision names
an action digest that is not the review's (``digest_mismatch``: a stale client). 422: a run nobody
could decide (``nobody_decides``), or a
well-formed decision this review cannot take (``approve`` on a question, an edit that does
not fit the arguments' schema, an edit where several approvals are needed, a standing
approval its gate does not allow). 503: Slack could not say who may decide.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from bot.documents import iso
from bot.errors import BotError
from crew_runtime.errors import (
    CouldNotCheck,
    EditRefused,
    InputsRefused,
    NobodyDecides,
    NotAReviewer,
    NotYourStage,
    ReviewerInputRefused,
    SelfApproval,
    TextRefused,
    UsageError,
)
from storage import (
    AlreadyApproved,
    AlreadyDecided,
    AlreadyFinal,
    CountersignError,
    DecisionNotAllowed,
    DigestMismatch,
    NotFound,
    NotWaiting,
    StageMoved,
    UnstorableValue,
)


class ApiError(BotError):
    """A request refused: answered with ``status`` and the error document (and, for a 401
    or a scope's 403, the ``WWW-Authenticate`` challenge)."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        field: str | None = None,
        *,
        challenge: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.challenge = challenge or ('Bearer realm="countersign"' if status == 401 else None)
        self.extra = extra or {}

    def body(self) -> dict[str, Any]:
        """The error document's ``error`` (a batch's item carries it as its own)."""
        return {"code": self.code, "message": self.message, "field": self.field, **self.extra}

    def response(self) -> web.Response:
        headers = {"WWW-Authenticate": self.challenge} if self.challenge else None
        return web.json_response({"error": self.body()}, status=self.status, headers=headers)


def refusal(exc: CountersignError) -> ApiError:
    """What the API answers for an error of the runtime or of storage."""
    message = " ".join(str(exc).split())
    if isinstance(exc, AlreadyDecided):
        extra = {"decided_by": exc.by, "decision": exc.kind, "decided_at": iso(exc.at)}
        return ApiError(409, "already_decided", message, extra=extra)
    if isinstance(exc, AlreadyApproved):
        return ApiError(409, "already_approved", message, "by")
    if isinstance(exc, StageMoved):
        return ApiError(409, "stage_moved", message)
    if isinstance(exc, DigestMismatch):
        extra = {"expected": exc.expected, "digest": exc.pending}
        return ApiError(409, "digest_mismatch", message, "digest", extra=extra)
    if isinstance(exc, AlreadyFinal | NotWaiting):
        return ApiError(409, "conflict", message)
    if isinstance(exc, NotFound):
        return ApiError(404, "not_found", message)
    if isinstance(exc, DecisionNotAllowed):
        return ApiError(422, "decision_not_allowed", message, "kind")
    if isinstance(exc, SelfApproval):
        return ApiError(403, "self_approval", message, "by")
    if isinstance(exc, NotYourStage):
        return ApiError(403, "not_your_stage", message, "by")
    if isinstance(exc, NotAReviewer):
        return ApiError(403, "not_a_reviewer", message, "by")
    if isinstance(exc, CouldNotCheck):
        return ApiError(503, "check_failed", "Slack did not say who may decide: try again")
    if isinstance(exc, NobodyDecides):
        return ApiError(422, "nobody_decides", message, "channel")
    if isinstance(exc, EditRefused):
        return ApiError(422, "edit_refused", message, "text")
    if isinstance(exc, InputsRefused):
        names = exc.unknown or exc.missing
        return ApiError(400, "invalid_inputs", message, f"inputs.{names[0]}" if names else "inputs")
    if isinstance(exc, ReviewerInputRefused):
        return ApiError(400, "invalid_inputs", message, f"inputs.{exc.name}")
    if isinstance(exc, TextRefused | UnstorableValue):
        return ApiError(400, "unstorable", message)
    if isinstance(exc, UsageError):  # what the review's rules refuse (checked before: shape)
        return ApiError(422, "refused", message)
    return ApiError(400, "refused", message)
