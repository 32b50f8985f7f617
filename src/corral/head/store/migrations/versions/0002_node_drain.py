"""nodes can be drained by an admin

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("nodes", schema=None) as batch_op:
        batch_op.add_column(sa.Column("drained", sa.Boolean(), nullable=False, server_default=sa.false()))
        batch_op.add_column(sa.Column("drain_reason", sa.Text(), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("nodes", schema=None) as batch_op:
        batch_op.drop_column("drain_reason")
        batch_op.drop_column("drained")
