"""Work carried from one snapshot to the next: the capacity view of what is free, and node shapes.

Consecutive snapshots mostly share their nodes (the same ``Node`` values, in the same order) and
most of their live allocations. Building the view of 10,000 nodes from scratch costs far more
than applying the allocations that changed since the last snapshot, so the last view built is
kept (one per pair of rankers) and brought up to date. A snapshot of other nodes (the simulator
passes a different subset of them every cycle) is assembled from each node's capacity as last
computed, recomputed only for the nodes whose allocations changed. It is a memo: a view obtained
through it equals one built from scratch (the tests compare them field by field), so a plan never
depends on which snapshots came before.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

from corral.model import Allocation, LiveAllocation, Node, NodeState

if TYPE_CHECKING:
    from corral.sched.feasibility import ClusterShapes, _Shape
    from corral.sched.node_capacity import IndexEntries, NodeCapacity, NodeRanker
    from corral.sched.plan import Placement
    from corral.sched.snapshot import CapacityView, Snapshot

_CHANGED_AT_MOST = 0.5  # past this share of allocations changed, assembling from nodes is as cheap
_NODES_KEPT = 200_000  # per-node memos are dropped past this many node names (a bound, never reached in one cluster)


@dataclass
class _Kept:
    nodes: tuple[Node, ...]
    live: tuple[LiveAllocation, ...]  # the snapshot's allocations ``view`` shows taken, with ``taken``
    view: CapacityView
    count: int  # how many allocations ``view`` shows taken (each one listed twice counts twice)
    live_set: set[LiveAllocation] | None = None  # brought up to date in place: see ``pristine_view``
    taken: list[Placement] | None = None  # taken on ``view`` too (``keep_worked``), not yet in ``live_set``

    def live_now(self) -> set[LiveAllocation]:
        """What ``view`` shows taken, as a set: ``count`` is its size unless some allocation is shown twice."""
        if self.live_set is None:
            self.live_set = set(self.live)
        if self.taken is not None:
            self.live_set |= {LiveAllocation(p.job_id, a) for p in self.taken for a in p.allocations}
            self.taken = None
        return self.live_set


@dataclass
class _NodeKept:
    """One node's capacity under one pair of rankers, with the allocations it was computed from."""

    node: Node
    live: tuple[LiveAllocation, ...]  # in view order
    capacity: NodeCapacity  # ranked; shared by the views assembled from it, which never change it
    entries: IndexEntries


_lock = threading.RLock()
_views: dict[tuple[NodeRanker, NodeRanker], _Kept] = {}
_capacities: dict[tuple[NodeRanker, NodeRanker], dict[str, _NodeKept]] = {}
_ordered: dict[str, _OnNode] = {}
_node_shapes: dict[str, tuple[Node, _Shape]] = {}
_shapes: list[tuple[tuple[Node, ...], ClusterShapes]] = []
_layouts: list[tuple[tuple[Node, ...], GpuLayout]] = []

GpuLayout = tuple[Mapping[str, Mapping[int, str]], Mapping[str, float]]
"""Each node's GPU types by GPU index (a dictionary per node: of strings and numbers only, so the collector never
walks it, as it would walk a key per GPU), and the GPUs of each type on READY nodes."""


