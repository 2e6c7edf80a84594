"""plan rows of hybrid lanes: a configuration in bytes has no block count

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("plan_rows") as batch:
        batch.alter_column("total_capacity_blocks", existing_type=sa.BigInteger(), nullable=True)


def downgrade() -> None:
    op.execute("DELETE FROM plan_rows WHERE total_capacity_blocks IS NULL")
    with op.batch_alter_table("plan_rows") as batch:
        batch.alter_column("total_capacity_blocks", existing_type=sa.BigInteger(), nullable=False)
