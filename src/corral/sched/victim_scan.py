"""The order a victim search scans nodes in: by the cost of each node's cheapest victim, for one cycle;
a tighter bound per node for shares that need several victims there; and the cheapest victims on one node."""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from itertools import accumulate, combinations

from corral.model import Allocation, Request, RunningJob
from corral.sched.node_capacity import NodeCapacity
from corral.sched.node_room import emptiable, fits_without, gpus_short
from corral.sched.snapshot import CapacityView

EXHAUSTIVE = 8  # victims on one node up to which every subset is tried
Cost = tuple[float, int]  # (GPU-seconds lost, jobs newly preempted)
_SLACK_S = 1e-3  # GPU-seconds: lost work is rounded to 6 decimals, so compare with room to spare
Scan = tuple[Cost, str, int, int]  # (its cheapest victim's cost, node, GPUs of the type there, place in the scan)
Beat = tuple[Cost, str] | None  # the (cost, node) of the option a node's victims must beat, if any


def lost_gpu_seconds(job: RunningJob, allocations: Sequence[Allocation], now: datetime) -> float:
    """Work lost by stopping the job now: seconds since its last checkpoint × GPUs it holds."""
    unsaved = job.unsaved_s(now)
    if unsaved == 0.0:
        return 0.0
    if len(allocations) == 1:  # most jobs: the same value as the sum below, without a generator
        only = allocations[0]
        return round(unsaved * (len(only.gpus) * only.gpu_fraction), 6)
    return round(unsaved * sum(len(a.gpus) * a.gpu_fraction for a in allocations), 6)


class ScanOrder:
    """Per GPU type, the nodes hosting victims, cheapest victim first; built on first use, kept for the cycle.

    ``lowest_on`` gives each node's lowest preemptible victim level and ``stopping_on`` the nodes
    with a victim already stopping: a job at or below a node's lowest level that may not reclaim
    quota finds no victim there unless one is stopping."""

    def __init__(self, by_cost: list[tuple[Cost, str]], lowest_on: dict[str, float], stopping_on: set[str]) -> None:
        self._by_cost = by_cost  # (cheapest victim's cost, node), sorted
        self._lowest_on = lowest_on
        self._stopping_on = stopping_on
        self._least = min(lowest_on.values(), default=math.inf)  # at or below it, ``below`` lists no node
        self._every: dict[str | None, list[Scan]] = {}
        self._below: dict[tuple[str | None, int], list[Scan]] = {}

    def every(self, view: CapacityView, gpu_type: str | None) -> list[Scan]:
        """The nodes hosting victims that have GPUs of the type (any node, for a CPU-only request)."""
        order = self._every.get(gpu_type)
        if order is not None:
            return order
        if gpu_type is None:
            order = self._every[None] = [(bound, name, 0, at) for at, (bound, name) in enumerate(self._by_cost)]
            return order
        by_type: dict[str, list[Scan]] = {}  # every GPU type's order, in one pass over the nodes
        nodes = view.nodes
        for bound, name in self._by_cost:
            if (node := nodes.get(name)) is not None:
                for each, count in node.type_counts:
                    if (listed := by_type.get(each)) is None:
                        listed = by_type[each] = []
                    listed.append((bound, name, count, len(listed)))
        for each, listed in by_type.items():
            self._every.setdefault(each, listed)
        return self._every.setdefault(gpu_type, [])

    def below(self, view: CapacityView, gpu_type: str | None, level: int) -> list[Scan]:
        """``every`` less the nodes where a job of ``level`` that may not reclaim quota finds no victim."""
        key = (gpu_type, level)
        order = self._below.get(key)
        if order is None:
            lowest_on, stopping_on = self._lowest_on, self._stopping_on
            if not stopping_on and level <= self._least:  # no node passes: no need to build ``every``
                order = self._below[key] = []
                return order
            order = self._below[key] = [
                entry for entry in self.every(view, gpu_type) if entry[1] in stopping_on or lowest_on[entry[1]] < level
            ]
        return order


