"""Indexes that a million runs ask for (bench/scale.py; figures in docs/benchmarks.md).

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

PENDING = sa.text("status = 'pending'")
UNSENT = sa.text("sent_at IS NULL")


def upgrade() -> None:
    # One person's pending reviews: the oldest pending first, their runs' crews checked on
    # the way, instead of sorting all 100,000 pending reviews for each /crew pending.
    op.create_index(
        "ix_reviews_pending",
        "reviews",
        ["created_at", "id"],
        sqlite_where=PENDING,
        postgresql_where=PENDING,
    )
    # Counting a crew's pending reviews: its waiting runs' ids and their pending reviews,
    # both read from indexes alone (a merge join, 13 ms for 5,000 of 100,000 where the
    # heap took 65). Also /metrics' counts by crew and status.
    op.create_index(
        "ix_reviews_pending_run",
        "reviews",
        ["run_id"],
        sqlite_where=PENDING,
        postgresql_where=PENDING,
    )
    op.create_index("ix_runs_crew_status", "runs", ["crew", "status", "id"])
    # The dispatcher's due rows, oldest first: PostgreSQL walked the primary key past two
    # million sent rows (800 ms a call) to find the few unsent ones.
    op.create_index(
        "ix_outbox_unsent", "outbox", ["id"], sqlite_where=UNSENT, postgresql_where=UNSENT
    )
    # An audit export reads decisions by time: without it, every export scans them all.
    op.create_index("ix_decisions_created", "decisions", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_decisions_created", table_name="decisions")
    op.drop_index("ix_outbox_unsent", table_name="outbox")
    op.drop_index("ix_runs_crew_status", table_name="runs")
    op.drop_index("ix_reviews_pending_run", table_name="reviews")
    op.drop_index("ix_reviews_pending", table_name="reviews")
