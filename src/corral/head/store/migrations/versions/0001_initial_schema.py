"""initial schema

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:

    op.create_table(
        "events",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("ts", sa.DateTime(timezone=True), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("job_id", sa.String(length=32), nullable=True),
        sa.Column("node", sa.String(length=64), nullable=True),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_events_job_id"), ["job_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_events_ts"), ["ts"], unique=False)

    op.create_table(
        "jobs",
        sa.Column("seq", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("user", sa.String(length=64), nullable=False),
        sa.Column("team", sa.String(length=64), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("nodes", sa.Integer(), nullable=False),
        sa.Column("gpus_per_node", sa.Float(), nullable=False),
        sa.Column("gpu_types", sa.JSON(), nullable=False),
        sa.Column("cpus", sa.Float(), nullable=True),
        sa.Column("memory_mb", sa.Integer(), nullable=True),
        sa.Column("submitted_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("restarts", sa.Integer(), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("idempotency_key", sa.String(length=200), nullable=True),
        sa.PrimaryKeyConstraint("seq"),
        sa.UniqueConstraint("id"),
        sa.UniqueConstraint("user", "idempotency_key", name="uq_jobs_user_idempotency_key"),
    )
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.create_index("ix_jobs_state_priority_seq", ["state", "priority", "seq"], unique=False)

    op.create_table(
        "meta",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("key"),
    )
    op.create_table(
        "nodes",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("gpus", sa.JSON(), nullable=False),
        sa.Column("cpus", sa.Float(), nullable=False),
        sa.Column("memory_mb", sa.Integer(), nullable=False),
        sa.Column("address", sa.String(length=255), nullable=False),
        sa.Column("gpu_source", sa.String(length=16), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("desired_version", sa.Integer(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("registered_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_heartbeat", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("name"),
    )
    op.create_table(
        "tokens",
        sa.Column("hash", sa.String(length=64), nullable=False),
        sa.Column("user", sa.String(length=64), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("hash"),
    )
    op.create_table(
        "tasks",
        sa.Column("id", sa.String(length=80), nullable=False),
        sa.Column("job_id", sa.String(length=32), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("node_rank", sa.Integer(), nullable=False),
        sa.Column("node", sa.String(length=64), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("gpus", sa.JSON(), nullable=False),
        sa.Column("gpu_fraction", sa.Float(), nullable=False),
        sa.Column("cpus", sa.Float(), nullable=False),
        sa.Column("memory_mb", sa.Integer(), nullable=False),
        sa.Column("master_addr", sa.String(length=255), nullable=False),
        sa.Column("master_port", sa.Integer(), nullable=False),
        sa.Column("assigned_version", sa.Integer(), nullable=False),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.Column("assigned_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("fenced_after", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["jobs.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("tasks", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_tasks_job_id"), ["job_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_tasks_node"), ["node"], unique=False)
        batch_op.create_index(batch_op.f("ix_tasks_state"), ["state"], unique=False)

    op.create_table(
        "gpu_claims",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("node", sa.String(length=64), nullable=False),
        sa.Column("gpu_index", sa.Integer(), nullable=False),
        sa.Column("fraction", sa.Float(), nullable=False),
        sa.Column("job_id", sa.String(length=32), nullable=False),
        sa.Column("task_id", sa.String(length=80), nullable=False),
        sa.ForeignKeyConstraint(
            ["task_id"],
            ["tasks.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("gpu_claims", schema=None) as batch_op:
        batch_op.create_index("ix_gpu_claims_node_gpu", ["node", "gpu_index"], unique=False)
        batch_op.create_index(batch_op.f("ix_gpu_claims_task_id"), ["task_id"], unique=False)
        batch_op.create_index(
            "uq_gpu_claims_whole",
            ["node", "gpu_index"],
            unique=True,
            sqlite_where=sa.text("fraction >= 1.0"),
            postgresql_where=sa.text("fraction >= 1.0"),
        )


def downgrade() -> None:

    with op.batch_alter_table("gpu_claims", schema=None) as batch_op:
        batch_op.drop_index(
            "uq_gpu_claims_whole", sqlite_where=sa.text("fraction >= 1.0"), postgresql_where=sa.text("fraction >= 1.0")
        )
        batch_op.drop_index(batch_op.f("ix_gpu_claims_task_id"))
        batch_op.drop_index("ix_gpu_claims_node_gpu")

    op.drop_table("gpu_claims")
    with op.batch_alter_table("tasks", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_tasks_state"))
        batch_op.drop_index(batch_op.f("ix_tasks_node"))
        batch_op.drop_index(batch_op.f("ix_tasks_job_id"))

    op.drop_table("tasks")
    op.drop_table("tokens")
    op.drop_table("nodes")
    op.drop_table("meta")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index("ix_jobs_state_priority_seq")

    op.drop_table("jobs")
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_events_ts"))
        batch_op.drop_index(batch_op.f("ix_events_job_id"))

    op.drop_table("events")