def pristine_view(snapshot: Snapshot, gpu_ranker: NodeRanker, cpu_ranker: NodeRanker) -> CapacityView:
    """A view of what is free in ``snapshot``, as ``CapacityView(snapshot, …)`` builds it: a copy of
    the kept one brought up to date when the nodes are the same, else assembled from its nodes (and kept)."""
    key = (gpu_ranker, cpu_ranker)
    with _lock:
        kept = _views.get(key)
        if kept is not None and _same_nodes(kept.nodes, snapshot.nodes):
            live = snapshot.live_set
            before = kept.live_now()
            gone, new = before - live, live - before
            # The same allocation listed twice counts twice in a view: only a set of distinct ones is a diff.
            distinct = len(live) == len(snapshot.live) and len(before) == kept.count
            if distinct and len(gone) + len(new) <= _CHANGED_AT_MOST * max(1, len(live)):
                released = (a.allocation for a in sorted(gone, key=_order))
                kept.view.exchange(released, (a.allocation for a in sorted(new, key=_order)))
                # The kept set changes in place rather than being replaced by ``live``: it then stays in the
                # collector's old generation, and the young collection after a cycle does not walk it. It takes
                # the snapshot's own objects (copied with their hashes): the next diff finds those that stay by
                # identity, where equal copies (such as those made of a cycle's placements) would each be compared.
                before.clear()
                before |= live
                kept.live, kept.count = snapshot.live, len(snapshot.live)
                return kept.view.copy()
        view = _assembled(snapshot, gpu_ranker, cpu_ranker)
        _views[key] = _Kept(snapshot.nodes, snapshot.live, view, len(snapshot.live))
        return view.copy()


def keep_worked(
    snapshot: Snapshot, gpu_ranker: NodeRanker, cpu_ranker: NodeRanker, view: CapacityView, taken: list[Placement]
) -> None:
    """Keep ``view`` to bring up to date for the next snapshot, in place of the snapshot's own: a copy of
    the snapshot's view with ``taken`` taken on it and nothing else changed, which the caller leaves as it
    is. After a cycle, the next snapshot lists most of what the cycle placed, so less changes from it.
    Kept only in place of the snapshot's own view; the set of what it shows taken is made when the next
    snapshot needs it (``live_now``), and if some allocation is shown twice, that view is built afresh."""
    key = (gpu_ranker, cpu_ranker)
    with _lock:
        kept = _views.get(key)
        if kept is None or kept.live is not snapshot.live or kept.taken is not None:
            return
        if not _same_nodes(kept.nodes, snapshot.nodes):
            return
        view.forget_lookups()
        kept.view, kept.taken = view, taken
        kept.count += sum(len(p.allocations) for p in taken)


def ordered_on_node(name: str, held: list[LiveAllocation]) -> tuple[LiveAllocation, ...]:
    """One node's live allocations sorted by job and GPUs, reused while they are the same values."""
    return _on_node(name, held).ordered


def singles_on_node(name: str, held: list[LiveAllocation]) -> tuple[tuple[str, tuple[Allocation]], ...]:
    """``(job id, (allocation,))`` for each of ``ordered_on_node``, reused as it is."""
    return _on_node(name, held).singles


@dataclass
class _OnNode:
    held: list[LiveAllocation]
    ordered: tuple[LiveAllocation, ...]
    singles: tuple[tuple[str, tuple[Allocation]], ...]


def _on_node(name: str, held: list[LiveAllocation]) -> _OnNode:
    with _lock:
        kept = _ordered.get(name)
        if kept is not None and (kept.held is held or kept.held == held):
            return kept
        ordered = tuple(sorted(held, key=_order))
        if len(_ordered) >= _NODES_KEPT:
            _ordered.clear()
        kept = _ordered[name] = _OnNode(held, ordered, tuple((a.job_id, (a.allocation,)) for a in ordered))
        return kept


