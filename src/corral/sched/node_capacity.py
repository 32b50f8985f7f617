"""What is still free on one READY node (``NodeCapacity``), and how nodes are ranked."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import TypeVar

from corral.model import EPSILON, FULL_GPU, Allocation, Node, Request

Rank = tuple[float, ...]
"""Preference of a node: lower sorts first; the node name breaks ties."""

NodeRanker = Callable[["NodeCapacity"], Rank]
"""Ranks a node from its own free capacity only, so indexes can stay sorted by rank."""

# Fractions are rounded so that apply/revert and summing in another order give equal floats.
_DIGITS = 12
_ALMOST_FULL = FULL_GPU - EPSILON  # a GPU used up to here (and past EPSILON) is partly allocated


IndexEntries = tuple[tuple[tuple[str, int], ...], tuple[tuple[str, float, int], ...]]
"""``NodeCapacity.index_entries()``."""


class NodeCapacity:
    """What is still free on one READY node. Change it only through ``CapacityView``."""

    __slots__ = (
        "_by_type",
        "cpu_rank",
        "entries",
        "free_cpus",
        "free_gpus",
        "free_memory_mb",
        "gpu_rank",
        "gpu_types",
        "name",
        "node",
        "partial",
        "type_counts",
        "used",
    )

    def __init__(self, node: Node) -> None:
        self.node = node
        self.name = node.name
        self.used: dict[int, float] = {g.index: 0.0 for g in node.gpus}  # allocated fraction per GPU index
        self._by_type: dict[str, tuple[int, ...]] = {}
        types = {g.type for g in node.gpus}
        if len(types) == 1:  # most nodes: one GPU type
            self._by_type[types.pop()] = shared(tuple(sorted(g.index for g in node.gpus)))
        else:
            for gpu in sorted(node.gpus, key=lambda g: g.index):
                self._by_type[gpu.type] = (*self._by_type.get(gpu.type, ()), gpu.index)
        self.gpu_types = shared(tuple(sorted(self._by_type)))
        self.type_counts = shared(tuple(shared((t, len(self._by_type[t]))) for t in self.gpu_types))  # GPUs per type
        self.free_gpus = len(node.gpus)  # GPUs with nothing allocated, any type
        self.partial = 0  # GPUs partly allocated (shared by fractional jobs), any type
        self.free_cpus = rounded(node.cpus)
        self.free_memory_mb = node.memory_mb
        self.gpu_rank: Rank = ()
        self.cpu_rank: Rank = ()
        self.entries: IndexEntries = ((), ())  # as a view last indexed it (``index_entries()`` then)

    def copy(self) -> NodeCapacity:
        """An independent copy (the node and its GPU layout are shared: they never change)."""
        twin = NodeCapacity.__new__(NodeCapacity)
        twin.node, twin.name, twin._by_type, twin.gpu_types = self.node, self.name, self._by_type, self.gpu_types
        twin.type_counts = self.type_counts
        twin.used = dict(self.used)
        twin.free_gpus, twin.free_cpus, twin.free_memory_mb = self.free_gpus, self.free_cpus, self.free_memory_mb
        twin.partial = self.partial
        twin.gpu_rank, twin.cpu_rank, twin.entries = self.gpu_rank, self.cpu_rank, self.entries
        return twin

    def indices(self, gpu_type: str) -> tuple[int, ...]:
        return self._by_type.get(gpu_type, ())

    def empty_gpus(self, gpu_type: str) -> list[int]:
        """Indices of the GPUs of this type with nothing allocated, lowest first."""
        if self.free_gpus == 0:  # a full node: most of a busy cluster's
            return []
        return [i for i in self.indices(gpu_type) if self.used[i] <= EPSILON]

    def shared_gpus(self, gpu_type: str) -> list[tuple[float, int]]:
        """``(remaining, index)`` of the partly allocated GPUs of this type."""
        if not self.partial:  # no GPU here is shared: most nodes
            return []
        return [
            (rounded(FULL_GPU - u), i) for i in self.indices(gpu_type) if EPSILON < (u := self.used[i]) < _ALMOST_FULL
        ]

    def fits_host(self, request: Request) -> bool:
        """Whether the request's CPUs and memory per node fit what is free here, and its container
        image, if it has one, can run here."""
        cpus, memory = request.cpus_per_node, request.memory_mb_per_node
        return (
            (cpus is None or cpus <= self.free_cpus + EPSILON)
            and (memory is None or memory <= self.free_memory_mb)
            and (not request.container or bool(self.node.container_runtime))
        )

    @staticmethod
    def host_matters(request: Request) -> bool:
        """Whether ``fits_host`` can turn any node away for this request (else it is always true)."""
        return request.cpus_per_node is not None or request.memory_mb_per_node is not None or request.container

    def index_entries(self) -> tuple[tuple[tuple[str, int], ...], tuple[tuple[str, float, int], ...]]:
        """What ``CapacityView`` indexes this node under: ``(type, empty GPUs)`` for each type with an
        empty GPU, and ``(type, remaining, index)`` for each partly allocated GPU."""
        if len(self.gpu_types) == 1 and not self.partial:  # most nodes: its empty GPUs are all of its one type
            return _of_one_type(self.gpu_types[0], self.free_gpus)
        empty: list[tuple[str, int]] = []
        shared: list[tuple[str, float, int]] = []
        for gpu_type in self.gpu_types:
            if count := len(self.empty_gpus(gpu_type)):
                empty.append((gpu_type, count))
            shared.extend((gpu_type, remaining, index) for remaining, index in self.shared_gpus(gpu_type))
        return tuple(empty), tuple(shared)

    def _add(self, alloc: Allocation, sign: int) -> None:
        used, fraction = self.used, alloc.gpu_fraction
        whole = fraction == FULL_GPU
        free = self.free_gpus
        for index in alloc.gpus:
            was = used.get(index)
            if was is None:
                continue  # a stale allocation on a GPU the node no longer reports
            if whole and (was == 0.0 or was == FULL_GPU):
                # A whole GPU on one empty or full: a whole number (which rounding would leave as it is), and
                # the GPU is not partly allocated before or after. (Below zero: zero, as ``max`` would give.)
                now = was + sign
                if now < 0.0:
                    now = 0.0
                used[index] = now
            else:
                now = used[index] = max(0.0, rounded(was + sign * fraction))
                self.partial += (EPSILON < now < _ALMOST_FULL) - (EPSILON < was < _ALMOST_FULL)
            free += (now <= EPSILON) - (was <= EPSILON)
        self.free_gpus = free
        if alloc.cpus:  # (``free_cpus`` is always rounded: taking nothing leaves it as it is)
            self.free_cpus = rounded(self.free_cpus - sign * alloc.cpus)
        if alloc.memory_mb:
            self.free_memory_mb -= sign * alloc.memory_mb


_T = TypeVar("_T", bound=tuple[object, ...])
_SHARED: dict[tuple[object, ...], tuple[object, ...]] = {}
_SHARED_AT_MOST = 4096


def shared(value: _T) -> _T:
    """One object for equal small tuples that many nodes hold (their GPU indices, types, ranks): a cluster of
    10,000 nodes then keeps a few of them, not tens of thousands that the collector walks after a cycle."""
    found = _SHARED.get(value)
    if found is None:
        if len(_SHARED) >= _SHARED_AT_MOST:
            _SHARED.clear()
        found = _SHARED[value] = value
    return found  # type: ignore[return-value]


@cache
def _of_one_type(gpu_type: str, empty: int) -> IndexEntries:
    """``index_entries()`` of a node of one GPU type with no GPU partly allocated."""
    return ((gpu_type, empty),) if empty else (), ()


def rounded(value: float) -> float:
    """A share of GPUs or CPUs as capacity keeps it (so that sums of fractions compare exactly)."""
    return round(value, _DIGITS)
