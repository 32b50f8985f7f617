"""Could a request ever fit the registered nodes, were they all empty and ready?"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from corral.model import EPSILON, Job, Node, NodeState, Request
from corral.sched import describe

if TYPE_CHECKING:
    from corral.sched.snapshot import Snapshot

_MAX_OFFERS = 6  # node groups listed in "cluster offers: ..." before "and N more"
NO_CONTAINER_RUNTIME = (
    "no node has a container runtime (an agent uses docker, podman, apptainer or enroot where it finds one, unless"
    " started with --runtime none; start agents with --runtime NAME)"
)


def never_fits(request: Request, nodes: Sequence[Node]) -> str | None:
    """Why ``request`` can never fit these registered nodes (any state), or None if it could.

    With no registered nodes the answer is None: the cluster may still be starting.
    """
    return ClusterShapes(nodes).never_fits(request)


@dataclass(frozen=True)
class _Shape:
    """The full capacity of a node, ignoring its name, labels and state."""

    gpus: tuple[tuple[str, int, int], ...]  # (type, memory_mb, count), sorted
    cpus: float
    memory_mb: int
    containers: bool = False  # its agent has a container runtime

    @staticmethod
    def of(node: Node) -> _Shape:
        gpus: tuple[tuple[str, int, int], ...] = ()
        if node.gpus:
            first = node.gpus[0]
            gpu_type, memory_mb = first.type, first.memory_mb
            if all(g.type == gpu_type and g.memory_mb == memory_mb for g in node.gpus):  # most nodes: one kind
                gpus = ((gpu_type, memory_mb, len(node.gpus)),)
            else:
                groups = Counter((g.type, g.memory_mb) for g in node.gpus)
                gpus = tuple(sorted((t, m, c) for (t, m), c in groups.items()))
        return _Shape(gpus, node.cpus, node.memory_mb, bool(node.container_runtime))

    def count(self, gpu_type: str) -> int:
        return sum(c for t, _, c in self.gpus if t == gpu_type)

    def holds_gpus(self, request: Request, gpu_type: str | None) -> bool:
        return request.gpus_per_node <= 0 or (
            gpu_type is not None and self.count(gpu_type) >= request.gpu_slots_per_node
        )

    def holds(self, request: Request, gpu_type: str | None) -> bool:
        cpus, memory_mb = request.cpus_per_node, request.memory_mb_per_node
        return (
            self.holds_gpus(request, gpu_type)
            and (self.containers or not request.container)
            and (cpus is None or cpus <= self.cpus + EPSILON)
            and (memory_mb is None or memory_mb <= self.memory_mb)
        )

    def describe(self, cpus: bool = False, memory: bool = False) -> str:
        gpus = " + ".join(f"{c} {t}:{describe.memory(m)}" if m else f"{c} {t}" for t, m, c in self.gpus)
        text = f"× {gpus}" if gpus else "without GPUs"
        host = [describe.plural(self.cpus, "CPU")] if cpus else []
        host += [f"{describe.memory(self.memory_mb)} memory"] if memory else []
        if host:
            text += f" ({', '.join(host)})"
        return text


class ClusterShapes:
    """Registered nodes grouped by identical capacity, to answer "could it ever fit?" quickly."""

    def __init__(self, nodes: Iterable[Node] = (), shapes: Counter[_Shape] | None = None) -> None:
        self._shapes: Counter[_Shape] = Counter(_Shape.of(n) for n in nodes) if shapes is None else shapes
        totals: Counter[str] = Counter()
        for shape, nodes_of_shape in self._shapes.items():
            for gpu_type, _, count in shape.gpus:
                totals[gpu_type] += count * nodes_of_shape
        self.gpu_types: tuple[str, ...] = tuple(sorted(totals, key=lambda t: (-totals[t], t)))  # most GPUs first

    def __bool__(self) -> bool:
        return bool(self._shapes)

    def without(self, other: ClusterShapes) -> ClusterShapes:
        """These nodes less ``other``'s (a subset of them, such as those not ready)."""
        return ClusterShapes(shapes=self._shapes - other._shapes)

    def acceptable_types(self, request: Request) -> tuple[str, ...]:
        """The registered GPU types the request accepts, in its preference order."""
        if request.gpu_types:
            return tuple(t for t in request.gpu_types if t in self.gpu_types)
        return self.gpu_types

    def count_holding(self, request: Request) -> int:
        """The most nodes that could each hold one node's share, all with one GPU type."""
        if request.gpus_per_node <= 0:
            return self._count(request, None)
        return max((self._count(request, t) for t in self.acceptable_types(request)), default=0)

    def never_fits(self, request: Request) -> str | None:
        """Why the request can never fit these nodes, or None (also when there are no nodes)."""
        if not self._shapes:
            return None
        if request.container:  # judged on the nodes that can run an image, so the numbers are theirs
            with_runtime = Counter({shape: n for shape, n in self._shapes.items() if shape.containers})
            if not with_runtime:
                return NO_CONTAINER_RUNTIME
            if len(with_runtime) < len(self._shapes):
                return ClusterShapes(shapes=with_runtime).never_fits(request)
        return (
            _invalid(request)
            or self._type_problem(request)
            or self._gpu_count_problem(request)
            or self._host_problem(request)
            or self._count_problem(request)
        )

    def offers(self, cpus: bool = False, memory: bool = False) -> str:
        """``2 nodes × 8 H100:80GB, 1 node × 4 A100:40GB``: most common shapes first, then largest."""
        groups: Counter[str] = Counter()
        gpus: dict[str, int] = {}
        for shape, count in self._shapes.items():
            text = shape.describe(cpus, memory)
            groups[text] += count
            gpus[text] = sum(c for _, _, c in shape.gpus)
        ordered = sorted(groups, key=lambda text: (-groups[text], -gpus[text], text))  # common, then large, first
        items = [f"{describe.plural(groups[text], 'node')} {text}" for text in ordered]
        if len(items) > _MAX_OFFERS:
            items = [*items[:_MAX_OFFERS], f"and {len(items) - _MAX_OFFERS} more"]
        return ", ".join(items)

    def _count(self, request: Request, gpu_type: str | None) -> int:
        return sum(n for shape, n in self._shapes.items() if shape.holds(request, gpu_type))

    def _type_problem(self, request: Request) -> str | None:
        if request.gpus_per_node <= 0:
            return None
        if not self.gpu_types:
            gpus = describe.plural(request.gpus_per_node, "GPU")
            return f"needs {gpus} per node but no registered node has GPUs ({self._offers(request)})"
        if not self.acceptable_types(request):
            kind = "type" if len(request.gpu_types) == 1 else "types"
            wanted = describe.either(request.gpu_types)
            return f"no node has GPU {kind} {wanted} (cluster offers: {', '.join(self.gpu_types)})"
        return None

    def _gpu_count_problem(self, request: Request) -> str | None:
        if request.gpus_per_node <= 0:
            return None
        types = self.acceptable_types(request)
        most, _, gpu_type = max((s.count(t), -rank, t) for s in self._shapes for rank, t in enumerate(types))
        if most >= request.gpu_slots_per_node:
            return None
        wanted = describe.share(_gpus_only(request), request.gpu_types)
        return f"needs {wanted} per node but the largest node has {most} {gpu_type} (cluster offers: {self.offers()})"

    def _host_problem(self, request: Request) -> str | None:
        types: Sequence[str | None] = self.acceptable_types(request) if request.gpus_per_node > 0 else [None]
        suitable = [s for s in self._shapes for t in types if s.holds_gpus(request, t)]
        where = (
            "node"
            if request.gpus_per_node <= 0
            else f"node with {describe.share(_gpus_only(request), request.gpu_types)}"
        )
        cpus, memory_mb = request.cpus_per_node, request.memory_mb_per_node
        if cpus is not None and cpus > (most := max(s.cpus for s in suitable)) + EPSILON:
            wanted, offered = describe.plural(cpus, "CPU"), describe.number(most)
        elif memory_mb is not None and memory_mb > (most_mb := max(s.memory_mb for s in suitable)):
            wanted, offered = f"{describe.memory(memory_mb)} memory", describe.memory(most_mb)
        else:
            return None
        return f"needs {wanted} per node but the largest {where} has {offered} ({self._offers(request)})"

    def _count_problem(self, request: Request) -> str | None:
        found = self.count_holding(request)
        if found >= request.nodes:
            return None
        types = self.acceptable_types(request) if request.gpus_per_node > 0 else ()
        each = describe.share(request, request.gpu_types)
        if found == 0:
            return f"no registered node has {each} ({self._offers(request)})"
        one_type = ", all of one GPU type" if len(types) > 1 else ""
        such = f"{describe.plural(found, 'such node')} {'is' if found == 1 else 'are'}"
        wanted = f"{describe.nodes_with(request, request.gpu_types)}{one_type}"
        return f"needs {wanted}; only {such} registered ({self._offers(request)})"

    def _offers(self, request: Request) -> str:
        offers = self.offers(request.cpus_per_node is not None, request.memory_mb_per_node is not None)
        return f"cluster offers: {offers}"