class LossBounds:
    """Per node, a lower bound of the work lost by any victim set there that empties enough GPUs for a share:
    it takes at least as many victims as the largest holders would need, and each loses at least as little
    as the cheapest ones. Built per node on first use, kept for the cycle (victims only leave a search's
    reach during a cycle, which can only raise what a set loses)."""

    def __init__(
        self, on_node: Mapping[str, list[str]], cost: Mapping[str, Cost], held: Mapping[str, Sequence[Allocation]]
    ) -> None:
        self._on_node, self._cost, self._held = on_node, cost, held
        self._by_node: dict[str, list[float]] = {}  # the bound by GPUs short, up to all the victims hold
        self._gpus: dict[str, dict[str, int]] = {}  # per node, the GPUs each victim holds there

    def beyond(self, node: NodeCapacity, request: Request, gpu_type: str | None, best: Cost) -> bool:
        """Whether every victim set that could make room for a share here loses more than ``best`` (by more
        than rounding: a set that ties it may still win on fewer jobs or the node's name)."""
        return self.beyond_short(node.name, gpus_short(node, request, gpu_type), best)

    def beyond_short(self, name: str, short: int, best: Cost) -> bool:
        """``beyond`` for a share ``short`` empty GPUs short on the node (``gpus_short``)."""
        if short <= 1:
            return False
        bounds = self._table(name)
        return short >= len(bounds) or bounds[short] > best[0] + _SLACK_S

    def least_lost(self, node: NodeCapacity, request: Request, gpu_type: str | None) -> float:
        """0 where one victim may do; infinite where the node's victims together cannot empty enough."""
        short = gpus_short(node, request, gpu_type)
        if short <= 1:
            return 0.0
        bounds = self._table(node.name)
        return bounds[short] if short < len(bounds) else math.inf

    def too_few(self, name: str, short: int, eligible: Sequence[str]) -> bool:
        """Whether the victims hold fewer than ``short`` GPUs on the node together: none of their sets
        can empty enough there."""
        if short <= 0:
            return False
        gpus = self._gpus.get(name) or self._held_on(name)
        return sum(map(gpus.__getitem__, eligible)) < short

    def _table(self, name: str) -> list[float]:
        """The node's bound by GPUs short (past its end: the victims together cannot empty that many)."""
        bounds = self._by_node.get(name)
        if bounds is not None:
            return bounds
        gpus = self._gpus.get(name) or self._held_on(name)
        cost = self._cost
        if len(gpus) == 1:  # one victim: it alone, whatever it empties
            ((only, held),) = gpus.items()
            bounds = self._by_node[name] = [cost[only][0]] * (held + 1)
            return bounds
        lost = list(accumulate(sorted([cost[v][0] for v in gpus])))
        emptied = list(accumulate(sorted(gpus.values(), reverse=True)))
        bounds = self._by_node[name] = [lost[bisect_left(emptied, held)] for held in range(emptied[-1] + 1)]
        return bounds

    def _held_on(self, name: str) -> dict[str, int]:
        held = self._held
        gpus = self._gpus[name] = {
            v: len(allocations[0].gpus) if len(allocations := held[v]) == 1 else _gpus_on(allocations, name)
            for v in self._on_node[name]
        }
        return gpus


def _gpus_on(allocations: Sequence[Allocation], node: str) -> int:
    """How many GPUs a job holds on the node (whole or in part)."""
    if len(allocations) == 1:  # most jobs: one allocation, on the node that lists them
        return len(allocations[0].gpus)
    return len({i for a in allocations if a.node == node for i in a.gpus})


class VictimSets:
    """Victim sets on one node in the order a search tries them: cheapest first (costs do not change
    within a cycle), only those that may empty enough GPUs and do not lose too much."""

    def __init__(self, cost: Mapping[str, Cost]) -> None:
        self._cost = cost

    def cost(self, victim: str) -> Cost:
        return self._cost[victim]

    def total(self, victims: Sequence[str]) -> Cost:
        cost = self._cost
        if len(victims) == 1:  # most sets: ``sum`` of one float is 0.0 plus it
            only = cost[victims[0]]
            return (round(0.0 + only[0], 6), only[1])
        return (round(sum([cost[v][0] for v in victims]), 6), sum([cost[v][1] for v in victims]))

    def cheapest_first(
        self, eligible: tuple[str, ...], frees: Mapping[str, int], short: int, smallest: int, cap: float
    ) -> Iterable[tuple[Cost, tuple[str, ...]]]:
        """The subsets of ``eligible`` that may empty ``short`` GPUs (``frees``: at most how many each
        victim's release empties) with their costs, cheapest first, leaving out some that lose more than
        ``cap``. When the victims all cost the same, that order is by size, then by ids: ``combinations``
        of the sorted ids yields it directly, one subset at a time, from ``smallest`` victims on."""
        if len({self._cost[v] for v in eligible}) <= 1 and list(eligible) == sorted(eligible):
            return self._by_size(eligible, smallest)
        return sorted((self.total(s), s) for s in self._covering(eligible, frees, short, cap + _SLACK_S))

    def _covering(
        self, eligible: tuple[str, ...], frees: Mapping[str, int], short: int, cap: float
    ) -> list[tuple[str, ...]]:
        """Every subset of ``eligible`` (in its order) whose victims may empty ``short`` GPUs together and
        lose at most ``cap`` (adding them up in any order: ``cap`` leaves room for the rounding): a walk
        that drops a branch as soon as it loses too much, or what is left cannot empty enough."""
        gpus = [frees[v] for v in eligible]
        lost = [self._cost[v][0] for v in eligible]
        left = [*reversed(list(accumulate(reversed(gpus)))), 0]  # what the victims from each one on empty
        out: list[tuple[str, ...]] = []
        # Depth first, each victim taken before it is left out; a stack rather than a recursive closure,
        # which would refer to itself and leave a reference cycle behind for the collector each time.
        stack: list[tuple[int, int, float, tuple[str, ...]]] = [(0, 0, 0.0, ())]
        while stack:
            at, emptied, spent, chosen = stack.pop()
            if emptied + left[at] < short:
                continue
            if at == len(eligible):
                out.append(chosen)
                continue
            stack.append((at + 1, emptied, spent, chosen))
            if spent + lost[at] <= cap:
                stack.append((at + 1, emptied + gpus[at], spent + lost[at], (*chosen, eligible[at])))
        return out

    def _by_size(self, eligible: tuple[str, ...], smallest: int) -> Iterator[tuple[Cost, tuple[str, ...]]]:
        for k in range(smallest, len(eligible) + 1):
            total: Cost | None = None
            for subset in combinations(eligible, k):
                if total is None:  # every subset of this size costs the same
                    total = self.total(subset)
                yield total, subset


