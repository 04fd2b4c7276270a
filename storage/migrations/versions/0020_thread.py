"""The thread: a run's live progress and where its message is; what an edit of a draft
changed, kept in the audit trail of a pruned run.

Revision ID: 0020
Revises: 0019
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("audit", sa.Column("edit_diff", sa.Text(), nullable=True))
    op.create_table(
        "run_progress",
        sa.Column("run_id", sa.String(32), nullable=False),
        sa.Column("state", sa.JSON(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("channel", sa.String(64), nullable=True),
        sa.Column("message_ts", sa.String(32), nullable=True),
        sa.Column("shown_version", sa.Integer(), nullable=False),
        sa.Column("shown_at", sa.DateTime(), nullable=True),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name="fk_run_progress_run_id_runs", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_id", name="pk_run_progress"),
    )


def downgrade() -> None:
    op.drop_table("run_progress")
    op.drop_column("audit", "edit_diff")
