"""Initial schema: runs, reviews, decisions, journal, outbox.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("crew", sa.String(100), nullable=False),
        sa.Column("inputs", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("output", sa.Text()),
        sa.Column("error", sa.Text()),
        sa.Column("divergence", sa.Text()),
        sa.Column("started_by", sa.String(64)),
        sa.Column("channel", sa.String(64)),
        sa.Column("thread_ts", sa.String(32)),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("lease_owner", sa.String(64)),
        sa.Column("lease_expires", sa.DateTime()),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_runs"),
    )
    op.create_index("ix_runs_status_updated", "runs", ["status", "updated_at"])

    op.create_table(
        "reviews",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("run_id", sa.String(32), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("stream", sa.String(200), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("prompt", sa.Text(), nullable=False),
        sa.Column("details", sa.JSON(), nullable=False),
        sa.Column("journal_pos", sa.Integer(), nullable=False),
        sa.Column("channel", sa.String(64)),
        sa.Column("message_ts", sa.String(32)),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("decided_at", sa.DateTime()),
        sa.Column("remind_at", sa.DateTime()),
        sa.Column("escalate_at", sa.DateTime()),
        sa.Column("expires_at", sa.DateTime()),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name="fk_reviews_run_id_runs", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_reviews"),
    )
    op.create_index("ix_reviews_run", "reviews", ["run_id"])
    op.create_index("ix_reviews_status", "reviews", ["status"])
    op.create_index(
        "uq_reviews_point",
        "reviews",
        ["run_id", "kind", "stream", "seq"],
        unique=True,
        sqlite_where=sa.text("status != 'superseded'"),
        postgresql_where=sa.text("status != 'superseded'"),
    )

    op.create_table(
        "decisions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("review_id", sa.String(32), nullable=False),
        sa.Column("run_id", sa.String(32), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("text", sa.Text()),
        sa.Column("original", sa.Text()),
        sa.Column("details", sa.JSON(), nullable=False),
        sa.Column("decided_by", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["review_id"],
            ["reviews.id"],
            name="fk_decisions_review_id_reviews",
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name="fk_decisions_run_id_runs", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_decisions"),
        sa.UniqueConstraint("review_id", name="uq_decisions_review_id"),
    )
    op.create_index("ix_decisions_run", "decisions", ["run_id"])

    op.create_table(
        "journal",
        sa.Column("run_id", sa.String(32), nullable=False),
        sa.Column("pos", sa.Integer(), nullable=False),
        sa.Column("stream", sa.String(200), nullable=False),
        sa.Column("kind", sa.String(8), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("prompt_hash", sa.String(64)),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name="fk_journal_run_id_runs", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_id", "pos", name="pk_journal"),
        sa.UniqueConstraint("run_id", "stream", "kind", "seq", name="uq_journal_turn"),
    )

    op.create_table(
        "outbox",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.String(32), nullable=False),
        sa.Column("review_id", sa.String(32)),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.Text()),
        sa.Column("sent_at", sa.DateTime()),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name="fk_outbox_run_id_runs", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_outbox"),
    )
    op.create_index("ix_outbox_due", "outbox", ["sent_at", "next_attempt_at"])


def downgrade() -> None:
    for table in ("outbox", "journal", "decisions", "reviews", "runs"):
        op.drop_table(table)
