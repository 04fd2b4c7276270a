"""Approval chains: where a staged review stands, the stage of each approval, and the stages
in the audit trail's kept records.

Revision ID: 0019
Revises: 0018
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("reviews", sa.Column("stage", sa.Integer(), nullable=False, server_default="0"))
    op.add_column("approvals", sa.Column("stage", sa.String(100), nullable=True))
    op.add_column("audit", sa.Column("approval_stages", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("audit") as batch:
        batch.drop_column("approval_stages")
    with op.batch_alter_table("approvals") as batch:
        batch.drop_column("stage")
    with op.batch_alter_table("reviews") as batch:
        batch.drop_column("stage")
