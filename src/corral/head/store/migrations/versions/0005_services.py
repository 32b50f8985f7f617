"""services and their replicas

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
        "services",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("user", sa.String(length=64), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("desired", sa.Integer(), nullable=False),
        sa.Column("autoscale_state", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )
    op.create_table(
        "service_replicas",
        sa.Column("job_id", sa.String(length=32), nullable=False),
        sa.Column("service", sa.String(length=64), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("ready", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("draining_since", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"]),
        sa.PrimaryKeyConstraint("job_id"),
    )
    with op.batch_alter_table("service_replicas", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_service_replicas_service"), ["service"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("service_replicas", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_service_replicas_service"))
    op.drop_table("service_replicas")
    op.drop_table("services")
