import os
import pickle
import subprocess
import sys
from dataclasses import replace

import pytest

from corral.model import Allocation, Job, LiveAllocation, NodeState
from corral.sched import CapacityView, Snapshot, get_policy
from corral.sched.placement import find_placement
from corral.testing import live_alloc, make_job, make_node, snapshot

POLICY = get_policy("default")


def view_of(snap: Snapshot) -> CapacityView:
    return CapacityView(snap, POLICY.gpu_ranker, POLICY.cpu_ranker)


def state(view: CapacityView) -> tuple[object, ...]:
    """Free capacity per node and the order every index yields in."""
    nodes = {n.name: (dict(n.used), n.free_gpus, n.free_cpus, n.free_memory_mb) for n in view.nodes.values()}
    empty = {(t, c): [n.name for n in view.nodes_with_empty(t, c)] for t in view.gpu_types for c in range(1, 9)}
    shared = {t: [(r, n.name, i) for r, n, i in view.shared_with_room(t, 0.0)] for t in view.gpu_types}
    return nodes, empty, shared, [n.name for n in view.hosts()]


def test_only_ready_nodes_are_in_the_view() -> None:
    snap = snapshot(nodes=[make_node("a").gpus(1), make_node("b").gpus(1).state(NodeState.DRAINED)])
    assert list(view_of(snap).nodes) == ["a"]


def test_live_allocations_are_counted() -> None:
    snap = snapshot(
        nodes=[make_node("a").gpus(2).cpus(16).memory("64GB")],
        live=[live_alloc("x", "a", [0], cpus=4, memory="16GB"), live_alloc("y", "a", [1], 0.25)],
    )
    node = view_of(snap).nodes["a"]
    assert (node.used, node.free_gpus, node.free_cpus, node.free_memory_mb) == ({0: 1.0, 1: 0.25}, 0, 12.0, 48 * 1024)


def test_live_allocations_on_unknown_nodes_are_ignored() -> None:
    snap = snapshot(nodes=[make_node("a").gpus(1)], live=[live_alloc("x", "gone", [0])])
    assert view_of(snap).nodes["a"].free_gpus == 1


def test_apply_then_revert_restores_the_view() -> None:
    snap = snapshot(
        nodes=[make_node("a").gpus(4).cpus(8), make_node("b").gpus(4).cpus(8), make_node("c").cpus(4)],
        live=[live_alloc("x", "a", [1], 0.3)],
    )
    view = view_of(snap)
    before = state(view)
    jobs: list[Job] = [
        make_job("f").gpus(0.3).cpus(1).build(),
        make_job("w").gpus(2).nodes(2).cpus(2).build(),
        make_job("c").cpus(2).build(),
    ]
    placements = []
    for job in jobs:
        placement = find_placement(view, job)
        assert placement is not None
        view.apply(placement)
        placements.append(placement)
    assert state(view) != before
    for placement in reversed(placements):
        view.revert(placement)
    assert state(view) == before
    assert find_placement(view, jobs[0]) == placements[0]


def test_apply_rejects_nodes_that_are_not_ready() -> None:
    snap = snapshot(nodes=[make_node("a").gpus(1), make_node("b").gpus(1).state(NodeState.NOT_READY)])
    placement = find_placement(view_of(snapshot(nodes=[make_node("b").gpus(1)])), make_job("j").gpus(1).build())
    assert placement is not None
    with pytest.raises(ValueError, match="'b', which is not a READY node"):
        view_of(snap).apply(placement)


@pytest.mark.parametrize(
    ("snap_args", "message"),
    [
        pytest.param({"nodes": [make_node("a"), make_node("a")]}, "duplicate node names in snapshot: a", id="nodes"),
        pytest.param(
            {"pending": [make_job("j"), make_job("j")]}, "duplicate pending job names in snapshot: j", id="jobs"
        ),
    ],
)
def test_snapshot_rejects_duplicates(snap_args: dict[str, list[object]], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        snapshot(**snap_args)  # type: ignore[arg-type]


def test_snapshot_is_a_value() -> None:
    snap = snapshot(nodes=[make_node("a").gpus(1)], pending=[make_job("j").gpus(1)])
    assert snap == snapshot(nodes=[make_node("a").gpus(1)], pending=[make_job("j").gpus(1)])


def test_a_live_allocation_hashes_as_its_value_and_a_copy_from_another_process_matches():
    """Its hash is kept from when it was made; a copy made in a process with another string hash seed must
    not bring that process's hash along, or a set would not find it."""
    here = LiveAllocation("j1", Allocation("n1", (0, 1), 0.5))
    assert hash(here) == hash(LiveAllocation("j1", Allocation("n1", (0, 1), 0.5)))
    assert here == LiveAllocation("j1", Allocation("n1", (0, 1), 0.5))
    assert replace(here, job_id="j2") != here and replace(here, job_id="j2") in {LiveAllocation("j2", here.allocation)}
    script = (
        "import pickle, sys; from corral.model import Allocation, LiveAllocation;"
        "sys.stdout.buffer.write(pickle.dumps(LiveAllocation('j1', Allocation('n1', (0, 1), 0.5))))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    made = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, check=True).stdout
    assert pickle.loads(made) in {here}
