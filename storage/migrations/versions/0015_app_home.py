"""The app's Home tab: who opened it and the refresh each one's waits for; the indexes its
view reads by (a person's runs, a person's decisions).

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "home_tabs",
        sa.Column("user_id", sa.String(64), nullable=False),
        sa.Column("opened_at", sa.DateTime(), nullable=False),
        sa.Column("wanted", sa.Integer(), nullable=False),
        sa.Column("published", sa.Integer(), nullable=False),
        sa.Column("due_at", sa.DateTime(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("published_at", sa.DateTime(), nullable=True),
        sa.Column("claim", sa.String(32), nullable=True),
        sa.Column("claimed_until", sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint("user_id", name="pk_home_tabs"),
    )
    op.create_index("ix_home_tabs_due", "home_tabs", ["due_at"])
    op.create_index("ix_runs_started_by", "runs", ["started_by", "status"])
    op.create_index("ix_decisions_decided_by", "decisions", ["decided_by", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_decisions_decided_by", table_name="decisions")
    op.drop_index("ix_runs_started_by", table_name="runs")
    op.drop_index("ix_home_tabs_due", table_name="home_tabs")
    op.drop_table("home_tabs")
