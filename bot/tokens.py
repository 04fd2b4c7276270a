"""The HTTP API's bearer tokens: made, checked and revoked (``countersign tokens``, and the
API's authentication in ``bot.hosting.api``).

A token reads ``cs_<id>_<secret>``: ``cs_`` says whose it is (a secret scanner can look for
it), the id finds its row without the secret, and the secret is 32 random bytes. Only the
SHA-256 of the whole token is stored; a request's token is hashed and compared with
``hmac.compare_digest``, so the time a refusal takes says nothing about the hash.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable
from enum import StrEnum

from bot.errors import BotError
from storage import PERSON_LENGTH, ApiToken, Store
from storage.tokens import TOUCH_EVERY

__all__ = ["PREFIX", "Scope", "TokenRefused", "Tokens", "parse_scopes"]

PREFIX = "cs_"
_TOKEN = re.compile(r"cs_([0-9a-f]{16})_[A-Za-z0-9_-]{43}")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,59}")


class Scope(StrEnum):
    """What a token lets its holder do."""

    START = "start"  # POST /runs
    READ = "read"  # GET /runs/{id}, GET /reviews
    DECIDE = "decide"  # POST /reviews/{id}/decision


class TokenRefused(BotError):
    """A token's name or scopes that cannot be: the message says which and why."""


def parse_scopes(text: str) -> tuple[Scope, ...]:
    """``start,read`` → the scopes, each once, in the order of :class:`Scope`.

    Raises:
        TokenRefused: no scope, or a word that is not one.
    """
    words = [word.strip() for word in text.split(",") if word.strip()]
    known = [scope.value for scope in Scope]
    unknown = [word for word in words if word not in known]
    if unknown or not words:
        raise TokenRefused(
            f"unknown scope(s) {', '.join(map(repr, unknown))}: use {','.join(known)}"
            if unknown
            else f"a token needs at least one scope: {','.join(known)}"
        )
    return tuple(scope for scope in Scope if scope.value in words)


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class Tokens:
    """Tokens on one store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def create(self, name: str, scopes: Iterable[Scope], *, by: str) -> tuple[ApiToken, str]:
        """A new token and its secret, which is shown now and never again.

        Raises:
            TokenRefused: a name that is not letters, digits, ``.``, ``_`` and ``-``, or no
                scope.
            TokenExists: from storage: a token of that name exists.
        """
        if not _NAME.fullmatch(name):
            raise TokenRefused(
                f"token name {name!r}: use up to 60 letters, digits, '.', '_' and '-', "
                "starting with a letter or digit"
            )
        if not by.strip() or len(by.strip()) > PERSON_LENGTH:
            raise TokenRefused(
                f"who makes the token (--by) must be 1 to {PERSON_LENGTH} characters"
            )
        given = set(scopes)
        if not given:
            raise TokenRefused("a token needs at least one scope")
        token_id = secrets.token_hex(8)
        secret = f"{PREFIX}{token_id}_{secrets.token_urlsafe(32)}"
        made = self.store.create_token(
            token_id, name, _digest(secret), [s.value for s in Scope if s in given], by=by.strip()
        )
        return made, secret

    def authenticate(self, secret: str) -> ApiToken | None:
        """The token ``secret`` is, when it is one and not revoked; None otherwise."""
        found = _TOKEN.fullmatch(secret)
        if found is None:
            return None
        token = self.store.find_token(found.group(1))
        if token is None or not hmac.compare_digest(token.secret_hash, _digest(secret)):
            return None
        if token.revoked_at is not None:
            return None
        used = token.last_used_at
        if used is None or self.store.clock() - used >= TOUCH_EVERY:  # else no write at all
            self.store.touch_token(token.id)
        return token
