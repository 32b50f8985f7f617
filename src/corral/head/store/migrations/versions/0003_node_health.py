"""nodes and GPUs carry what is wrong with them

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("nodes", schema=None) as batch_op:
        batch_op.add_column(sa.Column("health_problem", sa.Text(), nullable=False, server_default=""))
        batch_op.add_column(sa.Column("unhealthy_gpus", sa.JSON(), nullable=False, server_default="{}"))


def downgrade() -> None:
    with op.batch_alter_table("nodes", schema=None) as batch_op:
        batch_op.drop_column("unhealthy_gpus")
        batch_op.drop_column("health_problem")
