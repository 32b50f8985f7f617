"""Backfill and preemption invariants over generated clusters with running jobs."""

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from itertools import combinations

from hypothesis import given, settings
from hypothesis import strategies as st

from corral.model import EPSILON, FULL_GPU, Allocation, Gpu, Job, LiveAllocation, Node, NodeState, Request, RunningJob
from corral.sched import PREEMPTING, Plan, Snapshot, get_policy, schedule
from corral.sched.victim_scan import lost_gpu_seconds
from corral.testing.strategies import running_snapshots

NOW = datetime(2025, 1, 1, tzinfo=UTC)
FAST = settings(max_examples=100, deadline=None)
DEFAULT = get_policy("default")
NO_BACKFILL = replace(DEFAULT, backfill=False)
GREEDY = replace(DEFAULT, backfill=False, preemption=False)


def fits(nodes: Iterable[Node], allocations: Iterable[Allocation]) -> bool:
    """Whether the allocations together stay within the nodes' GPUs, CPUs and memory."""
    by_name = {n.name: n for n in nodes}
    used: dict[tuple[str, int], float] = defaultdict(float)
    whole: dict[tuple[str, int], int] = defaultdict(int)
    cpus: dict[str, float] = defaultdict(float)
    memory: dict[str, int] = defaultdict(int)
    count: dict[tuple[str, int], int] = defaultdict(int)
    for alloc in allocations:
        for index in alloc.gpus:
            used[alloc.node, index] += alloc.gpu_fraction
            count[alloc.node, index] += 1
            whole[alloc.node, index] += alloc.gpu_fraction >= FULL_GPU
        cpus[alloc.node] += alloc.cpus
        memory[alloc.node] += alloc.memory_mb
    return (
        all(u <= FULL_GPU + EPSILON for u in used.values())
        and all(not whole[key] or count[key] == 1 for key in whole)
        and all(cpus[n] <= by_name[n].cpus + EPSILON for n in cpus)
        and all(memory[n] <= by_name[n].memory_mb for n in memory)
    )


def victims_of(plan: Plan) -> dict[str, list[str]]:
    found: dict[str, list[str]] = defaultdict(list)
    for p in plan.preemptions:
        found[p.for_job_id].append(p.victim_job_id)
    return found


@FAST
@given(running_snapshots(NOW))
def test_backfill_never_delays_the_reservation(snap: Snapshot) -> None:
    plan = schedule(snap, DEFAULT, NOW)
    pending = {j.id: j for j in snap.pending}
    preempted = {p.victim_job_id for p in plan.preemptions}
    for reservation in plan.reservations:
        start = reservation.start
        assert start >= NOW
        assert reservation.job_id in plan.reasons
        released = {
            r.id
            for r in snap.running
            if r.stopping or r.id in preempted or (r.expected_end is not None and r.expected_end <= start)
        }
        at_start = [live.allocation for live in snap.live if live.job_id not in released]
        for placement in plan.placements:
            limit = pending[placement.job_id].time_limit_s
            if limit is None or NOW + timedelta(seconds=limit) > start:
                at_start += placement.allocations
        assert fits(snap.nodes, at_start + list(reservation.allocations))


@FAST
@given(running_snapshots(NOW))
def test_placements_fit_what_is_free_now(snap: Snapshot) -> None:
    plan = schedule(snap, DEFAULT, NOW)
    held = [live.allocation for live in snap.live] + [a for p in plan.placements for a in p.allocations]
    assert fits(snap.nodes, held)
    placed = {p.job_id for p in plan.placements}
    assert placed.isdisjoint(plan.reasons) and placed | set(plan.reasons) == {j.id for j in snap.pending}


@FAST
@given(running_snapshots(NOW))
def test_preemption_only_evicts_lower_priority_preemptible_jobs(snap: Snapshot) -> None:
    plan = schedule(snap, DEFAULT, NOW)
    running = {r.id: r for r in snap.running}
    pending = {j.id: j for j in snap.pending}
    placed = {p.job_id for p in plan.placements}
    victims = [p.victim_job_id for p in plan.preemptions]
    assert len(victims) == len(set(victims))
    for p in plan.preemptions:
        victim, job = running[p.victim_job_id], pending[p.for_job_id]
        assert victim.preemptible and not victim.stopping and victim.priority < job.priority
        assert job.id not in placed and plan.reasons[job.id].code == PREEMPTING


