"""the GPU prices in force over time, so that cost is counted at the prices of when GPUs were held

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "gpu_prices",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("effective_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("prices", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("gpu_prices", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_gpu_prices_effective_at"), ["effective_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("gpu_prices", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_gpu_prices_effective_at"))
    op.drop_table("gpu_prices")
