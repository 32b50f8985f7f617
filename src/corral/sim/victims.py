"""A preemptive cycle's possible victims, the few the victim search reaches first, then all of them.

Under sustained overload thousands of running jobs are possible victims in every cycle, and
passing them costs per victim passed (their scheduler view, the search's setup, the capacity
view of their nodes) even though a search examines only a few. The scheduler's victim search
(``corral.sched.preempt``) scans the nodes hosting possible victims by their cheapest victim's
cost (``lost_gpu_seconds``: 0 when no work is lost, as with continuous checkpoints), then by
name, and stops once no later node could do better. So a cycle first gets only the victims on
the first ``FIRST_NODES`` nodes of that order, found by walking the nodes in name order while
their cheapest victim costs nothing. The plan is kept unless a search went through every node
it was given (``Plan.exhausted_searches``): the searches then saw exactly what they would have
seen with every victim passed, and the cycle made the same plan. Otherwise the cycle runs again
with every possible victim, as ``ClusterState.snapshot`` builds it.

The first nodes are taken only when they settle that order exactly: each is a node whose
cheapest victim costs nothing, and every node those victims run on is among them (a gang's
other nodes are included, or the whole set is passed). The victim search is skipped for a job
no passed victim ranks below, so the victims passed must reach down to the lowest level of all
possible victims whenever a pending job ranks between the two; otherwise all are passed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime

from corral.model import Allocation, RunningJob
from corral.sched import Plan, Policy, schedule
from corral.sched.preempt import lost_gpu_seconds
from corral.sim.state import ClusterState

FIRST_NODES = 16
"""Nodes whose victims a cycle gets first; a cycle's searches start from the front of the order."""

Views = Callable[[Iterable[str]], tuple[RunningJob, ...]]


def plan_cycle(state: ClusterState, policy: Policy, running: Views, at: datetime) -> Plan | None:
    """The plan of one cycle with every possible victim passed (as ``state.snapshot`` does), or None
    when there is nothing to schedule; computed with the first nodes' victims alone when that is the same."""
    views = _Memo(running)
    few = _first_victims(state, views, at) if state.prunes() else None
    if few is not None:
        victims, lowest = few
        snapshot = state.with_victims(victims, lowest, views)
        if snapshot is None:
            return None
        plan = schedule(snapshot, policy, at)
        if all(_finds_none(state, job_id) for job_id in plan.exhausted_searches):
            return plan
    snapshot = state.snapshot(views)
    return None if snapshot is None else schedule(snapshot, policy, at)


class _Memo:
    """The scheduler's views of running jobs at one moment, each built once."""

    def __init__(self, running: Views) -> None:
        self.running = running
        self.known: dict[str, RunningJob] = {}

    def __call__(self, ids: Iterable[str]) -> tuple[RunningJob, ...]:
        wanted = list(ids)
        missing = [i for i in wanted if i not in self.known]
        if missing:
            self.known.update(zip(missing, self.running(missing), strict=True))
        return tuple(self.known[i] for i in wanted)


def _first_victims(state: ClusterState, views: _Memo, at: datetime) -> tuple[list[str], int] | None:
    """The possible victims on the first ``FIRST_NODES`` nodes of the victim search's order (sorted
    ids) and the lowest level of all possible victims; None when that takes more than a short walk."""
    top, lowest = state.top_pending(), min(state.levels, default=None)
    if top is None or lowest is None or lowest >= top:
        return None
    level, live, placed = state.running_level, state.live, state.running_nodes
    first: set[str] = set()  # nodes whose cheapest victim costs nothing, in name order
    passed: set[str] = set()  # nodes hosting victims that all cost something: later in the order
    touched: set[str] = set()  # nodes the chosen victims run on
    chosen: list[str] = []
    for name, here in live.items():  # name order
        victims = [j for j in here if level[j] < top]
        if not victims:
            continue
        if not any(_cost(state, views, j, at) == 0.0 for j in victims):
            if name in touched:
                return None
            passed.add(name)
            if len(passed) > FIRST_NODES:  # victims that lose work (checkpoints taken now and then)
                return None
            continue
        first.add(name)
        chosen.extend(victims)
        for j in victims:
            touched.update(placed[j])
        if not touched.isdisjoint(passed):
            return None
        if len(first) >= FIRST_NODES and touched <= first:
            break
    else:
        return None
    # The index may hold a level from the job's start, below its level now (see ``ClusterState``): the
    # lowest of all possible victims is at least ``lowest``, and the search reads the chosen ones' levels now.
    reached = min(state.policy.level(view) for view in views(chosen))
    if reached > lowest and any(lowest < pending <= reached for pending in state.pending_levels):
        return None
    return sorted(set(chosen)), lowest


def _cost(state: ClusterState, views: _Memo, job_id: str, at: datetime) -> float:
    """GPU-seconds lost by stopping the job now, exactly as the victim search computes it."""
    allocations: list[Allocation] = sorted(
        (state.live[node][job_id].allocation for node in state.running_nodes[job_id]), key=_order
    )
    return lost_gpu_seconds(views((job_id,))[0], allocations, at)


def _order(allocation: Allocation) -> tuple[str, tuple[int, ...]]:
    return (allocation.node, allocation.gpus)


def _finds_none(state: ClusterState, job_id: str) -> bool:
    """Whether the pending job's victim search finds nothing even with every possible victim passed: fewer
    nodes than it needs could hold one share of it once every running job it might outrank is gone.

    Running jobs at or above its level in the index never make room for it (their level now is at least the
    indexed one); the GPUs they hold are the only ones counted as staying busy, so this undercounts what
    stays busy and never claims a search fails when it could succeed."""
    job = state.keys[job_id][2]
    request = job.request
    if request.fractional or request.gpus_per_node <= 0:
        return False
    slots, level = request.gpu_slots_per_node, state.policy.level(job)
    kept: dict[str, int] = {}  # node -> GPUs held there by running jobs the job cannot outrank
    for indexed, ids in state.levels.items():
        if indexed >= level:
            for j in ids:
                for node in state.running_nodes[j]:
                    kept[node] = kept.get(node, 0) + len(state.live[node][j].allocation.gpus)
    for gpu_type in request.gpu_types or state.types:
        hosts = state.hosts(gpu_type, slots)
        if len(hosts) - sum(1 for node, busy in kept.items() if node in hosts and hosts[node] - busy < slots) >= (
            request.nodes
        ):
            return False
    return True
