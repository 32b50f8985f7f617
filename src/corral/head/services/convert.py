"""Rows and specs into the scheduler's frozen model values."""

from __future__ import annotations

from datetime import datetime

from corral.head.store.tables import NodeRow
from corral.model import Gpu, Node, NodeState, Request
from corral.spec import JobSpec


def node_model(row: NodeRow, heard_since: datetime | None = None) -> Node:
    """The node as registered; with ``heard_since``, as the scheduler may use it now: a node not heard
    from since then, or whose health command fails, is not ready, and unhealthy GPUs are left out."""
    state = NodeState(row.state)
    gpus = row.gpus
    if heard_since is not None:
        silent = row.last_heartbeat is None or row.last_heartbeat < heard_since
        if state is NodeState.READY and (silent or row.health_problem):
            state = NodeState.NOT_READY
        gpus = [g for g in gpus if str(g["index"]) not in row.unhealthy_gpus]
    return Node(
        name=row.name,
        state=state,
        gpus=tuple(Gpu(index=g["index"], type=g["type"], memory_mb=g["memory_mb"]) for g in gpus),
        cpus=row.cpus,
        memory_mb=row.memory_mb,
        labels=dict(row.labels),
        container_runtime=row.container_runtime,
    )


def request_of(spec: JobSpec) -> Request:
    return Request(
        nodes=spec.nodes,
        gpus_per_node=spec.resources.gpus,
        gpu_types=tuple(spec.resources.gpu_type),
        cpus_per_node=spec.resources.cpus,
        memory_mb_per_node=spec.resources.memory_mb,
        topology=spec.topology.label,
        topology_required=spec.topology.required is not None,
        container=spec.image is not None,
    )
