"""Approvals of reviews that need several reviewers' yes, one row per reviewer; the audit
trail's record of who had approved.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "approvals",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column(
            "review_id",
            sa.String(32),
            sa.ForeignKey("reviews.id", ondelete="CASCADE", name="fk_approvals_review_id_reviews"),
            nullable=False,
        ),
        sa.Column(
            "run_id",
            sa.String(32),
            sa.ForeignKey("runs.id", ondelete="CASCADE", name="fk_approvals_run_id_runs"),
            nullable=False,
        ),
        sa.Column("decided_by", sa.String(64), nullable=False),
        sa.Column("details", sa.JSON(), nullable=False),
        sa.Column("request_key", sa.String(200), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_approvals"),
        sa.UniqueConstraint("review_id", "decided_by", name="uq_approvals_reviewer"),
    )
    op.create_index("ix_approvals_run", "approvals", ["run_id"])
    # The audit trail names who had approved a review that needed several approvals.
    op.add_column("audit", sa.Column("approved_by", sa.JSON(), nullable=True))


def downgrade() -> None:
    op.drop_column("audit", "approved_by")
    op.drop_index("ix_approvals_run", table_name="approvals")
    op.drop_table("approvals")
