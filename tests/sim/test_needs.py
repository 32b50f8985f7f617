"""The kept counts of jobs to stop per node (``corral.sim.needs``) against counts made afresh each time."""

from __future__ import annotations

import random

import pytest

from corral.model import Job
from corral.sched import get_policy
from corral.sim import Trace, TraceJob, build_nodes, prepare, simulate
from corral.sim.needs import NodeNeeds, _Table
from corral.sim.state import ClusterState
from corral.spec import ClusterSpec, NodeGroupSpec


def afresh(state: ClusterState, job: Job) -> list[tuple[int, str]]:
    """Every node's count from the running jobs below the job's level, as if nothing were kept."""
    level, request = state.policy.level(job), job.request
    slots = request.gpu_slots_per_node
    hosts = {name for t in request.gpu_types or state.types for name in state.hosts(t, slots)}
    sizes_on: dict[str, list[int]] = {}
    for below, ids in state.levels.items():
        if below < level:
            for j in ids:
                for name in state.running_nodes[j]:
                    sizes_on.setdefault(name, []).append(len(state.live[name][j].allocation.gpus))
    out = []
    for name, sizes in sizes_on.items():
        room = state.free[name]
        if name not in hosts or room + sum(sizes) < slots:
            continue
        stop = 0
        for size in sorted(sizes, reverse=True):
            if room >= slots:
                break
            room += size
            stop += 1
        out.append((stop, name))
    return sorted(out)


@pytest.mark.parametrize("policy", ["default", "tiresias"])
@pytest.mark.parametrize("seed", [1, 2])
def test_kept_counts_are_the_counts_made_afresh(policy: str, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # Overloaded, victims lose nothing: many cycles get the nodes where a search could do better, between
    # which jobs start, stop and (under tiresias) change level by crossing a threshold.
    monkeypatch.setattr("corral.sim.victims.FIRST_NODES", (1,))
    monkeypatch.setattr("corral.sim.victims.BETTER_NODES", 2)
    rng = random.Random(seed)
    jobs = [
        TraceJob(
            id=f"j{i:03d}",
            submit_s=float(rng.randrange(0, 20_000, 50)),
            duration_s=float(rng.choice([30, 600, 3_000, 9_000, 40_000])),
            gpus=rng.choice([1, 1, 1, 2, 4, 8]),
        )
        for i in range(200)
    ]
    table = NodeNeeds._table
    checked: list[int] = []

    def compared(self: NodeNeeds, job: Job) -> _Table:
        kept = table(self, job)
        assert kept.order == afresh(self._state, job)
        assert kept.counts == {name: stop for stop, name in kept.order}
        checked.append(len(kept.order))
        return kept

    monkeypatch.setattr(NodeNeeds, "_table", compared)
    spec = ClusterSpec(node_groups=[NodeGroupSpec(name="g", count=16, gpus_per_node=8, gpu_type="V100")])
    nodes = build_nodes(spec)
    result = simulate(prepare(Trace(tuple(jobs)), nodes), nodes, get_policy(policy), spec.gpu_speed)
    assert result.preemptions > 0
    assert len(checked) > 20 and max(checked) > 1
