"""Outbox rows delivered step by step: the steps done, and which dispatcher holds the row.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("outbox", sa.Column("progress", sa.JSON(), nullable=False, server_default="{}"))
    op.add_column("outbox", sa.Column("claim", sa.String(32)))
    op.add_column("outbox", sa.Column("claimed_until", sa.DateTime()))
    op.create_index("ix_outbox_run", "outbox", ["run_id", "sent_at"])


def downgrade() -> None:
    op.drop_index("ix_outbox_run", table_name="outbox")
    with op.batch_alter_table("outbox") as batch:
        batch.drop_column("claimed_until")
        batch.drop_column("claim")
        batch.drop_column("progress")
