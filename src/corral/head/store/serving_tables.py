"""Tables for services: the service itself and which jobs are its replicas.

A replica is an ordinary job row (scheduled, run, requeued and preempted like any job);
``service_replicas`` only says which service and revision it belongs to.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, ForeignKey, Integer, String, false
from sqlalchemy.orm import Mapped, mapped_column

from corral.head.store.tables import Base


class ServiceRow(Base):
    __tablename__ = "services"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    user: Mapped[str] = mapped_column(String(64))
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    # Bumped whenever the replica template (command, resources, env, ...) changes: a rolling update.
    revision: Mapped[int] = mapped_column(Integer, default=1)
    desired: Mapped[int] = mapped_column(Integer, default=1)
    # The autoscaler's own state, handed back to it on the next decision (survives restarts).
    autoscale_state: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class ReplicaRow(Base):
    __tablename__ = "service_replicas"

    job_id: Mapped[str] = mapped_column(String(32), ForeignKey("jobs.id"), primary_key=True)
    service: Mapped[str] = mapped_column(String(64), index=True)
    revision: Mapped[int] = mapped_column(Integer)
    # Whether its readiness probe passes (the head probes every replica with an address).
    ready: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # Set when the replica leaves the pool (scale down, update, delete); it is stopped once drained.
    draining_since: Mapped[datetime | None]
    created_at: Mapped[datetime]
