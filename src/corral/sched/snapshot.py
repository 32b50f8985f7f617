"""The scheduler's input (``Snapshot``) and its mutable working copy (``CapacityView``)."""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, TypeVar

from corral.model import (
    EPSILON,
    Allocation,
    FairShare,
    Job,
    LiveAllocation,
    Node,
    NodeState,
    Quotas,
    RunningJob,
)
from corral.sched import carry, holdings
from corral.sched.domains import DomainSizes
from corral.sched.node_capacity import IndexEntries, NodeCapacity, NodeRanker, Rank

if TYPE_CHECKING:
    from corral.sched.feasibility import ClusterShapes
    from corral.sched.plan import Placement


@dataclass(frozen=True)
class Snapshot:
    """Everything one scheduling cycle looks at, as read-only values."""

    nodes: tuple[Node, ...] = ()
    live: tuple[LiveAllocation, ...] = ()  # held now, including tasks still stopping
    pending: tuple[Job, ...] = ()  # waiting to be placed, in any order
    running: tuple[RunningJob, ...] = ()  # jobs holding ``live`` allocations, for backfill and preemption
    quotas: Quotas = field(default_factory=dict)  # team → GPU type → quota; empty: no quotas
    fair_share: FairShare | None = None  # decayed usage by team and user; None: no fair share
    gpu_speed: Mapping[str, float] = field(default_factory=dict)  # run-time speed per GPU type (default 1.0)
    team_parents: Mapping[str, str] = field(default_factory=dict)  # team → parent team; unlisted: a top-level team

    def __post_init__(self) -> None:
        _check_unique("node", [n.name for n in self.nodes])
        _check_unique("pending job", [j.id for j in self.pending])
        _check_unique("running job", [j.id for j in self.running])

    def view(self, gpu_ranker: NodeRanker, cpu_ranker: NodeRanker) -> CapacityView:
        """A fresh ``CapacityView`` of this snapshot: the first one per pair of rankers comes from
        ``carry`` (the last snapshot's, brought up to date), later ones are copies of it kept here."""
        key = (gpu_ranker, cpu_ranker)
        pristine = self._views.get(key)
        if pristine is None:
            pristine = self._views[key] = carry.pristine_view(self, gpu_ranker, cpu_ranker)
        return pristine.copy()

    def worked(self, view: CapacityView, taken: list[Placement]) -> None:
        """``view`` is a copy of this snapshot's with ``taken`` taken on it, which no one changes any more: the
        view of the next snapshot may start from it (``carry.keep_worked``)."""
        carry.keep_worked(self, view._gpu_ranker, view._cpu_ranker, view, taken)

    @cached_property
    def shapes(self) -> ClusterShapes:
        """The registered nodes by shape (any state), for "could it ever fit?" (computed once)."""
        return carry.shapes_of(self.nodes)

    @cached_property
    def unavailable_shapes(self) -> ClusterShapes:
        """The registered nodes that are not READY, by shape (computed once)."""
        return carry.shapes_of(tuple(n for n in self.nodes if n.state != NodeState.READY))

    @cached_property
    def _views(self) -> dict[tuple[NodeRanker, NodeRanker], CapacityView]:
        return {}

    def allocations_of(self) -> Mapping[str, tuple[Allocation, ...]]:
        """Live allocations grouped by job id, in a stable order (read-only; computed once)."""
        return self._grouped_view

    @cached_property
    def live_by_node(self) -> dict[str, list[LiveAllocation]]:
        """``live`` grouped by node name, each node's in the snapshot's order (computed once)."""
        by_node: dict[str, list[LiveAllocation]] = {}
        for live in self.live:
            node = live.allocation.node
            held = by_node.get(node)
            if held is None:
                by_node[node] = [live]
            else:
                held.append(live)
        return by_node

    @cached_property
    def live_set(self) -> frozenset[LiveAllocation]:
        """``live`` as a set (computed once)."""
        return frozenset(self.live)

    @cached_property
    def live_in_order(self) -> tuple[LiveAllocation, ...]:
        """``live`` sorted by node, job and GPUs: the order every view applies them in (computed once;
        each node's part is reused from the last snapshot whose allocations there were the same)."""
        by_node = self.live_by_node
        return tuple(a for name in sorted(by_node) for a in carry.ordered_on_node(name, by_node[name]))

    @cached_property
    def _grouped_view(self) -> Mapping[str, tuple[Allocation, ...]]:
        return holdings.grouped_by_job(self)


def _check_unique(what: str, names: list[str]) -> None:
    if len(set(names)) != len(names):
        dupes = sorted(name for name, count in Counter(names).items() if count > 1)
        raise ValueError(f"duplicate {what} names in snapshot: {', '.join(dupes)}")


_NodeEntry = tuple[Rank, str]
_GpuEntry = tuple[float, Rank, str, int]
_T = TypeVar("_T", _NodeEntry, _GpuEntry)


