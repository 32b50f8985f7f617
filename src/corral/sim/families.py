"""Families of candidate clusters for ``corral sim plan``, each growing with one number ``n``.

- One GPU type: ``n`` nodes shaped like the cluster file's group of that type with the most
  GPUs per node (its price and power), or 8-GPU nodes from the built-in catalogue for a type
  the file does not have.
- The file's mix: every group's count × n / (the file's node count), rounded up, so ``n`` equal
  to the file's node count is the file's cluster.

Each family knows two sizes: one from which every job that can ever fit it does (``fits_by``),
and its zero-wait size, from which every job can start on arrival. The zero-wait size counts,
at the busiest moment of the trace run with no waiting, the nodes the running jobs would hold
(a job holds at most ceil(GPUs / GPUs per node) whole nodes, at the slowest speed of the family, and a
gang that may span racks for ``cross_rack_slowdown`` times as long); with that many nodes in each group,
a new job always finds enough nodes that are wholly free.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from corral.sim.catalogue import known_types, lookup
from corral.sim.trace import Trace
from corral.sim.whatif import NEW_NODE_GPUS, new_group
from corral.spec import ClusterSpec, NodeGroupSpec

MIX = "mix"


class PlanError(ValueError):
    """A candidate the user asked for that cannot be priced or built; the message names the flag."""


@dataclass(frozen=True)
class Family:
    name: str
    build: Callable[[int], ClusterSpec]
    fits_by: int
    zero_wait: int
    problem: str | None = None  # why it is not searched (no price)


def families(spec: ClusterSpec, trace: Trace, gpu_types: Sequence[str] = ()) -> list[Family]:
    """The asked-for GPU types; by default the file's mix (when it has several groups) and each of its types."""
    if gpu_types:
        return [type_family(spec, t, trace, flag=f"--gpu-type {t}") for t in dict.fromkeys(gpu_types)]
    found = [type_family(spec, t, trace) for t in dict.fromkeys(g.gpu_type for g in spec.node_groups)]
    return [mix_family(spec, trace), *found] if len(spec.node_groups) > 1 else found


def speed_of(spec: ClusterSpec, gpu_type: str) -> float:
    """The cluster file's speed for a type (its key matched whatever its case); 1.0 for its types it does not
    list; else the catalogue's."""
    listed = next((speed for key, speed in spec.gpu_speed.items() if key.lower() == gpu_type.lower()), None)
    if listed is not None:
        return listed
    if any(g.gpu_type == gpu_type for g in spec.node_groups):
        return 1.0
    defaults = lookup(gpu_type)
    return defaults.speed if defaults else 1.0


def type_family(spec: ClusterSpec, gpu_type: str, trace: Trace, flag: str | None = None) -> Family:
    """``n`` nodes of one GPU type. With ``flag`` (the type was asked for) a type without a price raises."""
    same = [g for g in spec.node_groups if g.gpu_type.lower() == gpu_type.lower()]
    exact = [g for g in same if g.gpu_type == gpu_type] or same
    defaults = lookup(gpu_type)
    shape: NodeGroupSpec
    if exact:
        shape = max(exact, key=lambda g: g.gpus_per_node)
    elif defaults is not None:
        shape = new_group(defaults, 1, NEW_NODE_GPUS, set())
    else:
        raise PlanError(
            f"{flag or '--gpu-type ' + gpu_type}: {gpu_type} is neither in the cluster file nor in the built-in"
            f" catalogue ({known_types()}); add a node group of it, with price_per_gpu_hour, to the cluster file"
        )
    problem = None
    if shape.price_per_gpu_hour is None and lookup(shape.gpu_type) is None:
        problem = (
            f"node group {shape.group_name} has no price_per_gpu_hour (and {shape.gpu_type} is not in the catalogue)"
        )
        if flag:
            raise PlanError(f"{flag}: {problem}; set it in the cluster file")
    speed = speed_of(spec, shape.gpu_type)
    per_node = max(1, shape.gpus_per_node)

    def build(size: int) -> ClusterSpec:
        return ClusterSpec(
            node_groups=[shape.model_copy(update={"count": size})],
            gpu_speed={shape.gpu_type: speed},
            cross_rack_slowdown=spec.cross_rack_slowdown,
        )

    return Family(
        name=shape.gpu_type,
        build=build,
        fits_by=max(1, _widest(trace, per_node)),
        zero_wait=max(1, concurrent_nodes(trace, per_node, speed, _gang_slowdown(spec, [shape]))),
        problem=problem,
    )


def mix_family(spec: ClusterSpec, trace: Trace) -> Family:
    """The cluster file's groups in their proportions, at about ``n`` nodes in all."""
    groups = spec.node_groups
    total = sum(g.count for g in groups)
    unpriced = [g.group_name for g in groups if g.price_per_gpu_hour is None and lookup(g.gpu_type) is None]
    problem = f"no price_per_gpu_hour for node group(s) {', '.join(unpriced)}" if unpriced else None
    smallest_group = min(g.count for g in groups)
    per_node = min((g.gpus_per_node for g in groups if g.gpus_per_node), default=1)
    speed = min(spec.speed(g.gpu_type) for g in groups)

    def build(size: int) -> ClusterSpec:
        scaled = [g.model_copy(update={"count": math.ceil(g.count * size / total)}) for g in groups]
        return spec.model_copy(update={"node_groups": scaled})

    def size_for(nodes_per_group: int) -> int:
        return max(1, math.ceil(nodes_per_group * total / smallest_group))

    return Family(
        name=MIX,
        build=build,
        fits_by=size_for(_widest(trace, per_node)),
        zero_wait=size_for(concurrent_nodes(trace, per_node, speed, _gang_slowdown(spec, groups))),
        problem=problem,
    )


def _widest(trace: Trace, gpus_per_node: int) -> int:
    """The most nodes one job needs."""
    return max((math.ceil(j.gpus / gpus_per_node) for j in trace.jobs), default=1)


def _gang_slowdown(spec: ClusterSpec, groups: Sequence[NodeGroupSpec]) -> float:
    """How much longer a gang may run on these groups: ``cross_rack_slowdown`` once nodes have racks (a gang
    across racks runs that much longer), else 1."""
    return spec.cross_rack_slowdown if any(g.nodes_per_rack for g in groups) else 1.0


def concurrent_nodes(trace: Trace, gpus_per_node: int, speed: float, gang_slowdown: float = 1.0) -> int:
    """The most nodes the trace's jobs would hold at once if each started on arrival; a job on more than
    one node (a gang, which may span racks) runs ``gang_slowdown`` times as long."""
    events: list[tuple[float, int, int]] = []
    for job in trace.jobs:
        nodes = max(1, math.ceil(job.gpus / gpus_per_node))
        end = job.submit_s + job.duration_s / speed * (gang_slowdown if nodes > 1 else 1.0)
        events.append((job.submit_s, 1, nodes))
        events.append((end, 0 if end > job.submit_s else 2, -nodes))  # an empty job holds its nodes for its moment
    held = peak = 0
    for _, _, change in sorted(events):
        held += change
        peak = max(peak, held)
    return peak
