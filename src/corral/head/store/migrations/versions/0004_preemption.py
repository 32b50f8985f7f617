"""jobs remember their last checkpoint and preemptions; stopping tasks carry their grace period

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
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("last_checkpoint_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("preemptions", sa.Integer(), nullable=False, server_default="0"))
    with op.batch_alter_table("tasks", schema=None) as batch_op:
        batch_op.add_column(sa.Column("stop_grace_s", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("tasks", schema=None) as batch_op:
        batch_op.drop_column("stop_grace_s")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("preemptions")
        batch_op.drop_column("last_checkpoint_at")
