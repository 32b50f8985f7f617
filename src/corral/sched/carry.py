"""Work carried from one snapshot to the next: the capacity view of what is free, and node shapes.

Consecutive snapshots mostly share their nodes (the same ``Node`` values, in the same order) and
most of their live allocations. Building the view of 10,000 nodes from scratch costs far more
than applying the allocations that changed since the last snapshot, so the last view built is
kept (one per pair of rankers) and brought up to date. It is a memo: a view obtained through it
equals one built from scratch (the tests compare them field by field), so a plan never depends
on which snapshots came before.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

from corral.model import LiveAllocation, Node, NodeState

if TYPE_CHECKING:
    from corral.sched.feasibility import ClusterShapes
    from corral.sched.snapshot import CapacityView, NodeRanker, Snapshot

_CHANGED_AT_MOST = 0.5  # past this share of allocations changed, building afresh is as cheap


@dataclass
class _Kept:
    nodes: tuple[Node, ...]
    live: frozenset[LiveAllocation]
    view: CapacityView


_lock = threading.Lock()
_views: dict[tuple[NodeRanker, NodeRanker], _Kept] = {}
_shapes: list[tuple[tuple[Node, ...], ClusterShapes]] = []
_layouts: list[tuple[tuple[Node, ...], GpuLayout]] = []

GpuLayout = tuple[Mapping[tuple[str, int], str], Mapping[str, float]]
"""Every GPU's type by (node, index), and the GPUs of each type on READY nodes."""


def pristine_view(snapshot: Snapshot, gpu_ranker: NodeRanker, cpu_ranker: NodeRanker) -> CapacityView:
    """A view of what is free in ``snapshot``, as ``CapacityView(snapshot, …)`` builds it: a copy of
    the kept one brought up to date when the nodes are the same, else built afresh (and kept)."""
    from corral.sched.snapshot import CapacityView

    key = (gpu_ranker, cpu_ranker)
    live = frozenset(snapshot.live)
    if len(live) != len(snapshot.live):  # the same allocation listed twice: build as given
        return CapacityView(snapshot, gpu_ranker, cpu_ranker)
    with _lock:
        kept = _views.get(key)
        if kept is not None and _same_nodes(kept.nodes, snapshot.nodes):
            gone, new = kept.live - live, live - kept.live
            if len(gone) + len(new) <= _CHANGED_AT_MOST * max(1, len(live)):
                kept.view.release(a.allocation for a in sorted(gone, key=_order))
                kept.view.take(a.allocation for a in sorted(new, key=_order))
                kept.live = live
                return kept.view.copy()
        view = CapacityView(snapshot, gpu_ranker, cpu_ranker)
        _views[key] = _Kept(snapshot.nodes, live, view)
        return view.copy()


def shapes_of(nodes: tuple[Node, ...]) -> ClusterShapes:
    """``ClusterShapes(nodes)``, reused while the nodes are the same values."""
    from corral.sched.feasibility import ClusterShapes

    with _lock:
        for known, shapes in _shapes:
            if _same_nodes(known, nodes):
                return shapes
    shapes = ClusterShapes(nodes)
    with _lock:
        _shapes[:] = [(nodes, shapes), *_shapes[:1]]  # the registered nodes, and the last not-ready subset
    return shapes


def gpu_layout(nodes: tuple[Node, ...]) -> GpuLayout:
    """The GPU layout of the nodes (read-only), reused while the nodes are the same values."""
    with _lock:
        for known, layout in _layouts:
            if _same_nodes(known, nodes):
                return layout
    type_at: dict[tuple[str, int], str] = {}
    capacity: dict[str, float] = {}
    for node in nodes:
        for gpu in node.gpus:
            type_at[(node.name, gpu.index)] = gpu.type
            if node.state == NodeState.READY:
                capacity[gpu.type] = capacity.get(gpu.type, 0.0) + 1.0
    layout = (MappingProxyType(type_at), MappingProxyType(capacity))
    with _lock:
        _layouts[:] = [(nodes, layout)]
    return layout


def _same_nodes(a: Sequence[Node], b: Sequence[Node]) -> bool:
    return len(a) == len(b) and all(x is y or x == y for x, y in zip(a, b, strict=True))


def _order(live: LiveAllocation) -> tuple[str, str, tuple[int, ...]]:
    return (live.allocation.node, live.job_id, live.allocation.gpus)
