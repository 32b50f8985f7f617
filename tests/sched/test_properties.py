"""Scheduler invariants over generated clusters, live allocations and queues."""

from collections import defaultdict
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from corral.model import EPSILON, FULL_GPU, Allocation, Job, LiveAllocation, Node, NodeState
from corral.sched import IN_ORDER, NEVER_FITS, NO_NODES, POLICIES, Placement, Plan, Snapshot, get_policy, schedule
from corral.testing.strategies import jobs, snapshots

NOW = datetime(2025, 1, 1, tzinfo=UTC)
FAST = settings(max_examples=100, deadline=None)
policy_names = st.sampled_from(sorted(POLICIES))


def run(snap: Snapshot, policy: str) -> Plan:
    return schedule(snap, get_policy(policy), NOW)


def used_by_live(snap: Snapshot) -> dict[tuple[str, int], float]:
    used: dict[tuple[str, int], float] = defaultdict(float)
    for live in snap.live:
        for index in live.allocation.gpus:
            used[live.allocation.node, index] += live.allocation.gpu_fraction
    return used


@FAST
@given(snapshots(), policy_names)
def test_no_gpu_slot_is_allocated_beyond_capacity(snap: Snapshot, policy: str) -> None:
    used = used_by_live(snap)
    for placement in run(snap, policy).placements:
        for alloc in placement.allocations:
            for index in alloc.gpus:
                if alloc.gpu_fraction >= FULL_GPU:
                    assert used[alloc.node, index] <= EPSILON, "a whole GPU must have nothing else on it"
                used[alloc.node, index] += alloc.gpu_fraction
                assert used[alloc.node, index] <= FULL_GPU + EPSILON


@FAST
@given(snapshots(), policy_names)
def test_cpus_and_memory_are_never_overcommitted(snap: Snapshot, policy: str) -> None:
    nodes = {n.name: n for n in snap.nodes}
    cpus: dict[str, float] = defaultdict(float)
    memory: dict[str, int] = defaultdict(int)
    for alloc in [live.allocation for live in snap.live]:
        cpus[alloc.node] += alloc.cpus
        memory[alloc.node] += alloc.memory_mb
    for placement in run(snap, policy).placements:
        for alloc in placement.allocations:
            cpus[alloc.node] += alloc.cpus
            memory[alloc.node] += alloc.memory_mb
            assert cpus[alloc.node] <= nodes[alloc.node].cpus + EPSILON
            assert memory[alloc.node] <= nodes[alloc.node].memory_mb


@FAST
@given(snapshots(), policy_names)
def test_a_gang_is_placed_whole_on_distinct_nodes_with_equal_shares(snap: Snapshot, policy: str) -> None:
    pending = {j.id: j for j in snap.pending}
    for placement in run(snap, policy).placements:
        request = pending[placement.job_id].request
        assert len(placement.allocations) == request.nodes
        assert len({a.node for a in placement.allocations}) == request.nodes
        slots = 0 if request.gpus_per_node <= 0 else request.gpu_slots_per_node
        fraction = request.gpus_per_node if request.fractional else FULL_GPU
        assert all(len(a.gpus) == slots and a.gpu_fraction == fraction for a in placement.allocations)


@FAST
@given(snapshots(), policy_names)
def test_placements_only_on_ready_nodes_and_acceptable_types(snap: Snapshot, policy: str) -> None:
    nodes = {n.name: n for n in snap.nodes}
    pending = {j.id: j for j in snap.pending}
    for placement in run(snap, policy).placements:
        request = pending[placement.job_id].request
        if request.gpus_per_node <= 0:
            assert placement.gpu_type is None
        else:
            assert not request.gpu_types or placement.gpu_type in request.gpu_types
        for alloc in placement.allocations:
            node = nodes[alloc.node]
            assert node.state == NodeState.READY
            types = {g.index: g.type for g in node.gpus}
            assert all(types[i] == placement.gpu_type for i in alloc.gpus)


@FAST
@given(snapshots(), policy_names)
def test_every_pending_job_is_placed_once_or_has_a_reason(snap: Snapshot, policy: str) -> None:
    plan = run(snap, policy)
    placed = [p.job_id for p in plan.placements]
    assert len(placed) == len(set(placed))
    assert set(placed).isdisjoint(plan.reasons)
    assert set(placed) | set(plan.reasons) == {j.id for j in snap.pending}
    assert all(r.message for r in plan.reasons.values())
    ready = any(n.state == NodeState.READY for n in snap.nodes)
    assert all((r.code == NO_NODES) == (not ready and r.code != NEVER_FITS) for r in plan.reasons.values())


@FAST
@given(snapshots(), policy_names)
def test_queue_positions_follow_the_waiting_order(snap: Snapshot, policy: str) -> None:
    plan = run(snap, policy)
    assert set(plan.waiting) == set(plan.reasons) and len(plan.waiting) == len(plan.reasons)
    for place, job_id in enumerate(plan.waiting, start=1):
        reason = plan.reasons[job_id]
        assert not (reason.queued and reason.code == NEVER_FITS)
        assert plan.position(job_id) == ((place, len(plan.waiting)) if reason.queued else None)


