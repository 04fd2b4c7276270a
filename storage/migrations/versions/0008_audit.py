"""The audit trail of pruned runs: one row per decision, copied before retention deletes it.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "audit",
        sa.Column("review_id", sa.String(32), nullable=False),
        sa.Column("run_id", sa.String(32), nullable=False),
        sa.Column("crew", sa.String(100), nullable=False),
        sa.Column("review_kind", sa.String(16), nullable=False),
        sa.Column("decision", sa.String(16), nullable=False),
        sa.Column("decided_by", sa.String(64), nullable=False),
        sa.Column("decided_at", sa.DateTime(), nullable=False),
        sa.Column("feedback", sa.Text()),
        sa.Column("proposed_args", sa.JSON()),
        sa.Column("approved_args", sa.JSON()),
        sa.Column("executed_args", sa.JSON()),
        sa.Column("channel", sa.String(64)),
        sa.Column("thread_ts", sa.String(32)),
        sa.PrimaryKeyConstraint("review_id", name="pk_audit"),
    )
    op.create_index("ix_audit_decided", "audit", ["decided_at"])


def downgrade() -> None:
    op.drop_index("ix_audit_decided", table_name="audit")
    op.drop_table("audit")
