"""Views carried from one snapshot to the next equal views built from scratch."""

from __future__ import annotations

import random

from corral.model import EPSILON, FULL_GPU, Allocation, Gpu, LiveAllocation, Node, NodeState
from corral.sched import carry, get_policy
from corral.sched.node_capacity import IndexEntries, NodeCapacity, rounded
from corral.sched.plan import Placement
from corral.sched.snapshot import CapacityView, Snapshot


def state(view: CapacityView) -> tuple[object, ...]:
    for name, node in view.nodes.items():  # the node's own shortcuts agree with its GPUs, one by one
        assert node.index_entries() == entries_one_by_one(node), name
    nodes = sorted(
        (name, dict(n.used), n.free_gpus, n.free_cpus, n.free_memory_mb, n.gpu_rank, n.cpu_rank)
        for name, n in view.nodes.items()
    )
    empty = {t: {count: entries for count, entries in sorted(b.items()) if entries} for t, b in view._empty.items()}
    return nodes, empty, view._shared, [n.name for n in view.hosts()], view.gpu_types


def entries_one_by_one(node: NodeCapacity) -> IndexEntries:
    """``index_entries`` from every GPU's use, without the node's counts."""
    used = node.used
    empty = ((t, n) for t in node.gpu_types if (n := sum(used[i] <= EPSILON for i in node.indices(t))))
    shared = (
        (t, rounded(FULL_GPU - used[i]), i)
        for t in node.gpu_types
        for i in node.indices(t)
        if EPSILON < used[i] < FULL_GPU - EPSILON
    )
    return tuple(empty), tuple(shared)


def cluster(rng: random.Random) -> tuple[Node, ...]:
    nodes = []
    for i in range(12):
        gpu_type = rng.choice(("H100", "A100"))
        gpus = tuple(Gpu(index=g, type=gpu_type, memory_mb=81920) for g in range(rng.choice((0, 4, 8))))
        nodes.append(Node(f"n{i:02d}", NodeState.READY, gpus, 32.0, 1 << 18, {"rack": f"r{i // 4}"}))
    return tuple(nodes)


def allocation(rng: random.Random, nodes: tuple[Node, ...], used: dict[tuple[str, int], float]) -> Allocation | None:
    node = rng.choice(nodes)
    if not node.gpus or rng.random() < 0.15:
        return Allocation(node.name, (), 1.0, cpus=rng.choice((0.5, 1.0, 2.0)), memory_mb=1024)
    if rng.random() < 0.3:  # a share of one GPU
        fraction = rng.choice((0.25, 0.5, 0.3))
        free = [g.index for g in node.gpus if used.get((node.name, g.index), 0.0) + fraction <= 1.0 + 1e-9]
        if not free:
            return None
        index = rng.choice(free)
        used[(node.name, index)] = used.get((node.name, index), 0.0) + fraction
        return Allocation(node.name, (index,), fraction, cpus=1.0, memory_mb=2048)
    empty = [g.index for g in node.gpus if used.get((node.name, g.index), 0.0) == 0.0]
    if not empty:
        return None
    chosen = tuple(sorted(rng.sample(empty, rng.randint(1, len(empty)))))
    for index in chosen:
        used[(node.name, index)] = 1.0
    return Allocation(node.name, chosen, 1.0, cpus=4.0, memory_mb=8192)


def churn(
    rng: random.Random,
    nodes: tuple[Node, ...],
    live: dict[str, LiveAllocation],
    used: dict[tuple[str, int], float],
    step: int,
    ends: int,
    starts: int,
) -> None:
    """Up to ``ends`` allocations end and up to ``starts`` new ones start (``live`` and ``used`` updated)."""
    for job_id in rng.sample(sorted(live), min(len(live), rng.randint(0, ends))):
        gone = live.pop(job_id).allocation
        for index in gone.gpus:
            used[(gone.node, index)] = round(used[(gone.node, index)] - gone.gpu_fraction, 12)
    for _ in range(rng.randint(0, starts)):
        made = allocation(rng, nodes, used)
        if made is not None:
            live[f"j{step}-{len(live)}"] = LiveAllocation(f"j{step}-{len(live)}", made)


def test_a_carried_view_equals_one_built_from_scratch_through_many_snapshots():
    rng = random.Random(11)
    for policy_name in ("default", "fifo"):
        policy = get_policy(policy_name)
        nodes = cluster(rng)
        live: dict[str, LiveAllocation] = {}
        used: dict[tuple[str, int], float] = {}
        for step in range(150):
            if rng.random() < 0.1:  # a node goes down or comes back: a new tuple of nodes
                i = rng.randrange(len(nodes))
                node = nodes[i]
                flipped = NodeState.NOT_READY if node.state is NodeState.READY else NodeState.READY
                nodes = (
                    *nodes[:i],
                    Node(node.name, flipped, node.gpus, node.cpus, node.memory_mb, node.labels),
                    *nodes[i + 1 :],
                )
            churn(rng, nodes, live, used, step, ends=4, starts=5)
            snapshot = Snapshot(nodes=nodes, live=tuple(live.values()))
            carried = carry.pristine_view(snapshot, policy.gpu_ranker, policy.cpu_ranker)
            built = CapacityView(snapshot, policy.gpu_ranker, policy.cpu_ranker)
            assert state(carried) == state(built), f"{policy_name}, step {step}"


