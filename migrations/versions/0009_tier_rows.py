"""tier splits and tier plans: one row per lane x category x tier of a split, one per
configuration (the best, then the frontier) of a plan's lane

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tier_rows",
        sa.Column("job_id", sa.String(length=32), nullable=False),
        sa.Column("lane", sa.String(length=255), nullable=False),
        sa.Column("category", sa.String(length=255), nullable=False),
        sa.Column("tier", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("capacity_blocks", sa.BigInteger(), nullable=True),
        sa.Column("requests", sa.BigInteger(), nullable=False),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("hit_blocks", sa.BigInteger(), nullable=False),
        sa.Column("hit_tokens", sa.BigInteger(), nullable=False),
        sa.Column("hit_rate", sa.Float(), nullable=False),
        sa.Column("cumulative_hit_rate", sa.Float(), nullable=False),
        sa.Column("bytes_loaded", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("job_id", "lane", "category", "tier"),
    )
    op.create_table(
        "plan_rows",
        sa.Column("job_id", sa.String(length=32), nullable=False),
        sa.Column("lane", sa.String(length=255), nullable=False),
        sa.Column("rank", sa.Integer(), nullable=False),
        sa.Column("tiers", sa.JSON(), nullable=False),
        sa.Column("total_capacity_blocks", sa.BigInteger(), nullable=False),
        sa.Column("cost_per_hour", sa.Float(), nullable=False),
        sa.Column("hit_rate", sa.Float(), nullable=False),
        sa.Column("prefill_s", sa.JSON(), nullable=True),
        sa.Column("value", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("job_id", "lane", "rank"),
    )


def downgrade() -> None:
    op.drop_table("plan_rows")
    op.drop_table("tier_rows")
