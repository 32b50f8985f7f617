"""How many nodes of each topology domain can take one node's share of a whole-GPU gang, kept current.

A gang goes to the topology domain (e.g. the rack) with the fewest candidate nodes that still holds it
whole. Counting the candidates of every domain means walking every node with enough empty GPUs, for
each gang tried: thousands of nodes when a cluster starts empty. So a ``CapacityView`` keeps, per
(label, GPU type, empty GPUs needed) asked for once, the candidates of each domain, and brings the counts
up to date as nodes change; the gang then looks only at the nodes of the domain it picks.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from corral.sched.node_capacity import NodeCapacity

SizeKey = tuple[str, str, int]
"""(topology label, GPU type, empty GPUs of that type a node needs)."""


class DomainSizes:
    """Per ``SizeKey`` asked for: domain (the label's value; None for the nodes without the label) →
    how many nodes there have the empty GPUs. Domain members are fixed: a view's nodes never change."""

    __slots__ = ("_by_type", "_members", "_sizes")

    def __init__(self) -> None:
        self._sizes: dict[SizeKey, dict[str | None, int]] = {}
        self._by_type: dict[str, list[tuple[str, int, dict[str | None, int]]]] = {}  # ``_sizes`` by GPU type
        self._members: dict[str, Mapping[str, tuple[str, ...]]] = {}  # label → value → node names

    def without_sizes(self) -> DomainSizes:
        """No counts kept, the domain members as they are (they depend on the nodes alone, which stay)."""
        twin = DomainSizes()
        twin._members = self._members
        return twin

    def copy(self) -> DomainSizes:
        twin = DomainSizes.__new__(DomainSizes)
        twin._sizes, twin._by_type = {}, {}
        for key, sizes in self._sizes.items():
            twin._keep(key, dict(sizes))
        twin._members = self._members  # never changed once built
        return twin

    def _keep(self, key: SizeKey, sizes: dict[str | None, int]) -> None:
        self._sizes[key] = sizes
        self._by_type.setdefault(key[1], []).append((key[0], key[2], sizes))

    def sizes(self, key: SizeKey, candidates: Iterable[NodeCapacity]) -> Mapping[str | None, int]:
        """The counts for ``key``; ``candidates`` (the nodes with the empty GPUs now) are read only the first
        time the key is asked for, after which the counts are kept current by ``count``."""
        found = self._sizes.get(key)
        if found is None:
            found = {}
            label = key[0]
            for node in candidates:
                value = node.node.labels.get(label)
                found[value] = found.get(value, 0) + 1
            self._keep(key, found)
        return found

    def members(self, label: str, nodes: Iterable[NodeCapacity]) -> Mapping[str, tuple[str, ...]]:
        """The names of the nodes of each domain of ``label`` (of ``nodes``, the view's nodes)."""
        found = self._members.get(label)
        if found is None:
            grouped: dict[str, list[str]] = {}
            for node in nodes:
                value = node.node.labels.get(label)
                if value is not None:
                    grouped.setdefault(value, []).append(node.name)
            found = {value: tuple(names) for value, names in grouped.items()}
            self._members = {**self._members, label: found}  # copies share the old mapping: never change it
        return found

    def count(self, node: NodeCapacity, empties: Iterable[tuple[str, int]], sign: int) -> None:
        """Count the node in (+1) or out (-1) of every kept key it is a candidate for, given its empty GPUs
        per type (``NodeCapacity.index_entries``)."""
        by_type = self._by_type
        for gpu_type, empty in empties:
            kept = by_type.get(gpu_type)
            if kept is None:
                continue
            for label, slots, sizes in kept:
                if empty >= slots:
                    value = node.node.labels.get(label)
                    sizes[value] = sizes.get(value, 0) + sign

    def __bool__(self) -> bool:
        return bool(self._sizes)


def fewest_holding(
    sizes: Mapping[str | None, int], count: int, in_order: Iterator[NodeCapacity], label: str
) -> str | None:
    """The domain with the fewest candidates that still has ``count`` of them (None if none has): among
    equals, the one whose best candidate comes first in ``in_order`` (every candidate, best first)."""
    whole = [(size, value) for value, size in sizes.items() if value is not None and size >= count]
    if not whole:
        return None
    least = min(size for size, _ in whole)
    tied = {value for size, value in whole if size == least}
    if len(tied) == 1:
        return next(iter(tied))
    for node in in_order:
        value = node.node.labels.get(label)
        if value in tied:
            return value
    raise AssertionError("a counted domain has no candidate")
