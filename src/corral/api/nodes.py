"""Wire schemas for nodes and cluster status."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field


class GpuOut(BaseModel):
    index: int
    type: str
    memory_mb: int
    allocated_to: str | None = None
    allocated_fraction: float = 0.0
    shared_by: list[str] = Field(default_factory=list)
    healthy: bool = True
    problem: str = ""
    utilization: float | None = Field(default=None, description="latest reading, percent; null before any")
    memory_used_mb: int | None = None
    temperature_c: float | None = None
    power_w: float | None = None


class NodeOut(BaseModel):
    """A node object, as `corral nodes -o json` prints it."""

    name: str
    state: str
    labels: dict[str, str]
    gpus: list[GpuOut]
    last_heartbeat: datetime | None
    cpus: float
    memory_mb: int
    address: str
    reason: str = ""
    registered_at: datetime | None = None
    container_runtime: str = Field(default="", description="what runs jobs with an image here; empty: nothing")


class GpuCount(BaseModel):
    free: int
    total: int


class StatusOut(BaseModel):
    """`corral status -o json`."""

    version: str
    head_url: str
    uptime_s: float
    nodes_ready: int
    nodes_total: int
    gpus_free: int
    gpus_total: int
    gpus_by_type: dict[str, GpuCount]
    jobs_by_state: dict[str, int]


class JoinTokenOut(BaseModel):
    token: str


class DrainRequest(BaseModel):
    reason: str = Field(default="", max_length=500)


class EventOut(BaseModel):
    """One state change, as `corral events -o json` prints it (one per line with --follow)."""

    id: int
    ts: datetime
    kind: str
    job_id: str | None = None
    node: str | None = None
    message: str = ""
    data: dict[str, Any] = Field(default_factory=dict)
