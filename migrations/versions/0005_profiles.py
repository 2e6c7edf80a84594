"""workload profiles: one row per lane (state and its profile.json entry) and summary rows per
lane x request category

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "profile_lanes",
        sa.Column("job_id", sa.String(length=32), nullable=False),
        sa.Column("lane", sa.Integer(), nullable=False),
        sa.Column("instance_id", sa.String(length=255), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("requests", sa.BigInteger(), nullable=False),
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
    op.create_table(
        "profile_rows",
        sa.Column("job_id", sa.String(length=32), nullable=False),
        sa.Column("lane", sa.Integer(), nullable=False),
        sa.Column("row", sa.Integer(), nullable=False),
        sa.Column("instance_id", sa.String(length=255), nullable=False),
        sa.Column("category", sa.String(length=255), nullable=True),
        sa.Column("requests", sa.BigInteger(), nullable=False),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("hit_tokens", sa.BigInteger(), nullable=False),
        sa.Column("ideal_hit_ratio", sa.Float(), nullable=False),
        sa.Column("hit_token_share", sa.Float(), nullable=False),
        sa.Column("reuses", sa.BigInteger(), nullable=False),
        sa.Column("reuse_p50_s", sa.Float(), nullable=True),
        sa.Column("reuse_p90_s", sa.Float(), nullable=True),
        sa.Column("reuse_p99_s", sa.Float(), nullable=True),
        sa.Column("exp_rate_per_s", sa.Float(), nullable=True),
        sa.Column("ks", sa.Float(), nullable=True),
        sa.Column("keys", sa.BigInteger(), nullable=False),
        sa.Column("lifespan_p50_s", sa.Float(), nullable=True),
        sa.Column("never_reused_share", sa.Float(), nullable=False),
        sa.Column("keys_for_90", sa.Float(), nullable=False),
        sa.Column("requests_for_90", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("job_id", "lane", "row"),
    )


def downgrade() -> None:
    op.drop_table("profile_rows")
    op.drop_table("profile_lanes")
