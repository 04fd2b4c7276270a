"""How the bot reads a failed Slack call: whether it may work if made again, and Slack's
own explanation of a refusal.

One classification for every caller (the outbox's dispatcher, the Home tab): no answer (a
network error, a timeout), a 429 or a 5xx, or an error code Slack gives for its own trouble
is transient, and the call is tried again later; any other error code is Slack's refusal of
this call (``not_in_channel``, ``channel_not_found``, ``is_archived``, ``invalid_blocks``,
``msg_too_long``, ``missing_scope``, ``token_revoked``, ``account_inactive``, ...), which
the same call made again gets again: it is given up on, and said.
"""

from __future__ import annotations

from slack_sdk.errors import SlackApiError

__all__ = ["TRANSIENT", "api_error", "explanation", "is_transient", "slack_said"]

# Error codes for Slack's own trouble, worth another try; any other is a refusal.
TRANSIENT = frozenset(
    {"fatal_error", "internal_error", "ratelimited", "request_timeout", "service_unavailable"}
)


def api_error(exc: SlackApiError) -> str:
    """Slack's error code, or the HTTP status of an answer that was not JSON."""
    data = exc.response.data
    error = data.get("error") if isinstance(data, dict) else None
    return str(error or f"HTTP {exc.response.status_code}")


def is_transient(exc: BaseException) -> bool:
    """Whether a failed Slack call may work if made again later."""
    if not isinstance(exc, SlackApiError):
        return True
    status = exc.response.status_code
    return status == 429 or status >= 500 or api_error(exc) in TRANSIENT


def explanation(exc: SlackApiError) -> str:
    """The error code with what Slack said of it, on one line: ``response_metadata``'s
    ``messages`` (which block broke, and how), and for ``missing_scope`` the scope
    ``needed``. Slack's words are data: newlines and other controls are escaped."""
    code = api_error(exc)
    said = slack_said(exc)
    return code if said is None else f"{code} ({said})"


def slack_said(exc: SlackApiError) -> str | None:
    """What Slack said of its refusal besides the error code, on one line (None: nothing)."""
    data = exc.response.data
    if not isinstance(data, dict):
        return None
    said: list[str] = []
    if data.get("needed"):
        said.append(f"needed {data['needed']}")
    metadata = data.get("response_metadata")
    messages = metadata.get("messages") if isinstance(metadata, dict) else None
    if isinstance(messages, list):
        said.extend(str(m) for m in messages)
    return "; ".join(_one_line(s) for s in said) if said else None


def _one_line(said: str) -> str:
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in said)[:1000]
