"""Rows and specs into the scheduler's frozen model values."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any

from corral.head.store.tables import NodeRow
from corral.model import Gpu, Node, NodeState, Request, interned
from corral.spec import JobSpec


def node_model(row: NodeRow, heard_since: datetime | None = None) -> Node:
    """The node as registered; with ``heard_since``, as the scheduler may use it now: a node not heard
    from since then, or whose health command fails, is not ready, and unhealthy GPUs are left out."""
    state = NodeState(row.state)
    gpus = gpus_of(row.gpus)
    if heard_since is not None:
        state = effective_state(state, row.last_heartbeat, row.health_problem, heard_since)
        gpus = effective_gpus(gpus, row.unhealthy_gpus)
    return Node(
        name=row.name,
        state=state,
        gpus=gpus,
        cpus=row.cpus,
        memory_mb=row.memory_mb,
        labels=dict(row.labels),
        container_runtime=row.container_runtime,
    )


def gpus_of(stored: list[Any]) -> tuple[Gpu, ...]:
    """A node's GPUs from the list stored in its row."""
    return tuple(Gpu(index=g["index"], type=g["type"], memory_mb=g["memory_mb"]) for g in stored)


def effective_state(
    state: NodeState, last_heartbeat: datetime | None, health_problem: str, heard_since: datetime
) -> NodeState:
    """A READY node not heard from since ``heard_since``, or whose health command fails, is not ready."""
    silent = last_heartbeat is None or last_heartbeat < heard_since
    return NodeState.NOT_READY if state is NodeState.READY and (silent or health_problem) else state


def effective_gpus(gpus: tuple[Gpu, ...], unhealthy: Collection[str]) -> tuple[Gpu, ...]:
    """The GPUs less those reported unhealthy (by index, as text)."""
    return tuple(g for g in gpus if str(g.index) not in unhealthy) if unhealthy else gpus


def request_of(spec: JobSpec) -> Request:
    return interned(
        Request(
            nodes=spec.nodes,
            gpus_per_node=spec.resources.gpus,
            gpu_types=tuple(spec.resources.gpu_type),
            cpus_per_node=spec.resources.cpus,
            memory_mb_per_node=spec.resources.memory_mb,
            topology=spec.topology.label,
            topology_required=spec.topology.required is not None,
            container=spec.image is not None,
        )
    )
