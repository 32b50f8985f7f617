"""SQLAlchemy tables: the head's persistent state."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    false,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator


class UtcDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every backend (SQLite drops the zone)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column")
        return value

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value


class Base(DeclarativeBase):
    type_annotation_map: ClassVar[dict[Any, Any]] = {datetime: UtcDateTime(), dict[str, Any]: JSON, list[Any]: JSON}


class JobRow(Base):
    __tablename__ = "jobs"

    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    id: Mapped[str] = mapped_column(String(32), unique=True)
    name: Mapped[str] = mapped_column(String(64))
    user: Mapped[str] = mapped_column(String(64))
    team: Mapped[str] = mapped_column(String(64))
    priority: Mapped[int] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(16))
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    nodes: Mapped[int] = mapped_column(Integer)
    gpus_per_node: Mapped[float] = mapped_column(Float)
    gpu_types: Mapped[list[Any]] = mapped_column(JSON)
    cpus: Mapped[float | None] = mapped_column(Float)
    memory_mb: Mapped[int | None] = mapped_column(Integer)
    submitted_at: Mapped[datetime]
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    exit_code: Mapped[int | None] = mapped_column(Integer)
    restarts: Mapped[int] = mapped_column(Integer, default=0)
    generation: Mapped[int] = mapped_column(Integer, default=0)
    reason: Mapped[str] = mapped_column(Text, default="")
    idempotency_key: Mapped[str | None] = mapped_column(String(200))
    # When the job last reported a checkpoint (a preemption loses the work since then).
    last_checkpoint_at: Mapped[datetime | None]
    preemptions: Mapped[int] = mapped_column(Integer, default=0, server_default="0")

    __table_args__ = (
        UniqueConstraint("user", "idempotency_key", name="uq_jobs_user_idempotency_key"),
        Index("ix_jobs_state_priority_seq", "state", "priority", "seq"),
    )


class TaskRow(Base):
    """One node's share of one attempt (generation) of a job."""

    __tablename__ = "tasks"

    id: Mapped[str] = mapped_column(String(80), primary_key=True)  # job_id/generation/node_rank
    job_id: Mapped[str] = mapped_column(String(32), ForeignKey("jobs.id"), index=True)
    generation: Mapped[int] = mapped_column(Integer)
    node_rank: Mapped[int] = mapped_column(Integer)
    node: Mapped[str] = mapped_column(String(64), index=True)
    state: Mapped[str] = mapped_column(String(16), index=True)
    gpus: Mapped[list[Any]] = mapped_column(JSON)
    # The type of each GPU in ``gpus`` when it was placed (None on rows from before it was kept).
    gpu_types: Mapped[list[Any] | None] = mapped_column(JSON)
    gpu_fraction: Mapped[float] = mapped_column(Float, default=1.0)
    cpus: Mapped[float] = mapped_column(Float, default=0.0)
    memory_mb: Mapped[int] = mapped_column(Integer, default=0)
    master_addr: Mapped[str] = mapped_column(String(255), default="")
    master_port: Mapped[int] = mapped_column(Integer, default=0)
    assigned_version: Mapped[int] = mapped_column(Integer, default=0)
    exit_code: Mapped[int | None] = mapped_column(Integer)
    detail: Mapped[str] = mapped_column(Text, default="")
    assigned_at: Mapped[datetime]
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    # For a task lost with its node: when the node's agent has surely stopped it (its lease ran out).
    fenced_after: Mapped[datetime | None]
    # For a stopping task: seconds between SIGTERM and SIGKILL (None: the grace it was started with).
    stop_grace_s: Mapped[float | None] = mapped_column(Float)


class GpuClaimRow(Base):
    """A live hold of (part of) one GPU by one task; deleted when the task's processes are gone."""

    __tablename__ = "gpu_claims"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    node: Mapped[str] = mapped_column(String(64))
    gpu_index: Mapped[int] = mapped_column(Integer)
    fraction: Mapped[float] = mapped_column(Float)
    job_id: Mapped[str] = mapped_column(String(32))
    task_id: Mapped[str] = mapped_column(String(80), ForeignKey("tasks.id"), index=True)

    __table_args__ = (
        # Two whole-GPU claims on one GPU are impossible even if two writers race.
        Index(
            "uq_gpu_claims_whole",
            "node",
            "gpu_index",
            unique=True,
            sqlite_where=text("fraction >= 1.0"),
            postgresql_where=text("fraction >= 1.0"),
        ),
        Index("ix_gpu_claims_node_gpu", "node", "gpu_index"),
    )


class NodeRow(Base):
    __tablename__ = "nodes"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    state: Mapped[str] = mapped_column(String(16))
    labels: Mapped[dict[str, Any]] = mapped_column(JSON)
    gpus: Mapped[list[Any]] = mapped_column(JSON)
    cpus: Mapped[float] = mapped_column(Float)
    memory_mb: Mapped[int] = mapped_column(Integer)
    address: Mapped[str] = mapped_column(String(255), default="")
    gpu_source: Mapped[str] = mapped_column(String(16), default="none")
    token_hash: Mapped[str] = mapped_column(String(64))
    desired_version: Mapped[int] = mapped_column(Integer, default=0)
    reason: Mapped[str] = mapped_column(Text, default="")
    drained: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    drain_reason: Mapped[str] = mapped_column(Text, default="", server_default="")
    # What the agent's health command or GPU readings say is wrong; such GPUs (or the whole node) get no work.
    health_problem: Mapped[str] = mapped_column(Text, default="", server_default="")
    unhealthy_gpus: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict, server_default="{}")
    container_runtime: Mapped[str] = mapped_column(String(32), default="", server_default="")
    registered_at: Mapped[datetime]
    last_heartbeat: Mapped[datetime | None]


class EventRow(Base):
    __tablename__ = "events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    ts: Mapped[datetime] = mapped_column(index=True)
    kind: Mapped[str] = mapped_column(String(32))
    job_id: Mapped[str | None] = mapped_column(String(32), index=True)
    node: Mapped[str | None] = mapped_column(String(64))
    message: Mapped[str] = mapped_column(Text, default="")
    data: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class TokenRow(Base):
    __tablename__ = "tokens"

    hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    user: Mapped[str] = mapped_column(String(64))
    role: Mapped[str] = mapped_column(String(16))
    name: Mapped[str] = mapped_column(String(64), default="")
    created_at: Mapped[datetime]


class MetaRow(Base):
    """Cluster-wide settings the head keeps (the agents' join token, ...)."""

    __tablename__ = "meta"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class UserRow(Base):
    """A person who may use the cluster: their role and the teams they may submit to (the first is their default)."""

    __tablename__ = "users"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    role: Mapped[str] = mapped_column(String(16))
    teams: Mapped[list[Any]] = mapped_column(JSON)
    created_at: Mapped[datetime]


class PriceRow(Base):
    """The GPU prices in force from ``effective_at`` on (per GPU type, per GPU-hour), until the next row."""

    __tablename__ = "gpu_prices"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    effective_at: Mapped[datetime] = mapped_column(index=True)
    prices: Mapped[dict[str, Any]] = mapped_column(JSON)


class LeaseRow(Base):
    """A lease only one head holds at a time; ``token`` grows by one with every new holder (fencing)."""

    __tablename__ = "leases"

    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    holder: Mapped[str] = mapped_column(String(128))
    token: Mapped[int] = mapped_column(Integer)
    expires_at: Mapped[datetime]
