"""Standing approvals in Slack and in the audit trail: where a standing approval's thread
message is (to edit it when it is revoked), and the details of a review event (a standing
approval's tool and argument values).

Revision ID: 0017
Revises: 0016
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("standing_approvals", sa.Column("channel", sa.String(64), nullable=True))
    op.add_column("standing_approvals", sa.Column("message_ts", sa.String(32), nullable=True))
    op.add_column("review_events", sa.Column("details", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("review_events") as batch:
        batch.drop_column("details")
    with op.batch_alter_table("standing_approvals") as batch:
        batch.drop_column("message_ts")
        batch.drop_column("channel")