def _assembled(snapshot: Snapshot, gpu_ranker: NodeRanker, cpu_ranker: NodeRanker) -> CapacityView:
    """The view assembled from each READY node's capacity, recomputed for the nodes whose allocations
    (or the node itself) changed since it was last computed under these rankers."""
    from corral.sched.node_capacity import NodeCapacity
    from corral.sched.snapshot import CapacityView

    kept = _capacities.setdefault((gpu_ranker, cpu_ranker), {})
    if len(kept) >= _NODES_KEPT:
        kept.clear()
    by_node = snapshot.live_by_node
    ranked: list[tuple[NodeCapacity, IndexEntries]] = []
    for node in sorted((n for n in snapshot.nodes if n.state == NodeState.READY), key=_name):
        held = by_node.get(node.name)
        live = ordered_on_node(node.name, held) if held else ()
        known = kept.get(node.name)
        if (
            known is None
            or not (known.live is live or known.live == live)
            or not (known.node is node or known.node == node)
        ):
            capacity = NodeCapacity(node)
            for allocation in live:
                capacity._add(allocation.allocation, +1)
            capacity.gpu_rank, capacity.cpu_rank = gpu_ranker(capacity), cpu_ranker(capacity)
            known = kept[node.name] = _NodeKept(node, live, capacity, capacity.index_entries())
        ranked.append((known.capacity, known.entries))
    return CapacityView.assemble(ranked, gpu_ranker, cpu_ranker)


def shapes_of(nodes: tuple[Node, ...]) -> ClusterShapes:
    """``ClusterShapes(nodes)``, reused while the nodes are the same values (each node's shape is kept)."""
    from corral.sched.feasibility import ClusterShapes

    with _lock:
        for known, shapes in _shapes:
            if _same_nodes(known, nodes):
                return shapes
        counts: Counter[_Shape] = Counter(_shapes_of_nodes(nodes))
        shapes = ClusterShapes(shapes=counts)
        _shapes[:] = [(nodes, shapes), *_shapes[:1]]  # the registered nodes, and the last not-ready subset
        return shapes


def shape_of(node: Node) -> _Shape:
    """The node's full capacity (``_Shape.of``), reused while the node is the same value."""
    return _shapes_of_nodes((node,))[0]


def _shapes_of_nodes(nodes: Sequence[Node]) -> list[_Shape]:
    """``shape_of`` of each node, under one hold of the lock (a cluster's first snapshot asks for all of them)."""
    from corral.sched.feasibility import _Shape

    with _lock:
        if len(_node_shapes) + len(nodes) > _NODES_KEPT:
            _node_shapes.clear()
        kept_shapes, shapes = _node_shapes, []
        for node in nodes:
            kept = kept_shapes.get(node.name)
            if kept is None or not (kept[0] is node or kept[0] == node):
                kept = kept_shapes[node.name] = (node, _Shape.of(node))
            shapes.append(kept[1])
        return shapes


def gpu_layout(nodes: tuple[Node, ...]) -> GpuLayout:
    """The GPU layout of the nodes (read-only), reused while the nodes are the same values."""
    with _lock:
        for known, layout in _layouts:
            if _same_nodes(known, nodes):
                return layout
    type_at: dict[str, Mapping[int, str]] = {}
    capacity: dict[str, float] = {}
    for node in nodes:
        type_at[node.name] = {gpu.index: gpu.type for gpu in node.gpus}
        if node.state == NodeState.READY:
            for gpu in node.gpus:
                capacity[gpu.type] = capacity.get(gpu.type, 0.0) + 1.0
    layout = (MappingProxyType(type_at), MappingProxyType(capacity))
    with _lock:
        _layouts[:] = [(nodes, layout)]
    return layout


def _same_nodes(a: Sequence[Node], b: Sequence[Node]) -> bool:
    return a is b or (len(a) == len(b) and all(x is y or x == y for x, y in zip(a, b, strict=True)))


def _name(node: Node) -> str:
    return node.name


def _order(live: LiveAllocation) -> tuple[str, str, tuple[int, ...], float, float, int]:
    """By node and job, then each field: distinct values never tie, so their order is the snapshot's in no way."""
    a = live.allocation
    return (a.node, live.job_id, a.gpus, a.gpu_fraction, a.cpus, a.memory_mb)


def allocation_order(a: Allocation) -> tuple[str, tuple[int, ...], float, float, int]:
    """One job's allocations in the order of ``_order``."""
    return (a.node, a.gpus, a.gpu_fraction, a.cpus, a.memory_mb)
