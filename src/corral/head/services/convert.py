"""Rows and specs into the scheduler's frozen model values."""

from __future__ import annotations

from datetime import datetime

from corral.head.store.tables import NodeRow
from corral.model import Gpu, Node, NodeState, Request
from corral.spec import JobSpec


def node_model(row: NodeRow, heard_since: datetime | None = None) -> Node:
    """The node as the scheduler sees it; one not heard from since ``heard_since`` is not ready."""
    state = NodeState(row.state)
    if (
        heard_since is not None
        and state is NodeState.READY
        and (row.last_heartbeat is None or row.last_heartbeat < heard_since)
    ):
        state = NodeState.NOT_READY
    return Node(
        name=row.name,
        state=state,
        gpus=tuple(Gpu(index=g["index"], type=g["type"], memory_mb=g["memory_mb"]) for g in row.gpus),
        cpus=row.cpus,
        memory_mb=row.memory_mb,
        labels=dict(row.labels),
    )


def request_of(spec: JobSpec) -> Request:
    return Request(
        nodes=spec.nodes,
        gpus_per_node=spec.resources.gpus,
        gpu_types=tuple(spec.resources.gpu_type),
        cpus_per_node=spec.resources.cpus,
        memory_mb_per_node=spec.resources.memory_mb,
    )
