"""Counts kept as they change (storage.tallies): a /metrics scrape reads a few rows instead of
counting a million runs.

Revision ID: 0022
Revises: 0021
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

PENDING = sa.text("status = 'pending'")

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tallies",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("crew", sa.String(100), nullable=False),
        sa.Column("what", sa.String(16), nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_tallies"),
    )
    # What there is already, counted once: the runs by crew and status, the pending reviews
    # by crew (the name storage.tallies gives them).
    op.execute(
        "INSERT INTO tallies (crew, what, n) SELECT crew, status, count(*) FROM runs "
        "GROUP BY crew, status"
    )
    op.execute(
        "INSERT INTO tallies (crew, what, n) SELECT runs.crew, 'pending_review', count(*) "
        "FROM reviews JOIN runs ON runs.id = reviews.run_id WHERE reviews.status = 'pending' "
        "GROUP BY runs.crew"
    )
    # The last week's pending reviews by crew (/metrics) read from the index alone.
    _pending_index(["created_at", "id", "run_id"])


def downgrade() -> None:
    _pending_index(["created_at", "id"])
    op.drop_table("tallies")


def _pending_index(columns: list[str]) -> None:
    op.drop_index("ix_reviews_pending", table_name="reviews")
    op.create_index(
        "ix_reviews_pending", "reviews", columns, sqlite_where=PENDING, postgresql_where=PENDING
    )
