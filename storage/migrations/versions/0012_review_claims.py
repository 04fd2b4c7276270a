"""Claim and reassign a review: who is handling it, and the events for the audit trail.

Revision ID: 0012
Revises: 0011 (the lead re-chains it at merge)
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("reviews", sa.Column("claimed_by", sa.String(64), nullable=True))
    op.add_column("reviews", sa.Column("claimed_at", sa.DateTime(), nullable=True))
    op.create_table(
        "review_events",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("review_id", sa.String(32), nullable=False),
        sa.Column("run_id", sa.String(32), nullable=False),
        sa.Column("crew", sa.String(100), nullable=False),
        sa.Column("review_kind", sa.String(16), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("by", sa.String(64), nullable=False),
        sa.Column("to", sa.String(64), nullable=False),
        sa.Column("request_key", sa.String(200), nullable=True),
        sa.Column("at", sa.DateTime(), nullable=False),
        sa.Column("channel", sa.String(64), nullable=True),
        sa.Column("thread_ts", sa.String(32), nullable=True),
        sa.UniqueConstraint("review_id", "request_key", name="uq_review_events_request"),
    )
    op.create_index("ix_review_events_at", "review_events", ["at"])


def downgrade() -> None:
    op.drop_index("ix_review_events_at", table_name="review_events")
    op.drop_table("review_events")
    with op.batch_alter_table("reviews") as batch:
        batch.drop_column("claimed_at")
        batch.drop_column("claimed_by")
