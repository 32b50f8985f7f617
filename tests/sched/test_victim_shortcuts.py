"""The victim search's shortcuts give what the plain computations they stand for give, checked at every
use while whole cycles run."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from itertools import accumulate, combinations
from typing import Any
from unittest.mock import patch

from hypothesis import given, settings

from corral.model import Allocation, Request
from corral.sched import Snapshot, schedule, victim_scan
from corral.sched.node_capacity import NodeCapacity
from corral.sched.node_room import emptiable, fits_without
from corral.sched.preempt import Preemptor
from corral.sched.snapshot import CapacityView
from corral.sched.victim_scan import LossBounds, Scan, ScanOrder, VictimSets
from corral.testing import live_alloc, make_job, make_node, running_job, snapshot

from .test_quota_properties import DEFAULT, NOW, quota_snapshots


@contextmanager
def checked(cls: type, name: str, check: Callable[..., None]) -> Iterator[list[int]]:
    """Calls ``check(result, self, *args)`` after each call of the method; yields how many calls there were."""
    method = getattr(cls, name)
    calls = [0]

    def checking(self: Any, *args: Any) -> Any:
        result = method(self, *args)
        check(result, self, *args)
        calls[0] += 1
        return result

    setattr(cls, name, checking)
    try:
        yield calls
    finally:
        setattr(cls, name, method)


def plain_eligible(found: list[str], self: Preemptor, victims: list[str], team: str, level: int, within: bool) -> None:
    assert found == [v for v in victims if self._eligible(v, team, level, within)]


def plain_table(found: list[float], self: LossBounds, name: str) -> None:
    """The fewest victims whose GPUs there add up to each count, the largest first, at their cheapest."""
    held = {v: len({i for a in self._held[v] if a.node == name for i in a.gpus}) for v in self._on_node[name]}
    lost = list(accumulate(sorted(self._cost[v][0] for v in held)))
    sizes = sorted(held.values(), reverse=True)
    fewest = [
        max(1, next(k for k in range(len(sizes) + 1) if sum(sizes[:k]) >= gpus)) for gpus in range(sum(sizes) + 1)
    ]
    assert found == [lost[k - 1] for k in fewest]


def plain_below(found: list[Scan], self: ScanOrder, view: CapacityView, gpu_type: str | None, level: int) -> None:
    every = self.every(view, gpu_type)
    assert found == [e for e in every if e[1] in self._stopping_on or self._lowest_on[e[1]] < level]


def emptiable_checked(
    node: NodeCapacity, gpu_type: str | None, freed: Mapping[str, list[Allocation]]
) -> dict[str, set[int]]:
    """``emptiable``, checked: no set of the victims empties a GPU of the type that none of them lists."""
    found = emptiable(node, gpu_type, freed)
    if gpu_type is not None:
        empty = len(node.empty_gpus(gpu_type))
        victims = list(freed)[:6]
        for size in range(1, len(victims) + 1):
            for chosen in combinations(victims, size):
                listed = set().union(*(found[v] for v in chosen))
                more = Request(gpus_per_node=float(empty + len(listed) + 1))
                assert not fits_without(node, more, gpu_type, [a for v in chosen for a in freed[v]])
    EMPTIABLE_CALLS[0] += 1
    return found


EMPTIABLE_CALLS = [0]


def plain_every(found: list[Scan], self: ScanOrder, view: CapacityView, gpu_type: str | None) -> None:
    if gpu_type is None:
        assert found == [(bound, name, 0, at) for at, (bound, name) in enumerate(self._by_cost)]
        return
    nodes = view.nodes
    listed = [(b, n) for b, n in self._by_cost if n in nodes and gpu_type in nodes[n].gpu_types]
    assert found == [(b, n, len(nodes[n].indices(gpu_type)), at) for at, (b, n) in enumerate(listed)]


def plain_total(found: tuple[float, int], self: VictimSets, victims: Sequence[str]) -> None:
    assert found == (round(sum(self.cost(v)[0] for v in victims), 6), sum(self.cost(v)[1] for v in victims))


@settings(max_examples=300, deadline=None, derandomize=True)
@given(quota_snapshots())
def test_the_victim_search_shortcuts_equal_the_plain_computations(snap: Snapshot) -> None:
    with (
        checked(Preemptor, "_eligible_among", plain_eligible),
        checked(LossBounds, "_table", plain_table),
        checked(ScanOrder, "below", plain_below),
        checked(ScanOrder, "every", plain_every),
        checked(VictimSets, "total", plain_total),
        patch.object(victim_scan, "emptiable", emptiable_checked),
    ):
        schedule(snap, DEFAULT, NOW)


def test_the_loss_bounds_and_victim_lists_are_checked_on_a_cluster_where_the_search_reaches_them() -> None:
    """Full nodes of low-priority jobs of one to four GPUs; jobs above them that need two or four GPUs on
    one node weigh each node's victims against the cheapest set found so far."""
    nodes = [make_node(f"n{i}").gpus(4, "H100") for i in range(4)]
    sizes = {"n0": (2, 2), "n1": (4,), "n2": (1, 1, 1, 1), "n3": (1, 3)}
    live, running = [], []
    for name, held in sizes.items():
        first = 0
        for k, gpus in enumerate(held):
            job_id = f"r-{name}-{k}"
            live.append(live_alloc(job_id, name, range(first, first + gpus)))
            running.append(running_job(job_id, NOW, ran_s=600.0 * (len(held) - k), preemptible=True))
            first += gpus
    pending = [make_job(f"j{i}").gpus(gpus).priority(1).seq(i) for i, gpus in enumerate((2, 4, 2))]
    snap = snapshot(nodes, pending=pending, live=live, running=running)
    with (
        checked(Preemptor, "_eligible_among", plain_eligible) as eligible,
        checked(LossBounds, "_table", plain_table) as tables,
        checked(VictimSets, "total", plain_total) as totals,
        checked(ScanOrder, "every", plain_every) as every,
        patch.object(victim_scan, "emptiable", emptiable_checked),
    ):
        before = EMPTIABLE_CALLS[0]
        plan = schedule(snap, DEFAULT, NOW)
    assert len({p.for_job_id for p in plan.preemptions}) == 3
    assert min(eligible[0], tables[0], totals[0], every[0], EMPTIABLE_CALLS[0] - before) > 0


def test_the_nodes_below_a_level_are_those_of_every_node_with_a_victim_below_it_or_stopping() -> None:
    rng = random.Random(5)
    view = snapshot([make_node("n0").gpus(1)]).view(DEFAULT.gpu_ranker, DEFAULT.cpu_ranker)
    for _ in range(200):
        names = [f"n{i}" for i in range(rng.randrange(1, 6))]
        lowest_on: dict[str, float] = {n: rng.choice((0, 1, 2, 3, math.inf)) for n in names}
        stopping_on = {n for n in names if rng.random() < 0.2}
        order = ScanOrder(sorted(((rng.random(), 1), n) for n in names), lowest_on, stopping_on)
        for level in range(-1, 5):
            plain_below(order.below(view, None, level), order, view, None, level)
