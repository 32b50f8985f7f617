"""``corral why``: for one job, which check each node fails, grouped so a large cluster reads in a few lines.

The checks run cheapest first and the first failing one is the node's verdict:

    state ──▶ runtime (an image needs a container runtime) ──▶ gpu_type ──▶ capacity (the node could
    never hold one share) ──▶ free (not now) ──▶ topology (a gang that must be in one domain, such as
    a rack: the node's domain has too few nodes that fit now) ──▶ fits

A node that fits now does not mean the job starts now: a gang needs ``nodes`` of them at once,
and jobs ahead of it in the queue, a reservation or a dependency may come first (its reason says).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from corral.model import EPSILON, FULL_GPU, Job, Node, NodeState, Request
from corral.sched import describe
from corral.sched.feasibility import required_domain
from corral.sched.node_capacity import NodeCapacity
from corral.sched.policy import Policy
from corral.sched.snapshot import Snapshot

STATE, RUNTIME, GPU_TYPE, CAPACITY, FREE, TOPOLOGY, FITS = (
    "state",
    "runtime",
    "gpu_type",
    "capacity",
    "free",
    "topology",
    "fits",
)


@dataclass(frozen=True)
class NodeGroup:
    """Nodes that got the same verdict: the check (``filter``) that rejected them, and why."""

    filter: str
    message: str
    nodes: tuple[str, ...]


def why(job: Job, snapshot: Snapshot, policy: Policy) -> tuple[NodeGroup, ...]:
    """Every registered node's verdict for ``job``, grouped by verdict; rejections first, fitting nodes last."""
    view = snapshot.view(policy.gpu_ranker, policy.cpu_ranker)
    verdicts = {
        node.name: _verdict(job.request, node, view.nodes.get(node.name))
        for node in sorted(snapshot.nodes, key=lambda n: n.name)
    }
    label = required_domain(job.request)
    if label is not None:
        _judge_domains(job.request, label, snapshot.nodes, verdicts)
    groups: dict[tuple[str, str], list[str]] = {}
    for name, verdict in verdicts.items():
        groups.setdefault(verdict, []).append(name)
    order = {STATE: 0, RUNTIME: 1, GPU_TYPE: 2, CAPACITY: 3, FREE: 4, TOPOLOGY: 5, FITS: 6}
    return tuple(
        NodeGroup(check, message, tuple(nodes))
        for (check, message), nodes in sorted(groups.items(), key=lambda item: (order[item[0][0]], item[0][1]))
    )


def _judge_domains(request: Request, label: str, nodes: Sequence[Node], verdicts: dict[str, tuple[str, str]]) -> None:
    """A gang that must be in one domain fits a node only where that domain has ``nodes`` nodes that fit now."""
    fitting: dict[str, int] = {}
    for node in nodes:
        value = node.labels.get(label)
        if value and verdicts[node.name][0] == FITS:
            fitting[value] = fitting.get(value, 0) + 1
    need = request.nodes
    for node in nodes:
        if verdicts[node.name][0] != FITS:
            continue
        value = node.labels.get(label)
        if not value:
            verdicts[node.name] = (TOPOLOGY, f"has no {label} label; the job needs all {need} nodes in one {label}")
        elif fitting[value] < need:
            verdicts[node.name] = (
                TOPOLOGY,
                f"fits now, but only {describe.plural(fitting[value], 'node')} of {label} {value} fit;"
                f" the job needs {need} in one {label}",
            )


def _verdict(request: Request, node: Node, free: NodeCapacity | None) -> tuple[str, str]:
    if node.state != NodeState.READY or free is None:
        state = node.state.value if node.state != NodeState.READY else "not heard from lately"
        return STATE, f"node is {state}"
    if request.container and not node.container_runtime:
        return RUNTIME, "runs in a container image; this node's agent has no container runtime"
    types = _acceptable(request, node)
    if request.gpus_per_node > 0 and not types:
        wanted = describe.either(list(request.gpu_types))
        return GPU_TYPE, f"has no {wanted} GPUs (has {_inventory(node)})"
    if problem := _capacity(request, node, types):
        return CAPACITY, problem
    if problem := _free(request, free, types):
        return FREE, problem
    return FITS, "fits now"


def _acceptable(request: Request, node: Node) -> list[str]:
    have = node.gpu_types()
    return [t for t in (request.gpu_types or sorted(have)) if t in have]


def _inventory(node: Node) -> str:
    counts = sorted((t, node.count_of_type(t)) for t in node.gpu_types())
    return describe.and_list([f"{c} {t}" for t, c in counts]) or "no GPUs"


def _capacity(request: Request, node: Node, types: Sequence[str]) -> str | None:
    if request.gpus_per_node > 0 and max(node.count_of_type(t) for t in types) < request.gpu_slots_per_node:
        return f"needs {describe.plural(request.gpu_slots_per_node, 'GPU')} per node; it has {_inventory(node)}"
    if request.cpus_per_node is not None and request.cpus_per_node > node.cpus + EPSILON:
        return f"needs {describe.plural(request.cpus_per_node, 'CPU')}; it has {describe.number(node.cpus)}"
    if request.memory_mb_per_node is not None and request.memory_mb_per_node > node.memory_mb:
        return f"needs {describe.memory(request.memory_mb_per_node)} memory; it has {describe.memory(node.memory_mb)}"
    return None


def _free(request: Request, free: NodeCapacity, types: Sequence[str]) -> str | None:
    gpu = f"{describe.either(types)} GPU" if request.gpu_types else "GPU"  # the types asked for, named
    if request.fractional:
        room = max((FULL_GPU - free.used[i] for t in types for i in free.indices(t)), default=0.0)
        if room < request.gpus_per_node - EPSILON:
            return f"needs {describe.number(request.gpus_per_node)} of one {gpu}; the most left on one is {room:.2g}"
    elif request.gpus_per_node > 0:
        empty = max(len(free.empty_gpus(t)) for t in types)
        if empty < request.gpu_slots_per_node:
            return f"needs {describe.plural(request.gpu_slots_per_node, 'free ' + gpu)}; {empty} free now"
    if request.cpus_per_node is not None and request.cpus_per_node > free.free_cpus + EPSILON:
        return f"needs {describe.plural(request.cpus_per_node, 'CPU')}; {describe.number(free.free_cpus)} free now"
    if request.memory_mb_per_node is not None and request.memory_mb_per_node > free.free_memory_mb:
        need, left = describe.memory(request.memory_mb_per_node), describe.memory(free.free_memory_mb)
        return f"needs {need} memory; {left} free now"
    return None
