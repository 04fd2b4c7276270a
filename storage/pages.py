"""Reviews read page by page (the HTTP API's ``GET /reviews``): by status and crew, oldest
first, each page starting after the last review of the one before.

A page is keyed on ``(created_at, id)``, the order every listing of reviews uses, so a review
opened or decided while a client walks the pages neither shifts nor repeats the others.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import and_, or_, select

from storage.base import StoreBase
from storage.records import Review
from storage.rows import to_reviews
from storage.schema import reviews, runs
from storage.status import ReviewStatus


class ReviewPages(StoreBase):
    def review_page(
        self,
        *,
        status: ReviewStatus | None,
        crew: str | None,
        limit: int,
        after: tuple[datetime, str] | None = None,
    ) -> list[Review]:
        """At most ``limit`` reviews with that status (None: any) of that crew's runs (None:
        any crew), oldest first, after the review whose ``(created_at, id)`` is ``after``."""
        query = select(reviews).order_by(reviews.c.created_at, reviews.c.id).limit(limit)
        if status is not None:
            query = query.where(reviews.c.status == status)
        if crew is not None:
            query = query.where(reviews.c.run_id.in_(select(runs.c.id).where(runs.c.crew == crew)))
        if after is not None:
            at, review_id = after
            query = query.where(
                or_(
                    reviews.c.created_at > at,
                    and_(reviews.c.created_at == at, reviews.c.id > review_id),
                )
            )
        with self.engine.connect() as conn:
            return to_reviews(conn, conn.execute(query).all())
