"""Standing approvals: an approval of a gated tool's call that also approves the tool's later
calls in the run with the same values of named arguments, until revoked.

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "standing_approvals",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column(
            "run_id",
            sa.String(32),
            sa.ForeignKey("runs.id", ondelete="CASCADE", name="fk_standing_approvals_run_id_runs"),
            nullable=False,
        ),
        sa.Column(
            "review_id",
            sa.String(32),
            sa.ForeignKey(
                "reviews.id", ondelete="CASCADE", name="fk_standing_approvals_review_id_reviews"
            ),
            nullable=False,
        ),
        sa.Column("tool", sa.String(200), nullable=False),
        sa.Column("match", sa.JSON(), nullable=False),
        sa.Column("granted_by", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("revoked_by", sa.String(64), nullable=True),
        sa.Column("revoked_at", sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_standing_approvals"),
    )
    op.create_index("ix_standing_approvals_run", "standing_approvals", ["run_id", "tool"])


def downgrade() -> None:
    op.drop_index("ix_standing_approvals_run", table_name="standing_approvals")
    op.drop_table("standing_approvals")
