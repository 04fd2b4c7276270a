"""Delegation while away: a person's reviews go to their delegate until a date.

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "delegations",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("person", sa.String(64), nullable=False),
        sa.Column("delegate", sa.String(64), nullable=False),
        sa.Column("until", sa.DateTime(), nullable=False),
        sa.Column("created_by", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("ended_by", sa.String(64), nullable=True),
        sa.Column("ended_at", sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_delegations"),
    )
    op.create_index(
        "uq_delegations_person",
        "delegations",
        ["person"],
        unique=True,
        sqlite_where=sa.text("ended_at IS NULL"),
        postgresql_where=sa.text("ended_at IS NULL"),
    )


def downgrade() -> None:
    op.drop_index("uq_delegations_person", table_name="delegations")
    op.drop_table("delegations")
