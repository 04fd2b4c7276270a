"""Action digests: each review keeps the digest of what it proposes, and the audit trail the
digest a decision covered and the rule that made it (``crew_runtime.digests``, ``rules``).

Revision ID: 0023
Revises: 0022
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("reviews", sa.Column("digest", sa.String(64), nullable=True))
    op.add_column("audit", sa.Column("digest", sa.String(64), nullable=True))
    op.add_column("audit", sa.Column("rule", sa.String(100), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("audit") as batch:
        batch.drop_column("rule")
        batch.drop_column("digest")
    with op.batch_alter_table("reviews") as batch:
        batch.drop_column("digest")
