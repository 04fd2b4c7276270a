"""Request signing as Slack does it, and the ways a test can break it on purpose.

Why our own HMAC and not slack_sdk's ``SignatureVerifier``: the stand-in plays Slack, so
it must produce the signature independently of the library the bot uses to check it;
a shared bug would otherwise pass unnoticed. The scheme (Slack's "Verifying requests"):
``v0=`` + hex(HMAC-SHA256(secret, ``"v0:{timestamp}:{raw body}"``)).
"""

from __future__ import annotations

import enum
import hashlib
import hmac

__all__ = ["Tamper", "sign", "signed_headers"]

STALE_SECONDS = 301  # Bolt refuses timestamps more than 300 s away from its clock


class Tamper(enum.Enum):
    """How to spoil a request's signature, for security tests."""

    NONE = "none"
    BAD_SIGNATURE = "bad_signature"  # signed with another secret
    STALE_TIMESTAMP = "stale_timestamp"  # correctly signed, but 301 s old
    NO_SIGNATURE = "no_signature"  # neither signature nor timestamp header


def sign(secret: str, timestamp: int, body: str) -> str:
    """The ``X-Slack-Signature`` value for ``body`` sent at ``timestamp``."""
    base = f"v0:{timestamp}:{body}".encode()
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def signed_headers(secret: str, now: float, body: str, tamper: Tamper) -> dict[str, str]:
    """Slack's two signing headers for ``body``, spoiled as ``tamper`` says."""
    if tamper is Tamper.NO_SIGNATURE:
        return {}
    timestamp = int(now) - (STALE_SECONDS if tamper is Tamper.STALE_TIMESTAMP else 0)
    key = secret + "-wrong" if tamper is Tamper.BAD_SIGNATURE else secret
    return {
        "X-Slack-Request-Timestamp": str(timestamp),
        "X-Slack-Signature": sign(key, timestamp, body),
    }
