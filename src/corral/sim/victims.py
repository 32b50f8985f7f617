"""A preemptive cycle's possible victims, the few the victim search reaches first, then all of them.

Under sustained overload thousands of running jobs are possible victims in every cycle, and
passing them costs per victim passed (their scheduler view, the search's setup, the capacity
view of their nodes) even though a search examines only a few. The scheduler's victim search
(``corral.sched.preempt``) scans the nodes hosting possible victims by their cheapest victim's
cost (``lost_gpu_seconds``: 0 when no work is lost, as with continuous checkpoints), then by
name, and stops once no later node could do better. So a cycle first gets only the victims on
the first nodes of that order (``FIRST_NODES``). The plan is kept unless a search went through every node
it was given (``Plan.exhausted_searches``) and could have ended differently with more (see
``_settled``): the searches then saw exactly what they would have seen with every victim passed,
and the cycle made the same plan. Otherwise the cycle runs again with the next count of nodes,
then with the nodes where the searches could do better (``_with_better_nodes``), and at last with
every possible victim, as ``ClusterState.snapshot`` builds it.

The first nodes are taken only when they settle that order exactly: found by walking the nodes in
name order while their cheapest victim costs nothing, else by costing every possible victim (as the
full snapshot does, but the scheduler then sets up and scans only those nodes' victims), and every
node those victims run on is among them (a gang's other nodes are included, or the whole set is
passed). The victim search is skipped for a job
no passed victim ranks below, so the victims passed must reach down to the lowest level of all
possible victims whenever a pending job ranks between the two; otherwise all are passed.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable
from datetime import datetime

from corral.model import Allocation, Job, RunningJob
from corral.sched import Plan, Policy, Snapshot, schedule
from corral.sched.victim_scan import lost_gpu_seconds
from corral.sim.state import ClusterState

FIRST_NODES = (8,)
"""Nodes whose victims a cycle gets first (then, with more counts, next) before all. One count: a search
that runs out of 8 nodes mostly needs several victims on one node, and then usually ends on a node much
further on that needs fewer, so intermediate counts cost more than they save (about a fifth of the time
on the 100,000-job synthetic trace of ``bench/sim_speed.py`` at load 1.5, with 8, 64 and 512)."""

BETTER_NODES = 8
"""Nodes added, per search left unsettled, where it could do better: those needing the fewest victims, then
first in name order (where the full search would find them)."""

BETTER_ROUNDS = 2
"""Times nodes are added so before every possible victim is passed."""

Views = Callable[[Iterable[str]], tuple[RunningJob, ...]]


def plan_cycle(state: ClusterState, policy: Policy, views: Views, at: datetime) -> Plan | None:
    """The plan of one cycle with every possible victim passed (as ``state.snapshot`` does), or None
    when there is nothing to schedule; computed with the first nodes' victims alone when that is the same.
    ``views`` gives the scheduler's views of running jobs (the engine builds each once per moment)."""
    for count in FIRST_NODES if state.prunes() else ():
        few = _first_victims(state, views, at, count)
        if few is None:
            break
        victims, lowest, first = few
        snapshot = state.with_victims(victims, lowest, views)
        if snapshot is None:
            return None
        plan = schedule(snapshot, policy, at)
        if not _types_passed(state, snapshot, plan, lowest):
            continue
        unsettled = [j for j in plan.exhausted_searches if not _settled(state, views, plan, j, first, at)]
        if not unsettled:
            return plan
        if count == FIRST_NODES[-1]:
            better = _with_better_nodes(state, policy, views, at, lowest, first, plan, unsettled)
            if better is not None:
                return better
    snapshot = state.snapshot(views)
    return None if snapshot is None else schedule(snapshot, policy, at)


