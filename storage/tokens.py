"""The Store's API tokens: made with a name and the hash of their secret, read to check a
request's bearer token, revoked by a compare-and-set on ``revoked_at``.

The secret never reaches the database: the caller (``bot.tokens``) hashes it and compares
hashes. A token's id is the public part of its secret, so finding it needs no secret.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from sqlalchemy import Row, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from storage.base import StoreBase
from storage.errors import TokenExists, TokenNotFound, TokenRevoked
from storage.records import ApiToken
from storage.schema import api_tokens

TOUCH_EVERY = timedelta(minutes=1)
"""How stale ``last_used_at`` may be: a token used all the time is written once a minute."""


class TokenStore(StoreBase):
    """Bearer tokens of the HTTP API."""

    def create_token(
        self, token_id: str, name: str, secret_hash: str, scopes: Sequence[str], *, by: str
    ) -> ApiToken:
        """Record a new token.

        Raises:
            TokenExists: a token of that name exists, revoked or not (names are not reused).
        """
        try:
            with self._tx() as conn:
                row = conn.execute(
                    insert(api_tokens)
                    .values(
                        id=token_id,
                        name=name,
                        secret_hash=secret_hash,
                        scopes=list(scopes),
                        created_by=by,
                        created_at=self.clock(),
                    )
                    .returning(*api_tokens.c)
                ).one()
        except IntegrityError:
            raise TokenExists(name) from None
        return _to_token(row)

    def tokens(self) -> list[ApiToken]:
        """Every token, revoked ones included, oldest first."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(api_tokens).order_by(api_tokens.c.created_at, api_tokens.c.name)
            ).all()
        return [_to_token(row) for row in rows]

    def find_token(self, token_id: str) -> ApiToken | None:
        """The token with that id, revoked or not; None when there is none."""
        with self.engine.connect() as conn:
            row = conn.execute(select(api_tokens).where(api_tokens.c.id == token_id)).first()
        return None if row is None else _to_token(row)

    def touch_token(self, token_id: str) -> None:
        """Note that the token was used now, unless it was noted less than
        :data:`TOUCH_EVERY` ago (a busy client costs a write a minute, not one a request)."""
        now = self.clock()
        column = api_tokens.c.last_used_at
        with self._tx() as conn:
            conn.execute(
                update(api_tokens)
                .where(
                    api_tokens.c.id == token_id,
                    or_(column.is_(None), column < now - TOUCH_EVERY),
                )
                .values(last_used_at=now)
            )

    def revoke_token(self, name: str, *, by: str) -> ApiToken:
        """Revoke a token exactly once: from the commit on, it opens nothing.

        Raises:
            TokenNotFound: no token of that name.
            TokenRevoked: somebody revoked it first; the exception says who and when.
        """
        with self._tx() as conn:
            moved = conn.execute(
                update(api_tokens)
                .where(api_tokens.c.name == name, api_tokens.c.revoked_at.is_(None))
                .values(revoked_by=by, revoked_at=self.clock())
            ).rowcount
            row = conn.execute(select(api_tokens).where(api_tokens.c.name == name)).first()
        if row is None:
            raise TokenNotFound(name)
        token = _to_token(row)
        if moved != 1:
            assert token.revoked_by is not None and token.revoked_at is not None
            raise TokenRevoked(name, token.revoked_by, token.revoked_at)
        return token


def _to_token(row: Row[Any]) -> ApiToken:
    return ApiToken(
        id=row.id,
        name=row.name,
        secret_hash=row.secret_hash,
        scopes=tuple(row.scopes),
        created_by=row.created_by,
        created_at=row.created_at,
        revoked_by=row.revoked_by,
        revoked_at=row.revoked_at,
        last_used_at=row.last_used_at,
    )
