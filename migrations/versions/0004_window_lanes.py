"""window sizings: one row per lane simulated at the sizing's capacity

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "window_lanes",
        sa.Column("job_id", sa.String(length=32), nullable=False),
        sa.Column("lane", sa.Integer(), nullable=False),
        sa.Column("instance_id", sa.String(length=255), nullable=False),
        sa.Column("capacity_blocks", sa.BigInteger(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("requests", sa.BigInteger(), nullable=False),
        sa.Column("evictions", sa.BigInteger(), nullable=False),
        sa.Column("evicted", sa.BigInteger(), nullable=False),
        sa.Column("no_match", sa.BigInteger(), nullable=False),
        sa.Column("delay_count", sa.BigInteger(), nullable=False),
        sa.Column("delay_p50", sa.Float(), nullable=True),
        sa.Column("delay_p90", sa.Float(), nullable=True),
        sa.Column("delay_p99", sa.Float(), nullable=True),
        sa.Column("delay_p999", sa.Float(), nullable=True),
        sa.Column("delay_max", sa.Float(), nullable=True),
        sa.Column("window_s", sa.Float(), nullable=True),
        sa.Column("peak_evictions_per_s", sa.BigInteger(), nullable=True),
        sa.Column("memory_bytes", sa.Float(), nullable=True),
        sa.Column("result", sa.JSON(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("worker", sa.String(length=255), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("job_id", "lane"),
    )


def downgrade() -> None:
    op.drop_table("window_lanes")