def _with_better_nodes(
    state: ClusterState,
    policy: Policy,
    views: Views,
    at: datetime,
    lowest: int,
    passed: set[str],
    plan: Plan,
    unsettled: list[str],
) -> Plan | None:
    """The plan once the nodes where the unsettled searches could do better are passed too, or None when
    that does not settle every search (then every possible victim is passed).

    The nodes passed are then no longer the first of the search's order, so a search that stopped early
    is checked as well as one that went through every node: ``_settled_among`` proves each search found
    what it finds with every possible victim passed, or the round ends."""
    top = state.top_pending()
    if top is None:
        return None
    passed = set(passed)
    for _ in range(BETTER_ROUNDS):
        added: set[str] = set()
        for job_id in unsettled:
            better = _better_nodes(state, views, plan, job_id, passed, at)
            if better is None:
                return None
            added.update(better)
        if not added:
            return None
        passed |= added
        chosen = _with_their_nodes(state, passed, top)  # adds to ``passed`` the other nodes of gang victims
        snapshot = state.with_victims(sorted(set(chosen)), lowest, views)
        if snapshot is None:
            return None
        plan = schedule(snapshot, policy, at)
        if not _types_passed(state, snapshot, plan, lowest):
            return None
        searched = dict.fromkeys(plan.exhausted_searches)
        searched.update((p.for_job_id, None) for p in plan.preemptions)
        unsettled = [j for j in searched if not _settled_among(state, views, plan, j, passed, at)]
        if not unsettled:
            return plan
    return None


def _whole_shares(state: ClusterState, job: Job) -> bool:
    """Whether the job needs whole GPUs of one type on each of its nodes: the searches ``_settled_among`` can
    judge."""
    request = job.request
    return not request.fractional and request.gpus_per_node > 0 and len(request.gpu_types or state.types) == 1


def _found_on(state: ClusterState, views: Views, plan: Plan, job_id: str, at: datetime) -> tuple[int, str] | None:
    """The job's search's worst choice, at most: ``(victims, node)``, when they all lose nothing; ``(0, "")``
    when it chose none; None otherwise.

    The search chose, for each node of the job, the victims on one node (a gang victim runs on others
    too), and the job's nodes are its options best first (fewest victims, then by name, when nothing is
    lost). So no option chosen beats, in that order, the most victims chosen on one node and the last
    node by name hosting as many: an option judged so may be taken for worse than it was, so that a
    search may be judged unsettled that was not, never the other way round."""
    victims = [p.victim_job_id for p in plan.preemptions if p.for_job_id == job_id]
    if not victims:
        return 0, ""
    if any(_cost(state, views, v, at) != 0.0 for v in victims):
        return None
    on: dict[str, int] = {}
    for v in victims:
        for name in state.running_nodes[v]:
            on[name] = on.get(name, 0) + 1
    return max((count, name) for name, count in on.items())


def _settled_among(state: ClusterState, views: Views, plan: Plan, job_id: str, passed: set[str], at: datetime) -> bool:
    """Whether a search over the possible victims on the nodes passed (any nodes, not only the first of the
    search's order) found what it finds with every possible victim passed.

    A job's search chose, per node it needs, the option losing least, then with fewest victims, then on
    the node first in name order (when nothing is lost, the search's order among the nodes with a possible
    victim is their names). Its choice stands when no node not passed could hold a share by stopping fewer
    jobs than its worst option (``_found_on``), nor, before it in name order, as few; when it found
    nothing, when no node not passed could hold a share at all. As in ``_settled``, every running job below
    the job's level in the index counts as a victim there (so a test may fail to prove a search settled,
    never the other way round)."""
    better = _better_than_found(state, views, plan, job_id, passed, at, 1)
    return better is not None and not better


def _better_nodes(
    state: ClusterState, views: Views, plan: Plan, job_id: str, passed: set[str], at: datetime
) -> list[str] | None:
    """The nodes not passed where the job's search could do better than it did (``_settled_among``), at most
    ``BETTER_NODES`` of them, fewest victims first, then by name; None for a search it cannot judge."""
    better = _better_than_found(state, views, plan, job_id, passed, at, BETTER_NODES)
    return None if better is None else [name for _, name in better]