def test_the_cpu_only_order_kept_through_changes_equals_a_fresh_one():
    """The nodes in CPU-only preference order are sorted when first asked for, then kept current as
    allocations come and go: always the order of a view built from scratch."""
    rng = random.Random(17)
    policy = get_policy("default")
    nodes = cluster(rng)
    view = CapacityView(Snapshot(nodes=nodes), policy.gpu_ranker, policy.cpu_ranker)
    # Every node empty: nodes without GPUs first, then the fewest GPUs, then by name.
    expected = sorted(nodes, key=lambda n: (1 if n.gpus else 0, len(n.gpus), n.name))
    assert [n.name for n in view.hosts()] == [n.name for n in expected]
    live: dict[str, LiveAllocation] = {}
    used: dict[tuple[str, int], float] = {}
    for step in range(100):
        before = dict(live)
        churn(rng, nodes, live, used, step, ends=3, starts=4)
        view.release([a.allocation for job_id, a in before.items() if job_id not in live])
        view.take([a.allocation for job_id, a in live.items() if job_id not in before])
        built = CapacityView(Snapshot(nodes=nodes, live=tuple(live.values())), policy.gpu_ranker, policy.cpu_ranker)
        assert [n.name for n in view.hosts()] == [n.name for n in built.hosts()], f"step {step}"


def test_a_carried_view_is_a_copy_that_later_snapshots_do_not_change():
    rng = random.Random(5)
    nodes = cluster(rng)
    policy = get_policy("default")
    first = carry.pristine_view(Snapshot(nodes=nodes), policy.gpu_ranker, policy.cpu_ranker)
    before = state(first)
    gpu_node = next(n for n in nodes if n.gpus)
    taken = LiveAllocation("j", Allocation(gpu_node.name, (0,), 1.0))
    carry.pristine_view(Snapshot(nodes=nodes, live=(taken,)), policy.gpu_ranker, policy.cpu_ranker)
    assert state(first) == before


def test_views_of_changing_node_subsets_equal_views_built_from_scratch():
    """A different subset of nodes every snapshot, as the simulator passes: each view is assembled from
    the nodes' kept capacities and must equal one built from scratch, as must the snapshot's orders."""
    rng = random.Random(23)
    policy = get_policy("default")
    nodes = cluster(rng)
    live: dict[str, LiveAllocation] = {}
    used: dict[tuple[str, int], float] = {}
    for step in range(200):
        churn(rng, nodes, live, used, step, ends=3, starts=4)
        subset = tuple(n for n in nodes if rng.random() < 0.6)
        names = {n.name for n in subset}
        held = [a for a in live.values() if a.allocation.node in names or rng.random() < 0.1]  # some stale
        if held and rng.random() < 0.1:
            held.append(held[0])  # the same allocation listed twice counts twice, as when built from scratch
        rng.shuffle(held)
        snapshot = Snapshot(nodes=subset, live=tuple(held))
        carried = carry.pristine_view(snapshot, policy.gpu_ranker, policy.cpu_ranker)
        built = CapacityView(Snapshot(nodes=subset, live=tuple(held)), policy.gpu_ranker, policy.cpu_ranker)
        assert state(carried) == state(built), f"step {step}"
        in_order = sorted(held, key=lambda a: (a.allocation.node, a.job_id, *carry.allocation_order(a.allocation)[1:]))
        assert list(snapshot.live_in_order) == in_order


def test_a_view_worked_on_by_a_cycle_is_brought_up_to_date_as_one_built_from_scratch():
    """After a cycle, the view it took its placements and holds on is kept in place of the snapshot's: the
    next snapshot lists most placements as live, not the holds (their victims still run), and others end."""
    rng = random.Random(29)
    policy = get_policy("default")
    nodes = cluster(rng)
    live: dict[str, LiveAllocation] = {}
    used: dict[tuple[str, int], float] = {}
    kept, worked = 0, None
    for step in range(150):
        snapshot = Snapshot(nodes=nodes, live=tuple(live.values()))
        view = snapshot.view(policy.gpu_ranker, policy.cpu_ranker)
        kept += carry._views[(policy.gpu_ranker, policy.cpu_ranker)].view is worked  # brought up to date
        assert state(view) == state(CapacityView(snapshot, policy.gpu_ranker, policy.cpu_ranker)), f"step {step}"
        placed: dict[str, LiveAllocation] = {}
        churn(rng, nodes, placed, used, step, ends=0, starts=4)
        taken = [Placement(a.job_id, None, (a.allocation,)) for a in placed.values()]
        if live and rng.random() < 0.5:  # a hold: on its victim's GPUs, as the victim still runs
            taken.append(Placement(f"h{step}", None, (rng.choice(list(live.values())).allocation,)))
        for placement in taken:
            view.apply(placement)
        snapshot.worked(view, taken)
        worked = view
        churn(rng, nodes, live, used, step, ends=4, starts=0)
        live.update(placed)  # the placements start; the holds wait for their victims
    assert kept > 100  # the rest changed too much while the cluster was nearly empty: assembled afresh


def test_a_worked_view_showing_an_allocation_twice_is_not_kept():
    """Views are brought up to date by sets of allocations: one the cycle took again, exactly as a live one,
    is shown twice on its view, so that view is not kept (the next snapshot's is built as usual)."""
    policy = get_policy("default")
    nodes = cluster(random.Random(3))
    gpu_node = next(n for n in nodes if n.gpus)
    running = LiveAllocation("j", Allocation(gpu_node.name, (0,), 0.25))
    snapshot = Snapshot(nodes=nodes, live=(running,))
    view = snapshot.view(policy.gpu_ranker, policy.cpu_ranker)
    again = Placement(running.job_id, "H100", (running.allocation,))
    view.apply(again)
    snapshot.worked(view, [again])
    following = Snapshot(nodes=nodes, live=(running,))
    carried = carry.pristine_view(following, policy.gpu_ranker, policy.cpu_ranker)
    assert state(carried) == state(CapacityView(following, policy.gpu_ranker, policy.cpu_ranker))
