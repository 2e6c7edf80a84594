"""routing what-ifs: one row per router x asked per-replica capacity

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "route_rows",
        sa.Column("job_id", sa.String(length=32), nullable=False),
        sa.Column("router", sa.String(length=32), nullable=False),
        sa.Column("slot", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("capacity", sa.String(length=64), nullable=False),
        sa.Column("capacity_blocks", sa.BigInteger(), nullable=True),
        sa.Column("hit_rate", sa.Float(), nullable=False),
        sa.Column("hit_tokens", sa.BigInteger(), nullable=False),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("max_over_mean", sa.Float(), nullable=False),
        sa.Column("p99_over_mean", sa.Float(), nullable=False),
        sa.Column("vs_round_robin", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("job_id", "router", "slot"),
    )


def downgrade() -> None:
    op.drop_table("route_rows")
