"""What a review's deadline does: expire it (as before) or approve it (``on_expire``).

Revision ID: 0011
Revises: 0010 (the lead re-chains it after 0011 at merge)
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("reviews", sa.Column("on_expire", sa.String(16), nullable=True))


def downgrade() -> None:
    op.drop_column("reviews", "on_expire")
