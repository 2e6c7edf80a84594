"""query capacities with units: a summary's capacity as recorded, and no GiB for blocks or tokens

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("query_summaries") as batch:
        batch.add_column(sa.Column("capacity", sa.String(length=64), nullable=False, server_default=""))
        batch.alter_column("capacity_gb", existing_type=sa.Float(), nullable=True)


def downgrade() -> None:
    op.execute("DELETE FROM query_summaries WHERE capacity_gb IS NULL")
    with op.batch_alter_table("query_summaries") as batch:
        batch.alter_column("capacity_gb", existing_type=sa.Float(), nullable=False)
        batch.drop_column("capacity")
