"""One node's room for a share once some victims stop: what the victim search asks of each node."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from corral.model import EPSILON, FULL_GPU, Allocation, Request
from corral.sched.node_capacity import NodeCapacity

_ROUNDING = 1e-6  # of a GPU


def gpus_short(node: NodeCapacity, request: Request, gpu_type: str | None) -> int:
    """How many more empty GPUs of the type a whole-GPU share needs on the node (0 otherwise)."""
    if request.gpus_per_node <= 0 or gpu_type is None or request.fractional:
        return 0
    return request.gpu_slots_per_node - len(node.empty_gpus(gpu_type))


def emptiable(node: NodeCapacity, gpu_type: str | None, freed: Mapping[str, list[Allocation]]) -> dict[str, set[int]]:
    """Per victim, the GPUs of the type its release might empty, with others of ``freed``: the busy ones it
    holds, less those that stay in use even once all of ``freed`` is given back (another job holds a share).
    A share fits only where the victims stopped hold at least ``gpus_short`` of these together."""
    if gpu_type is None:
        return {v: set() for v in freed}
    used = node.used
    busy = {i for i in node.indices(gpu_type) if used[i] > EPSILON}
    given: dict[int, float] = {}
    for allocations in freed.values():
        for alloc in allocations:
            for index in alloc.gpus:
                if index in busy:
                    given[index] = given.get(index, 0.0) + alloc.gpu_fraction
    # ``fits_without`` rounds at each step; what that adds up to is far below ``_ROUNDING``.
    can = {i for i, share in given.items() if used[i] - share <= EPSILON + _ROUNDING}
    return {
        v: can.intersection(allocs[0].gpus) if len(allocs) == 1 else {i for a in allocs for i in a.gpus if i in can}
        for v, allocs in freed.items()
    }


def fits_without(node: NodeCapacity, request: Request, gpu_type: str | None, freed: Sequence[Allocation]) -> bool:
    """Whether one share of the request fits the node once ``freed`` is given back."""
    used = node.used
    left: dict[int, float] = {}  # what stays allocated on the GPUs the freed allocations touch
    cpus, memory = node.free_cpus, node.free_memory_mb
    for alloc in freed:
        for index in alloc.gpus:
            if index in used:
                left[index] = max(0.0, round(left.get(index, used[index]) - alloc.gpu_fraction, 12))
        cpus += alloc.cpus
        memory += alloc.memory_mb
    if request.cpus_per_node is not None and request.cpus_per_node > cpus + EPSILON:
        return False
    if request.memory_mb_per_node is not None and request.memory_mb_per_node > memory:
        return False
    if request.gpus_per_node <= 0 or gpu_type is None:
        return True
    indices = node.indices(gpu_type)
    if request.fractional:
        return any(FULL_GPU - left.get(i, used[i]) >= request.gpus_per_node - EPSILON for i in indices)
    return sum(1 for i in indices if left.get(i, used[i]) <= EPSILON) >= request.gpu_slots_per_node
