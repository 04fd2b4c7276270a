"""The Store's keyed API requests: what the first request with an ``Idempotency-Key`` asked
(a digest of its route and body), so that the key sent again with another request can be
told apart from a retry of the first (``bot.hosting.api``)."""

from __future__ import annotations

from sqlalchemy import insert, select
from sqlalchemy.exc import IntegrityError

from storage.base import StoreBase
from storage.schema import api_requests


class RequestStore(StoreBase):
    """Keyed requests of the HTTP API."""

    def same_request(self, request_key: str, fingerprint: str) -> bool:
        """Whether ``request_key`` is new or was first sent with ``fingerprint`` (the
        first one to record it wins: a compare-and-set on the key)."""
        for _ in range(2):
            with self._tx() as conn:
                first = conn.execute(
                    select(api_requests.c.fingerprint).where(
                        api_requests.c.request_key == request_key
                    )
                ).scalar()
                if first is not None:
                    return bool(first == fingerprint)
            try:
                with self._tx() as conn:
                    conn.execute(
                        insert(api_requests).values(
                            request_key=request_key,
                            fingerprint=fingerprint,
                            created_at=self.clock(),
                        )
                    )
                return True
            except IntegrityError:  # another request with the key was first: read it
                continue
        return False