@FAST
@given(running_snapshots(NOW))
def test_preemption_happens_only_when_it_lets_the_job_start(snap: Snapshot) -> None:
    plan = schedule(snap, NO_BACKFILL, NOW)
    stopping = {r.id for r in snap.running if r.stopping}
    placed = tuple(LiveAllocation(p.job_id, a) for p in plan.placements for a in p.allocations)
    pending = {j.id: j for j in snap.pending}
    ordered = sorted(snap.pending, key=lambda j: (-j.priority, j.seq, j.id))
    # A job may also count on what the victims of jobs before it leave over (they stop all the same).
    gone = set(stopping)
    for job in ordered:
        victims = victims_of(plan).get(job.id)
        if victims is None:
            continue
        gone |= set(victims)
        live = tuple(x for x in snap.live if x.job_id not in gone) + placed
        after = schedule(Snapshot(snap.nodes, live, (pending[job.id],)), GREEDY, NOW)
        assert after.placements, f"{job.id} would still not fit without {victims} and the victims before"
    first = next((j for j in ordered if j.id in victims_of(plan)), None)
    if first is not None:
        # What is free once the stopping jobs are gone, less what the jobs before it that wait for them take.
        live = tuple(x for x in snap.live if x.job_id not in stopping) + placed
        before = ordered[: ordered.index(first)]
        waiting = tuple(j for j in before if j.id in plan.reasons and plan.reasons[j.id].code == PREEMPTING)
        held = schedule(Snapshot(snap.nodes, live, waiting), GREEDY, NOW).placements
        live += tuple(LiveAllocation(p.job_id, a) for p in held for a in p.allocations)
        assert not schedule(Snapshot(snap.nodes, live, (first,)), GREEDY, NOW).placements, "it fitted already"


@FAST
@given(running_snapshots(NOW), st.data())
def test_schedule_with_running_jobs_is_deterministic(snap: Snapshot, data: st.DataObject) -> None:
    plan = schedule(snap, DEFAULT, NOW)
    assert schedule(snap, DEFAULT, NOW) == plan
    shuffled = Snapshot(
        nodes=tuple(data.draw(st.permutations(snap.nodes))),
        live=tuple(data.draw(st.permutations(snap.live))),
        pending=tuple(data.draw(st.permutations(snap.pending))),
        running=tuple(data.draw(st.permutations(snap.running))),
    )
    assert schedule(shuffled, DEFAULT, NOW) == plan


@st.composite
def preemption_cases(draw: st.DrawFn) -> tuple[Snapshot, Job]:
    """Small full-ish clusters of whole-GPU running jobs, and one urgent single-node job."""
    nodes: list[Node] = []
    live: list[LiveAllocation] = []
    running: list[RunningJob] = []
    for n in range(draw(st.integers(1, 3))):
        size = draw(st.sampled_from([2, 4]))
        name = f"n{n}"
        nodes.append(Node(name, NodeState.READY, tuple(Gpu(i, "H100", 80 * 1024) for i in range(size)), 16.0, 0))
        index = 0
        while index < size:
            width = min(size - index, draw(st.sampled_from([1, 2])))
            if draw(st.integers(0, 4)):
                job_id = f"r{len(running)}"
                ran = draw(st.sampled_from([600.0, 3600.0, 7200.0]))
                checkpoint = draw(st.none() | st.sampled_from([0.0, 300.0]))
                running.append(
                    RunningJob(
                        job_id,
                        NOW - timedelta(seconds=ran),
                        priority=draw(st.integers(0, 3)),
                        preemptible=draw(st.booleans()),
                        last_checkpoint_at=None if checkpoint is None else NOW - timedelta(seconds=checkpoint),
                    )
                )
                cpus = draw(st.sampled_from([0.0, 4.0]))
                live.append(LiveAllocation(job_id, Allocation(name, tuple(range(index, index + width)), cpus=cpus)))
            index += width
    request = Request(gpus_per_node=float(draw(st.integers(1, 4))), cpus_per_node=draw(st.none() | st.just(8.0)))
    job = Job("urgent", 0, request, priority=2)
    return Snapshot(tuple(nodes), tuple(live), (job,), tuple(running)), job


@settings(max_examples=150, deadline=None)
@given(preemption_cases())
def test_victim_choice_minimises_lost_work_then_jobs(case: tuple[Snapshot, Job]) -> None:
    snap, job = case
    held: dict[str, list[Allocation]] = defaultdict(list)
    for x in snap.live:
        held[x.job_id].append(x.allocation)
    lost = {r.id: lost_gpu_seconds(r, held[r.id], NOW) for r in snap.running}
    eligible = sorted(r.id for r in snap.running if r.preemptible and r.priority < job.priority)
    best: tuple[float, int] | None = None
    for k in range(len(eligible) + 1):
        for subset in combinations(eligible, k):
            live = tuple(x for x in snap.live if x.job_id not in subset)
            if schedule(Snapshot(snap.nodes, live, (job,)), GREEDY, NOW).placements:
                cost = (round(sum(lost[v] for v in subset), 6), k)
                best = cost if best is None or cost < best else best
    plan = schedule(snap, DEFAULT, NOW)
    chosen = [p.victim_job_id for p in plan.preemptions]
    if best is None:
        assert not chosen and not plan.placements
    elif best == (0.0, 0):
        assert not chosen and plan.placements
    else:
        assert not plan.placements
        got = (round(sum(lost[v] for v in chosen), 6), len(chosen))
        assert abs(got[0] - best[0]) <= 1e-6 and got[1] == best[1]
