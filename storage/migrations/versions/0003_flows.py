"""CrewAI Flows: their state and pending human feedback, next to the runs.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "flow_states",
        sa.Column("flow_uuid", sa.String(64), nullable=False),
        sa.Column("method_name", sa.String(200), nullable=False),
        sa.Column("state", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("flow_uuid", name="pk_flow_states"),
    )
    op.create_table(
        "flow_pending",
        sa.Column("flow_uuid", sa.String(64), nullable=False),
        sa.Column("context", sa.JSON(), nullable=False),
        sa.Column("state", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("flow_uuid", name="pk_flow_pending"),
    )


def downgrade() -> None:
    op.drop_table("flow_pending")
    op.drop_table("flow_states")