def _better_than_found(
    state: ClusterState, views: Views, plan: Plan, job_id: str, passed: set[str], at: datetime, limit: int
) -> list[tuple[int, str]] | None:
    """``(victims needed, node)`` for at most ``limit`` nodes not passed where the job's search could do
    better than it did, fewest first, then by name (see ``corral.sim.needs``); None for a search these
    tests cannot judge (see ``_whole_shares`` and ``_found_on``)."""
    job = state.keys[job_id][2]
    if not _whole_shares(state, job):
        return None
    found = _found_on(state, views, plan, job_id, at)
    if found is None:
        return None
    count, node = found
    return state.needs.fewer(job, passed, count, node, limit)


def _types_passed(state: ClusterState, snapshot: Snapshot, plan: Plan, lowest: int) -> bool:
    """Whether every job left unplaced that could preempt had each GPU type it could run on in the snapshot.

    The victim search looks only at the types of the nodes it is given: a type missing there is not
    searched, and the search is not named as exhausted, so a cycle passing the first nodes' victims
    alone must hold every such type to make the plan a full cycle would."""
    present = {gpu.type for node in snapshot.nodes for gpu in node.gpus}
    placed = {p.job_id for p in plan.placements}
    for job in snapshot.pending:
        if job.id in placed or state.policy.level(job) <= lowest:
            continue
        request = job.request
        for gpu_type in request.gpu_types or state.types:
            if gpu_type not in present and state.hosts(gpu_type, request.gpu_slots_per_node):
                return False
    return True


def _first_victims(
    state: ClusterState, views: Views, at: datetime, count: int
) -> tuple[list[str], int, set[str]] | None:
    """The possible victims on the first ``count`` nodes of the victim search's order (sorted ids),
    the lowest level of all possible victims, and those nodes; None when they are all of them, or when
    a victim on those nodes also runs on a node further on."""
    top, lowest = state.top_pending(), min(state.levels, default=None)
    if top is None or lowest is None or lowest >= top:
        return None
    found = _first_free(state, views, at, count, top)
    if found is None:
        found = _first_by_cost(state, views, at, count, top)
    if found is None:
        return None
    chosen, first = found
    unique = sorted(set(chosen))
    if len(unique) == sum(len(ids) for level, ids in state.levels.items() if level < top):
        return None  # every possible victim (few nodes host them): that cycle is the one with all of them
    # The index may hold a level from the job's start, below its level now (see ``ClusterState``): the
    # lowest of all possible victims is at least ``lowest``, and the search reads the chosen ones' levels now.
    reached = min(state.policy.level(view) for view in views(chosen))
    if reached > lowest and any(lowest < pending <= reached for pending in state.pending_levels):
        return None
    return unique, lowest, first


def _first_free(
    state: ClusterState, views: Views, at: datetime, count: int, top: int
) -> tuple[list[str], set[str]] | None:
    """The first ``count`` nodes in name order whose cheapest possible victim costs nothing (they come
    first in the search's order), and their possible victims; None when that takes more than a short walk
    (more than ``count`` nodes whose victims all cost something on the way) or a victim runs on one of those."""
    level, live, placed = state.running_level, state.live, state.running_nodes
    first: set[str] = set()
    passed: set[str] = set()  # nodes whose victims all cost something: later in the order
    touched: set[str] = set()  # nodes the chosen victims run on
    chosen: list[str] = []
    for name in state.hosting_below(top):  # name order
        victims = [j for j in live[name] if level[j] < top]
        if not victims:
            continue
        if not any(_cost(state, views, j, at) == 0.0 for j in victims):
            passed.add(name)
            if name in touched or len(passed) > count:
                return None
            continue
        first.add(name)
        chosen.extend(victims)
        for j in victims:
            touched.update(placed[j])
        if not touched.isdisjoint(passed):
            return None
        if len(first) >= count and touched <= first:
            return chosen, first
    return None