class CapacityView:
    """Free capacity of the READY nodes, indexed per GPU type, for placing and what-if.

    Indexes: per GPU type and count of empty GPUs of that type, the nodes sorted by
    ``(gpu_rank, name)``; per GPU type, the partly allocated GPUs sorted by remaining
    capacity; and all nodes sorted by ``(cpu_rank, name)`` for CPU-only work. A change to
    one node re-sorts that node only.
    """

    def __init__(self, snapshot: Snapshot, gpu_ranker: NodeRanker, cpu_ranker: NodeRanker) -> None:
        self._gpu_ranker = gpu_ranker
        self._cpu_ranker = cpu_ranker
        self.nodes: dict[str, NodeCapacity] = {
            n.name: NodeCapacity(n) for n in sorted(snapshot.nodes, key=lambda n: n.name) if n.state == NodeState.READY
        }
        for live in snapshot.live_in_order:
            node = self.nodes.get(live.allocation.node)
            if node is not None:
                node._add(live.allocation, +1)
        self.gpu_types: tuple[str, ...] = tuple(sorted({t for n in self.nodes.values() for t in n.gpu_types}))
        self._empty: dict[str, dict[int, list[_NodeEntry]]] = {t: {} for t in self.gpu_types}
        self._shared: dict[str, list[_GpuEntry]] = {t: [] for t in self.gpu_types}
        self._hosts: list[_NodeEntry] | None = None  # built when first asked for (``hosts``), then kept
        self._domains = DomainSizes()
        for node in self.nodes.values():
            self._index(node)
        self.version = 0  # bumped by every change, so callers can keep results that depend on it
        self._own = set(self.nodes)  # nodes no other view shares: changed in place

    @classmethod
    def assemble(
        cls, ranked: Iterable[tuple[NodeCapacity, IndexEntries]], gpu_ranker: NodeRanker, cpu_ranker: NodeRanker
    ) -> CapacityView:
        """The view of these nodes, in name order, each with its ranks set by these rankers and its
        ``index_entries()``: as ``CapacityView(snapshot, …)`` builds it from the same nodes and allocations.
        The nodes are shared, never changed: the view copies a node before changing it."""
        view = cls.__new__(cls)
        view._gpu_ranker, view._cpu_ranker = gpu_ranker, cpu_ranker
        view.nodes = {}
        empty: dict[str, dict[int, list[_NodeEntry]]] = {}
        shared: dict[str, list[_GpuEntry]] = {}
        types: set[str] = set()
        for node, (empties, shares) in ranked:
            view.nodes[node.name] = node
            node.entries = (empties, shares)
            types.update(node.gpu_types)
            entry = (node.gpu_rank, node.name)
            for gpu_type, count in empties:
                empty.setdefault(gpu_type, {}).setdefault(count, []).append(entry)
            for gpu_type, remaining, index in shares:
                shared.setdefault(gpu_type, []).append((remaining, node.gpu_rank, node.name, index))
        view.gpu_types = tuple(sorted(types))
        view._empty = {t: {c: sorted(entries) for c, entries in empty.get(t, {}).items()} for t in view.gpu_types}
        view._shared = {t: sorted(shared.get(t, ())) for t in view.gpu_types}
        view._hosts = None
        view.version = 0
        view._own = set()
        view._domains = DomainSizes()
        return view

    def copy(self) -> CapacityView:
        """An independent copy: changes to one never show in the other. The two share their nodes until
        one of them changes a node, which it copies first."""
        twin = CapacityView.__new__(CapacityView)
        twin._gpu_ranker, twin._cpu_ranker, twin.gpu_types = self._gpu_ranker, self._cpu_ranker, self.gpu_types
        twin.nodes = dict(self.nodes)
        twin._own, self._own = set(), set()
        twin._empty = {t: {count: list(entries) for count, entries in b.items()} for t, b in self._empty.items()}
        twin._shared = {t: list(entries) for t, entries in self._shared.items()}
        twin._hosts = None if self._hosts is None else list(self._hosts)
        twin.version = 0
        twin._domains = self._domains.copy()
        return twin

    def forget_lookups(self) -> None:
        """Drop what was built on first use (the CPU-only order, domain sizes), as a view new from a snapshot
        has none: each one kept is brought up to date at every change of a node, used or not. The domains'
        members stay: they change with the nodes only, never with what is free on them."""
        self._hosts = None
        self._domains = self._domains.without_sizes()

    def nodes_with_empty(self, gpu_type: str, count: int) -> Iterator[NodeCapacity]:
        """Nodes with at least ``count`` empty GPUs of the type, preferred first."""
        buckets = [b for c, b in self._empty.get(gpu_type, {}).items() if c >= count and b]
        entries = buckets[0] if len(buckets) == 1 else heapq.merge(*buckets)
        for _, name in entries:
            yield self.nodes[name]

    def domain_sizes(self, label: str, gpu_type: str, slots: int) -> Mapping[str | None, int]:
        """Per value of the label (None: nodes without it), how many nodes have ``slots`` empty GPUs of the type."""
        return self._domains.sizes((label, gpu_type, slots), self.nodes_with_empty(gpu_type, slots))

    def domain_members(self, label: str) -> Mapping[str, tuple[str, ...]]:
        """The names of the nodes with each value of the label."""
        return self._domains.members(label, self.nodes.values())

    def shared_with_room(self, gpu_type: str, fraction: float) -> Iterator[tuple[float, NodeCapacity, int]]:
        """Partly allocated GPUs of the type with ``fraction`` left: ``(remaining, node, index)``, tightest first."""
        entries = self._shared.get(gpu_type, [])
        for remaining, _, name, index in entries[bisect_left(entries, fraction - EPSILON, key=_remaining) :]:
            yield remaining, self.nodes[name], index

    def hosts(self) -> Iterator[NodeCapacity]:
        """All nodes in CPU-only preference order."""
        if self._hosts is None:
            # Built on first use: a cycle that places no CPU-only job never pays for keeping it sorted.
            self._hosts = sorted((node.cpu_rank, node.name) for node in self.nodes.values())
        for _, name in self._hosts:
            yield self.nodes[name]

    def apply(self, placement: Placement) -> None:
        """Take the placement's resources."""
        self._change(placement, +1)

    def revert(self, placement: Placement) -> None:
        """Give back what ``apply`` took for the same placement."""
        self._change(placement, -1)

    def take(self, allocations: Iterable[Allocation]) -> None:
        """Take held resources (a running job's, a reservation's); allocations off READY nodes are ignored."""
        self._change_allocations([a for a in allocations if a.node in self.nodes], +1, "")

    def release(self, allocations: Iterable[Allocation]) -> None:
        """Give back what ``take`` took for the same allocations."""
        self._change_allocations([a for a in allocations if a.node in self.nodes], -1, "")

    def exchange(self, released: Iterable[Allocation], taken: Iterable[Allocation]) -> None:
        """``release(released)``, then ``take(taken)``, re-indexing each node once."""
        nodes = self.nodes
        changes = [(a, -1) for a in released if a.node in nodes]
        changes += [(a, +1) for a in taken if a.node in nodes]
        self._apply_changes(changes, "")

    def _change(self, placement: Placement, sign: int) -> None:
        self._change_allocations(placement.allocations, sign, placement.job_id)

    def _change_allocations(self, allocations: Iterable[Allocation], sign: int, job_id: str) -> None:
        """Apply the allocations in order; each node they touch is re-indexed once, after all of them."""
        self._apply_changes([(a, sign) for a in allocations], job_id)

    def _apply_changes(self, changes: list[tuple[Allocation, int]], job_id: str) -> None:
        self.version += 1
        touched: dict[str, NodeCapacity] = {}
        for alloc, _ in changes:
            node = self.nodes.get(alloc.node)
            if node is None:
                raise ValueError(f"placement of job {job_id} names {alloc.node!r}, which is not a READY node")
            touched[alloc.node] = node
        for name in [name for name in touched if name not in self._own]:
            touched[name] = self.nodes[name] = touched[name].copy()
            self._own.add(name)
        for node in touched.values():
            self._unindex(node)
        for alloc, sign in changes:
            touched[alloc.node]._add(alloc, sign)
        for node in touched.values():
            self._index(node)

    def _index(self, node: NodeCapacity) -> None:
        node.gpu_rank = gpu_rank = self._gpu_ranker(node)
        node.cpu_rank = self._cpu_ranker(node)
        empties, shares = node.entries = node.index_entries()
        entry = (gpu_rank, node.name)
        for gpu_type, count in empties:
            insort(self._empty[gpu_type].setdefault(count, []), entry)
        for gpu_type, remaining, index in shares:
            insort(self._shared[gpu_type], (remaining, gpu_rank, node.name, index))
        if self._hosts is not None:
            insort(self._hosts, (node.cpu_rank, node.name))
        if self._domains:
            self._domains.count(node, empties, +1)

    def _unindex(self, node: NodeCapacity) -> None:
        empties, shares = node.entries  # what ``_index`` made entries of
        entry = (node.gpu_rank, node.name)
        for gpu_type, count in empties:
            _remove(self._empty[gpu_type][count], entry)
        for gpu_type, remaining, index in shares:
            _remove(self._shared[gpu_type], (remaining, node.gpu_rank, node.name, index))
        if self._hosts is not None:
            _remove(self._hosts, (node.cpu_rank, node.name))
        if self._domains:
            self._domains.count(node, empties, -1)


def _remove(entries: list[_T], entry: _T) -> None:
    del entries[bisect_left(entries, entry)]


def _remaining(entry: _GpuEntry) -> float:
    return entry[0]
