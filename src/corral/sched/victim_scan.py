"""The order a victim search scans nodes in: by the cost of each node's cheapest victim, for one cycle."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from corral.model import Allocation, RunningJob
from corral.sched.snapshot import CapacityView

Cost = tuple[float, int]  # (GPU-seconds lost, jobs newly preempted)
Scan = tuple[Cost, str, int, int]  # (its cheapest victim's cost, node, GPUs of the type there, place in the scan)


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
        self._every: dict[str | None, list[Scan]] = {}
        self._below: dict[tuple[str | None, int], list[Scan]] = {}

    def every(self, view: CapacityView, gpu_type: str | None) -> list[Scan]:
        """The nodes hosting victims that have GPUs of the type (any node, for a CPU-only request)."""
        order = self._every.get(gpu_type)
        if order is None:
            order = []
            for bound, name in self._by_cost:
                if gpu_type is None:
                    order.append((bound, name, 0, len(order)))
                elif (node := view.nodes.get(name)) is not None and (of_type := len(node.indices(gpu_type))):
                    order.append((bound, name, of_type, len(order)))
            self._every[gpu_type] = order
        return order

    def below(self, view: CapacityView, gpu_type: str | None, level: int) -> list[Scan]:
        """``every`` less the nodes where a job of ``level`` that may not reclaim quota finds no victim."""
        key = (gpu_type, level)
        order = self._below.get(key)
        if order is None:
            lowest_on, stopping_on = self._lowest_on, self._stopping_on
            order = self._below[key] = [
                entry for entry in self.every(view, gpu_type) if entry[1] in stopping_on or lowest_on[entry[1]] < level
            ]
        return order
