"""Slack: deduplication of delivered events, and finding a run by its thread.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "slack_events",
        sa.Column("key", sa.String(200), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("key", name="pk_slack_events"),
    )
    op.create_index("ix_slack_events_created", "slack_events", ["created_at"])
    op.create_index("ix_runs_thread", "runs", ["channel", "thread_ts"])


def downgrade() -> None:
    op.drop_index("ix_runs_thread", table_name="runs")
    op.drop_table("slack_events")