@FAST
@given(snapshots(), policy_names, st.data())
def test_schedule_is_deterministic(snap: Snapshot, policy: str, data: st.DataObject) -> None:
    plan = run(snap, policy)
    assert run(snap, policy) == plan
    shuffled = Snapshot(
        nodes=tuple(data.draw(st.permutations(snap.nodes))),
        live=tuple(data.draw(st.permutations(snap.live))),
        pending=tuple(data.draw(st.permutations(snap.pending))),
    )
    assert run(shuffled, policy) == plan


@FAST
@given(snapshots(), policy_names)
def test_a_waiting_job_does_not_fit_what_the_plan_leaves(snap: Snapshot, policy: str) -> None:
    plan = run(snap, policy)
    held = snap.live + tuple(LiveAllocation(p.job_id, a) for p in plan.placements for a in p.allocations)
    waiting = [j for j in snap.pending if j.id in plan.reasons and plan.reasons[j.id].code != IN_ORDER]
    for job in waiting:
        assert run(Snapshot(snap.nodes, held, (job,)), policy).placements == ()


@FAST
@given(snapshots())
def test_a_strict_order_starts_jobs_only_in_queue_order(snap: Snapshot) -> None:
    policy = get_policy("fifo")
    plan = schedule(snap, policy, NOW)
    started = {p.job_id for p in plan.placements}
    queue = [
        j.id
        for j in sorted(snap.pending, key=lambda j: (*policy.job_order(j), j.id))
        if j.id in started or plan.reasons[j.id].code != NEVER_FITS
    ]
    assert set(queue[: len(started)]) == started  # the jobs started come first in the queue
    behind = {plan.reasons[j].code for j in queue[len(started) + 1 :]}  # the rest wait behind one, if any node is up
    assert behind <= {IN_ORDER, NO_NODES}


@FAST
@given(snapshots(max_jobs=0), jobs())
def test_default_placement_matches_a_brute_force_best_fit(snap: Snapshot, job: Job) -> None:
    plan = run(Snapshot(snap.nodes, snap.live, (job,)), "default")
    assert (plan.placements[0] if plan.placements else None) == BruteForce(snap).place(job)


Option = tuple[tuple[float, tuple[int, ...], str], str, tuple[int, ...]]  # (fit key, node, GPU indices)


class BruteForce:
    """The default policy's choice for one job, found by scanning every node and GPU."""

    def __init__(self, snap: Snapshot) -> None:
        self.used = used_by_live(snap)
        self.ready = sorted((n for n in snap.nodes if n.state == NodeState.READY), key=lambda n: n.name)
        self.cpus = {
            n.name: n.cpus - sum(a.allocation.cpus for a in snap.live if a.allocation.node == n.name)
            for n in self.ready
        }
        self.memory = {
            n.name: n.memory_mb - sum(a.allocation.memory_mb for a in snap.live if a.allocation.node == n.name)
            for n in self.ready
        }

    def place(self, job: Job) -> Placement | None:
        request = job.request
        all_types = sorted({g.type for n in self.ready for g in n.gpus})
        types: list[str | None] = [None] if request.gpus_per_node <= 0 else list(request.gpu_types or all_types)
        found = [(t, o) for t in types if len(o := self.options(job, t)) == request.nodes]
        if not found:
            return None
        gpu_type, chosen = found[0] if request.gpu_types else min(found, key=lambda f: ([c[0] for c in f[1]], f[0]))
        fraction = request.gpus_per_node if request.fractional else FULL_GPU
        cpus, memory = request.cpus_per_node or 0.0, request.memory_mb_per_node or 0
        return Placement(job.id, gpu_type, tuple(Allocation(n, gpus, fraction, cpus, memory) for _, n, gpus in chosen))

    def options(self, job: Job, gpu_type: str | None) -> list[Option]:
        found = [o for n in self.ready if self.fits_host(job, n) and (o := self.option(job, n, gpu_type)) is not None]
        return sorted(found)[: job.request.nodes]

    def option(self, job: Job, node: Node, gpu_type: str | None) -> Option | None:
        request, free = job.request, len(self.empty(node))
        if gpu_type is None:
            return ((0.0, (1 if node.gpus else 0, free), node.name), node.name, ())
        if not request.fractional:
            gpus = self.empty(node, gpu_type)[: request.gpu_slots_per_node]
            return (
                ((0.0, (free,), node.name), node.name, tuple(gpus)) if len(gpus) == request.gpu_slots_per_node else None
            )
        options: list[Option] = []
        for gpu in sorted(g.index for g in node.gpus if g.type == gpu_type):
            left = round(FULL_GPU - self.used[node.name, gpu], 12)
            if left >= request.gpus_per_node - EPSILON:
                options.append(((min(left, FULL_GPU), (free,), node.name), node.name, (gpu,)))
        return min(options, default=None)

    def fits_host(self, job: Job, node: Node) -> bool:
        cpus, memory = job.request.cpus_per_node, job.request.memory_mb_per_node
        return (cpus is None or cpus <= self.cpus[node.name] + EPSILON) and (
            memory is None or memory <= self.memory[node.name]
        )

    def empty(self, node: Node, gpu_type: str | None = None) -> list[int]:
        gpus = sorted(g.index for g in node.gpus if gpu_type in (None, g.type))
        return [i for i in gpus if self.used[node.name, i] <= EPSILON]
