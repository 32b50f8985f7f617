"""How many pending jobs the free GPUs, and the shared GPUs' room, could take now: what pruning passes."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

from corral.model import FULL_GPU, Job, Request

if TYPE_CHECKING:
    from corral.sim.state import ClusterState

ROOM_SLACK = 1e-6  # counting how many fractions fit, a little more room than there is: never too few


def free_slots(state: ClusterState) -> dict[str, Counter[int]]:
    """Per GPU type: how many nodes have each count of free GPUs."""
    slots: dict[str, Counter[int]] = {t: Counter() for t in state.types}
    for (_, free), names in state.buckets.items():
        if free > 0 and names:
            slots[state.node_type[names[0]]][free] += len(names)
    return slots


def fits_shared(state: ClusterState, name: str, fraction: float) -> bool:
    """Whether a shared GPU on the node has room for ``fraction`` (above 0) now, or a little less."""
    shares = state.shares.get(name) if fraction else None
    return shares is not None and any(FULL_GPU - held >= fraction - ROOM_SLACK for held in shares.values())


def shared_with_room(state: ClusterState, jobs: Iterable[Job]) -> Iterator[str]:
    """The nodes with a shared GPU that has room for the smallest fraction among the jobs (none without one)."""
    smallest = min((j.request.gpus_per_node for j in jobs if j.request.fractional), default=None)
    if smallest is None:
        return
    yield from (name for name in state.shares if fits_shared(state, name, smallest))


def room_for(state: ClusterState, request: Request, slots: Mapping[str, Counter[int]]) -> int:
    """At most how many jobs with this request the free GPUs (``free_slots``; and shared GPUs' room, for a
    fraction) could take now."""
    if request.fractional:
        return _fraction_room(state, request, slots)
    per_node = math.ceil(request.gpus_per_node)
    room = 0
    for gpu_type in request.gpu_types or state.types:
        counts = slots.get(gpu_type)
        if not counts:
            continue
        gpus = sum(free * nodes for free, nodes in counts.items())
        places = sum((free // per_node) * nodes for free, nodes in counts.items())
        room += min(gpus // (per_node * request.nodes), places // request.nodes)
    return room


def _fraction_room(state: ClusterState, request: Request, slots: Mapping[str, Counter[int]]) -> int:
    """At most how many jobs of this fraction of one GPU the free GPUs and the shared GPUs' room could take."""
    fraction = request.gpus_per_node
    types = request.gpu_types or state.types
    per_gpu = math.floor((FULL_GPU + ROOM_SLACK) / fraction)
    room = sum(free * nodes * per_gpu for t in types for free, nodes in slots.get(t, Counter()).items())
    for name, shares in state.shares.items():
        if state.node_type.get(name) in types:
            room += sum(math.floor((FULL_GPU - held + ROOM_SLACK) / fraction) for held in shares.values())
    return room