def cheapest_on_node(
    node: NodeCapacity,
    request: Request,
    gpu_type: str | None,
    eligible: list[str],
    held: Mapping[str, Sequence[Allocation]],
    sets: VictimSets,
    allowed: Callable[[tuple[str, ...]], bool] | None = None,
    beat: Beat = None,
) -> tuple[str, ...] | None:
    """The cheapest subset of the node's eligible victims (holding ``held``) whose removal fits one share of
    the request there (and that ``allowed`` allows together), or None: every subset, cheapest first, for up
    to ``EXHAUSTIVE`` victims; past that, victims added cheapest first, then the costliest pruned while the
    share still fits. With ``beat`` (an option found elsewhere: its cost, node), None also where no subset
    that costs no more than it, by cost then node name, will do: the search stops there."""
    name = node.name
    freed = {  # most victims hold one allocation, on this node
        v: list(allocations)
        if len(allocations := held[v]) == 1 and allocations[0].node == name
        else [a for a in allocations if a.node == name]
        for v in eligible
    }
    if len(eligible) <= EXHAUSTIVE:
        short, empties = gpus_short(node, request, gpu_type), emptiable(node, gpu_type, freed)
        frees = {v: len(gpus) for v, gpus in empties.items()}
        if sum(frees.values()) < short:
            return None
        # Fewer victims than it takes to empty ``short`` GPUs, the largest first, cannot do.
        smallest, left = 0, short
        for count in sorted(frees.values(), reverse=True):
            if left <= 0:
                break
            left -= count
            smallest += 1
        # Past ``beat``'s cost, or at it on a later name, no subset can win: they come cheapest first.
        cap, at_cap = (None, False) if beat is None else (beat[0], name < beat[1])
        lost_cap = math.inf if cap is None else cap[0]
        for total, subset in sets.cheapest_first(tuple(eligible), frees, short, smallest, lost_cap):
            if cap is not None and (total > cap or (total == cap and not at_cap)):
                return None
            if (
                (frees[subset[0]] if len(subset) == 1 else len(set().union(*map(empties.__getitem__, subset)))) >= short
                and fits_without(node, request, gpu_type, [a for v in subset for a in freed[v]])
                and (allowed is None or allowed(subset))
            ):
                return subset
        return None
    chosen: list[str] = []
    for v in sorted(eligible, key=lambda v: (sets.cost(v), v)):
        chosen.append(v)
        if fits_without(node, request, gpu_type, [a for c in chosen for a in freed[c]]):
            break
    else:
        return None
    for v in sorted(chosen, key=lambda v: (sets.cost(v), v), reverse=True):  # prune the costliest first
        rest = [c for c in chosen if c != v]
        if fits_without(node, request, gpu_type, [a for c in rest for a in freed[c]]):
            chosen = rest
    found = tuple(sorted(chosen))
    return found if allowed is None or allowed(found) else None


class NodeAnswers:
    """``cheapest_on_node``'s answers for the cycle, by all they depend on (searches for like jobs ask the same
    of the same nodes); a None found short of ``beat`` holds for any option that beats that one."""

    def __init__(self, held: Mapping[str, Sequence[Allocation]], sets: VictimSets) -> None:
        self._held, self._sets = held, sets
        self._kept: dict[tuple[object, ...], tuple[tuple[str, ...] | None, Beat]] = {}

    def cheapest(
        self,
        node: NodeCapacity,
        request: Request,
        gpu_type: str | None,
        eligible: list[str],
        allowed: Callable[[tuple[str, ...]], bool] | None,
        beat: Beat,
        also: tuple[object, ...] = (),
    ) -> tuple[str, ...] | None:
        """``cheapest_on_node``; ``also``: what else its answer depends on (with ``allowed``)."""
        key = (node.name, *node.used.values(), node.free_cpus, node.free_memory_mb, request, gpu_type, *eligible, *also)
        kept = self._kept.get(key)
        if kept is not None and (kept[0] is not None or kept[1] is None or (beat is not None and beat <= kept[1])):
            return kept[0]
        found = cheapest_on_node(node, request, gpu_type, eligible, self._held, self._sets, allowed, beat)
        self._kept[key] = (found, beat)
        return found
