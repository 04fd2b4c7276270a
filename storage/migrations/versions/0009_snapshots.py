"""Snapshots of suspended runs, read by a resume instead of replaying the whole journal.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "snapshots",
        sa.Column(
            "run_id",
            sa.String(32),
            sa.ForeignKey("runs.id", ondelete="CASCADE", name="fk_snapshots_run_id_runs"),
            nullable=False,
        ),
        sa.Column("pos", sa.Integer(), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("run_id", name="pk_snapshots"),
    )


def downgrade() -> None:
    op.drop_table("snapshots")
