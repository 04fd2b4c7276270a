"""What a rule raised for a review: its own reviewers or approval chain and its quorum, as
JSON (``storage.records.Raised``), so the review policy answers from the review whatever the
rules say since (``crew_runtime.rules``).

Revision ID: 0024
Revises: 0023
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("reviews", sa.Column("reviewers", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("reviews") as batch:
        batch.drop_column("reviewers")
