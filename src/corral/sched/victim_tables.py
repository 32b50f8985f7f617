"""The tables a cycle's victim searches read, from one pass over the running jobs."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Set
from dataclasses import dataclass
from datetime import datetime

from corral.model import Allocation, Job, RunningJob
from corral.sched.snapshot import Snapshot
from corral.sched.victim_scan import Cost, ScanOrder, lost_gpu_seconds

_FREE: Cost = (0.0, 0)  # a victim already stopping: nothing lost, no job newly preempted


@dataclass
class VictimTables:
    """The running jobs that may be victims at all (preemptible, stopping, or of a team that borrows), with
    what stopping each one now would cost, its preemption level and whether its team borrows; by team and
    by node; the nodes in the order a search scans them; and what ``Preemptor.worth_trying`` reads."""

    jobs: dict[str, RunningJob]
    cost: dict[str, Cost]
    levels: dict[str, int]
    borrowing: dict[str, bool]
    by_team: dict[str, list[str]]
    on_node: dict[str, list[str]]  # per node, its victims by id
    scan: ScanOrder
    any_stopping: bool
    reclaimable: bool  # some victim's team borrows
    lowest: int | None  # the lowest level of a preemptible victim not stopping

    @classmethod
    def of(
        cls,
        snapshot: Snapshot,
        held_by: Mapping[str, tuple[Allocation, ...]],
        now: datetime,
        level: Callable[[Job | RunningJob], int],
        borrowers: Set[str],
    ) -> VictimTables:
        """From one pass over thousands of running jobs per cycle."""
        jobs: dict[str, RunningJob] = {}
        costs: dict[str, Cost] = {}
        levels = _Levels(jobs, level)  # asked here of preemptible jobs only: the others' when first read
        borrowing_of: dict[str, bool] = {}
        by_team: dict[str, list[str]] = {}
        on_node: dict[str, list[str]] = {}  # in the snapshot's order here; by id once ``_scan_order`` sorts them
        lowest: int | None = None
        any_stopping = reclaimable = False
        for r in snapshot.running:
            job_id = r.id
            held = held_by.get(job_id)
            if not held:
                continue
            borrowing = job_id in borrowers
            stopping = r.stopping
            if not (r.preemptible or stopping or borrowing):
                continue
            jobs[job_id] = r
            if len(held) == 1:  # most jobs: on one node, ``lost_gpu_seconds`` inline
                only = held[0]
                found = on_node.get(only.node)
                if found is None:
                    on_node[only.node] = [job_id]
                else:
                    found.append(job_id)
                if stopping:
                    costs[job_id] = _FREE
                    any_stopping = True
                elif (unsaved := r.unsaved_s(now)) > 0.0:
                    costs[job_id] = (round(unsaved * (len(only.gpus) * only.gpu_fraction), 6), 1)
                else:
                    costs[job_id] = (0.0, 1)
            else:
                for name in {a.node for a in held}:
                    on_node.setdefault(name, []).append(job_id)
                if stopping:
                    costs[job_id] = _FREE
                    any_stopping = True
                else:
                    costs[job_id] = (lost_gpu_seconds(r, held, now), 1)
            if r.preemptible:
                levels[job_id] = job_level = level(r)
                if not stopping and (lowest is None or job_level < lowest):
                    lowest = job_level
            borrowing_of[job_id] = borrowing
            team = by_team.get(r.team)
            if team is None:
                by_team[r.team] = [job_id]
            else:
                team.append(job_id)
            if borrowing:
                reclaimable = True
        scan = _scan_order(on_node, jobs, costs, levels)
        return cls(jobs, costs, levels, borrowing_of, by_team, on_node, scan, any_stopping, reclaimable, lowest)


class _Levels(dict[str, int]):
    """Each victim's preemption level: worked out on first reading for a job not preemptible (a borrower, read
    only where its GPUs are reclaimed)."""

    def __init__(self, jobs: Mapping[str, RunningJob], level: Callable[[Job | RunningJob], int]) -> None:
        super().__init__()
        self._jobs, self._level = jobs, level

    def __missing__(self, job_id: str) -> int:
        found = self[job_id] = self._level(self._jobs[job_id])
        return found


def _scan_order(
    on_node: Mapping[str, list[str]],
    jobs: Mapping[str, RunningJob],
    costs: Mapping[str, Cost],
    levels: Mapping[str, int],
) -> ScanOrder:
    """Nodes by their cheapest victim's cost, with each node's lowest preemptible level and those with a
    victim stopping; sorts each node's victims by id, in place."""
    stopping_on: set[str] = set()
    lowest_on: dict[str, float] = {}
    order: list[tuple[float, int, str, Cost]] = []  # flat: a sort compares these faster than nested tuples
    for name, victims in on_node.items():
        if len(victims) == 1:  # most nodes
            v = victims[0]
            victim, cheapest = jobs[v], costs[v]
            if victim.stopping:
                stopping_on.add(name)
            lowest_on[name] = levels[v] if victim.preemptible else math.inf
            order.append((*cheapest, name, cheapest))
            continue
        victims.sort()
        cheapest, lowest_here = costs[victims[0]], math.inf
        for v in victims:
            victim = jobs[v]
            if victim.stopping:
                stopping_on.add(name)
            if victim.preemptible and levels[v] < lowest_here:
                lowest_here = levels[v]
            if (cost := costs[v]) < cheapest:
                cheapest = cost
        lowest_on[name] = lowest_here
        order.append((*cheapest, name, cheapest))
    order.sort()  # by cost, then name (names differ: the cost objects are never compared)
    return ScanOrder([(cost, name) for _, _, name, cost in order], lowest_on, stopping_on)