def _first_by_cost(
    state: ClusterState, views: Views, at: datetime, count: int, top: int
) -> tuple[list[str], set[str]] | None:
    """The first ``count`` nodes of the search's order (their cheapest possible victim's cost, then name)
    and their possible victims; None when that is every node hosting one, or a victim runs on a node
    further on. It costs every possible victim, as the full snapshot does."""
    placed = state.running_nodes
    bound: dict[str, float] = {}
    for lower, ids in state.levels.items():
        if lower >= top:
            continue
        for j in ids:
            cost = _cost(state, views, j, at)
            for name in placed[j]:
                if cost < bound.get(name, math.inf):
                    bound[name] = cost
    if len(bound) <= count:
        return None
    first = {name for _, name in heapq.nsmallest(count, ((cost, name) for name, cost in bound.items()))}
    chosen = _victims_on(state, first, top)
    return None if chosen is None else (chosen, first)


def _with_their_nodes(state: ClusterState, nodes: set[str], top: int) -> list[str]:
    """The possible victims (below level ``top``) on these nodes, by node, once every other node such a
    victim runs on is added to ``nodes`` (and so on, for the victims there): the search then sees each
    node it is given with all of its possible victims, as with every one passed."""
    level, live, placed = state.running_level, state.live, state.running_nodes
    todo = list(nodes)
    while todo:
        for j in live[todo.pop()]:
            if level[j] < top and len(placed[j]) > 1:
                for name in placed[j]:
                    if name not in nodes:
                        nodes.add(name)
                        todo.append(name)
    return [j for name in sorted(nodes) for j in live[name] if level[j] < top]


def _victims_on(state: ClusterState, nodes: set[str], top: int) -> list[str] | None:
    """The possible victims (below level ``top``) on these nodes, by node; None when one also runs elsewhere."""
    level, live, placed = state.running_level, state.live, state.running_nodes
    chosen = [j for name in sorted(nodes) for j in live[name] if level[j] < top]
    return None if any(not set(placed[j]) <= nodes for j in chosen) else chosen


def _cost(state: ClusterState, views: Views, job_id: str, at: datetime) -> float:
    """GPU-seconds lost by stopping the job now, exactly as the victim search computes it."""
    allocations: list[Allocation] = sorted(
        (state.live[node][job_id].allocation for node in state.running_nodes[job_id]), key=_order
    )
    return lost_gpu_seconds(views((job_id,))[0], allocations, at)


def _order(allocation: Allocation) -> tuple[str, tuple[int, ...]]:
    return (allocation.node, allocation.gpus)


def _settled(state: ClusterState, views: Views, plan: Plan, job_id: str, first: set[str], at: datetime) -> bool:
    """Whether a search that went through every node passed (those in ``first``) found what it finds with
    every possible victim passed.

    It did when it found nothing and no search can find anything: fewer nodes than the job needs could
    hold a share of it once every running job it might outrank is gone. It did too when it found victims
    that lose nothing for a one-node job, and no other node could hold its share by stopping fewer jobs:
    each later node sorts after the one chosen, so only fewer victims could beat it. Both tests count
    every running job below the job's level in the index as a victim (its level now is at least that) and
    ignore what the cycle took before the search, so they may fail to prove a search settled, never the
    other way round."""
    job = state.keys[job_id][2]
    request = job.request
    if request.gpus_per_node <= 0 or request.fractional:  # the kept counts know whole GPUs only
        return False
    victims = [p.victim_job_id for p in plan.preemptions if p.for_job_id == job_id]
    if not victims:
        stopped = {p.victim_job_id for p in plan.preemptions}
        return state.needs.hosts(job, request.nodes, set(), None, stopped) < request.nodes
    if request.nodes > 1 or len(request.gpu_types or state.types) > 1:
        return False
    if any(_cost(state, views, v, at) != 0.0 for v in victims):
        return False
    return state.needs.hosts(job, 1, first, len(victims) - 1) == 0