def required_domain(request: Request) -> str | None:
    """The topology label whose one value all of a gang's nodes must share, if they must."""
    return request.topology if request.nodes > 1 and request.topology_required else None


def largest_domain(nodes: Iterable[Node], label: str) -> int:
    """The most of these nodes that share one value of ``label`` (a node without it is alone)."""
    sizes = Counter(node.labels.get(label) or "node:" + node.name for node in nodes)
    return max(sizes.values(), default=0)


def never_runs(request: Request, nodes: Sequence[Node], shapes: ClusterShapes) -> str | None:
    """Why the request could never run on these registered nodes (``shapes`` is theirs): too large for every
    node, or a gang that no topology domain holds; None if it could run once they are empty and ready."""
    return shapes.never_fits(request) or no_domain_holds(request, nodes, shapes)


class NodesAwaited:
    """Which requests fit the registered nodes but not the READY ones, were they all empty: such a job waits
    for drained or lost nodes to come back, whatever else keeps it out (its team's quota). Kept per request."""

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot
        self._ready: tuple[tuple[Node, ...], ClusterShapes] | None = None  # built when first needed
        self._known: dict[Request, bool] = {}

    def waits(self, request: Request) -> bool:
        snapshot = self._snapshot
        if not snapshot.unavailable_shapes:
            return False
        found = self._known.get(request)
        if found is None:
            if self._ready is None:
                ready = tuple(n for n in snapshot.nodes if n.state == NodeState.READY)
                self._ready = (ready, snapshot.shapes.without(snapshot.unavailable_shapes))
            nodes, shapes = self._ready
            found = self._known[request] = never_runs(request, snapshot.nodes, snapshot.shapes) is None and (
                not nodes or never_runs(request, nodes, shapes) is not None
            )
        return found

    def unless(self, quota: Callable[[Job, Request], str | None]) -> Callable[[Job, Request], str | None]:
        """``quota`` (why a job is kept out), silent for a job that waits for nodes to come back."""
        if not self._snapshot.unavailable_shapes:  # no node to come back: ``quota`` itself
            return quota
        return lambda job, request: None if self.waits(request) else quota(job, request)


def no_domain_holds(request: Request, nodes: Sequence[Node], shapes: ClusterShapes) -> str | None:
    """Why a gang that must stay in one topology domain fits no domain of these registered nodes
    (``shapes`` is theirs), were they all empty and ready; None if one could hold it."""
    label = required_domain(request)
    if label is None or not nodes:
        return None
    from corral.sched import carry

    types: Sequence[str | None] = shapes.acceptable_types(request) if request.gpus_per_node > 0 else [None]
    with_shapes = [(node, carry.shape_of(node)) for node in nodes]
    most = max(
        (largest_domain((n for n, shape in with_shapes if shape.holds(request, t)), label) for t in types),
        default=0,
    )
    if most >= request.nodes:
        return None
    return (
        f"needs {describe.nodes_with(request, request.gpu_types)}, all in one {label} (topology.required);"
        f" the most one {label} has is {most}"
    )


def _gpus_only(request: Request) -> Request:
    return Request(gpus_per_node=request.gpus_per_node)


def _invalid(request: Request) -> str | None:
    if request.nodes < 1:
        return f"needs at least 1 node, got {request.nodes}"
    if request.gpus_per_node < 0:
        return f"needs 0 or more GPUs per node, got {describe.number(request.gpus_per_node)}"
    return None
