"""Wire schemas for services and for the gateway's view of them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field


class ReplicaOut(BaseModel):
    job_id: str
    revision: int
    state: str  # the replica job's state
    ready: bool
    draining: bool
    node: str | None = None
    url: str | None = None  # where the replica listens, once its agent has chosen the port


class ServiceOut(BaseModel):
    """A service object, as `corral service show -o json` prints it."""

    name: str
    user: str
    revision: int
    url: str  # the gateway's address for this service
    replicas_ready: int
    replicas_desired: int
    replicas_min: int
    replicas_max: int
    created_at: datetime
    updated_at: datetime
    spec: dict[str, Any]
    replicas: list[ReplicaOut]
    # Why the service runs fewer replicas than it should, e.g. its replicas keep exiting and the
    # next is started after a back-off; None when nothing is wrong.
    reason: str | None = None


class ScaleRequest(BaseModel):
    replicas: int = Field(ge=0, le=256, description="replicas to run from now on (min = max = this)")


class Endpoint(BaseModel):
    replica: str  # the replica's job id
    url: str


class ServiceEndpoints(BaseModel):
    """What a gateway needs to route one service's requests."""

    service: str
    ready: list[Endpoint]
    hold_s: float  # how long a request may wait for a ready replica
    stopped: bool  # scaled to 0 by hand (max 0): requests are refused at once, not held


class GatewayView(BaseModel):
    services: list[ServiceEndpoints]


class ServiceLoad(BaseModel):
    inflight: int = Field(ge=0, description="requests in flight or waiting for a replica right now")
    requests: int = Field(ge=0, description="requests received since the gateway started (a counter)")
    waiting: int = Field(default=0, ge=0, description="of those in flight, requests held for want of a ready replica")
    replicas: dict[str, int] = Field(
        default_factory=dict,
        description="requests each replica (job id) holds right now; a drained replica is "
        "stopped once no gateway counts any for it",
    )


class LoadReport(BaseModel):
    """A gateway's counters, sent every half second or so; the autoscaler sums the gateways'."""

    gateway: str = Field(min_length=1, max_length=100)
    services: dict[str, ServiceLoad]
