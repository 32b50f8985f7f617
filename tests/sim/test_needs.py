"""What the simulator keeps between cycles (``corral.sim.needs``, ``hosting_below``) against it made afresh."""

from __future__ import annotations

import random
from collections.abc import Collection

import pytest

from corral.model import Job
from corral.sched import get_policy
from corral.sim import SimResult, Trace, TraceJob, build_nodes, prepare, simulate
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


def random_jobs(seed: int, sizes: list[int]) -> list[TraceJob]:
    """200 jobs over the first 20,000 s, short to very long, of the given GPU counts (chosen at random)."""
    rng = random.Random(seed)
    return [
        TraceJob(
            id=f"j{i:03d}",
            submit_s=float(rng.randrange(0, 20_000, 50)),
            duration_s=float(rng.choice([30, 600, 3_000, 9_000, 40_000])),
            gpus=rng.choice(sizes),
        )
        for i in range(200)
    ]


def run(jobs: list[TraceJob], policy: str) -> SimResult:
    """The jobs on 16 nodes × 8 GPUs of one type."""
    spec = ClusterSpec(node_groups=[NodeGroupSpec(name="g", count=16, gpus_per_node=8, gpu_type="V100")])
    nodes = build_nodes(spec)
    return simulate(prepare(Trace(tuple(jobs)), nodes), nodes, get_policy(policy), spec.gpu_speed)


@pytest.mark.parametrize("policy", ["default", "tiresias", "srpt-oracle"])
@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("kept", [(64, 4), (2, 1)])
def test_kept_counts_are_the_counts_made_afresh(
    policy: str, seed: int, kept: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Overloaded, victims lose nothing: many cycles get the nodes where a search could do better, between
    # which jobs start, stop and (under tiresias) change level by crossing a threshold. With few tables and
    # changes kept, tables are dropped and made again, and changes forgotten, so every node counted again.
    monkeypatch.setattr("corral.sim.needs.TABLES", kept[0])
    monkeypatch.setattr("corral.sim.state.CHANGES_KEPT", kept[1])
    monkeypatch.setattr("corral.sim.victims.FIRST_NODES", (1,))
    monkeypatch.setattr("corral.sim.victims.BETTER_NODES", 2)
    jobs = random_jobs(seed, [1, 1, 1, 2, 4, 8])
    table = NodeNeeds._table
    checked: list[int] = []

    def compared(self: NodeNeeds, job: Job) -> _Table:
        kept = table(self, job)
        assert kept.order == afresh(self._state, job)
        assert kept.counts == {name: stop for stop, name in kept.order}
        checked.append(len(kept.order))
        return kept

    monkeypatch.setattr(NodeNeeds, "_table", compared)
    result = run(jobs, policy)
    assert result.preemptions > 0
    assert len(checked) > 20 and max(checked) > 1


def hosts_afresh(
    state: ClusterState, job: Job, enough: int, skip: set[str], stopping: int | None, stopped: Collection[str] = ()
) -> int:
    """The nodes outside ``skip`` (up to ``enough``) that could hold a share once at most ``stopping`` running
    jobs below the job's level, or of ``stopped``, are gone, counted from every node's running jobs."""
    request = job.request
    slots, level, below = request.gpu_slots_per_node, state.policy.level(job), state.running_level
    found = 0
    for gpu_type in request.gpu_types or state.types:
        for name in state.hosts(gpu_type, slots):
            room = state.free[name]
            if name in skip:
                continue
            if room < slots:
                sizes = sorted(
                    (len(a.allocation.gpus) for j, a in state.live[name].items() if below[j] < level or j in stopped),
                    reverse=True,
                )
                room += sum(sizes if stopping is None else sizes[:stopping])
            if room >= slots:
                found += 1
                if found >= enough:
                    return found
    return found


@pytest.mark.parametrize("policy", ["default", "tiresias"])
def test_hosts_are_the_hosts_counted_afresh(policy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("corral.sim.victims.FIRST_NODES", (2,))
    jobs = random_jobs(5, [1, 1, 2, 4, 8, 16])
    hosts = NodeNeeds.hosts
    checked: list[int] = []

    def compared(
        self: NodeNeeds, job: Job, enough: int, skip: set[str], stopping: int | None, stopped: Collection[str] = ()
    ) -> int:
        found = hosts(self, job, enough, skip, stopping, stopped)
        state, names = self._state, sorted(self._state.nodes)
        some = set(sorted(state.running_level)[::3])  # running jobs of any level, as a plan's victims
        for other in [
            (enough, skip, stopping, stopped),
            (1, set(), 0, ()),
            (3, set(names[:3]), 1, ()),
            (16, set(), 2, ()),
            (16, set(), None, ()),
            (16, set(), None, some),
            (16, set(names[:3]), 1, some),
        ]:
            assert hosts(self, job, *other) == hosts_afresh(state, job, *other)
        checked.append(found)
        return found

    monkeypatch.setattr(NodeNeeds, "hosts", compared)
    result = run(jobs, policy)
    assert result.preemptions > 0
    assert len(checked) > 20 and 0 in checked and max(checked) > 0


@pytest.mark.parametrize("policy", ["default", "tiresias", "srpt-oracle"])
@pytest.mark.parametrize("kept", [4, 1])
def test_nodes_hosting_jobs_below_a_level_are_those_found_afresh(
    policy: str, kept: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("corral.sim.state.CHANGES_KEPT", kept)
    jobs = random_jobs(9, [1, 1, 2, 4, 8, 16])
    hosting_below = ClusterState.hosting_below
    tops: set[int] = set()

    def compared(self: ClusterState, top: int) -> list[str]:
        found = list(hosting_below(self, top))
        level = self.running_level
        assert found == [name for name, here in self.live.items() if any(level[j] < top for j in here)]
        for other in {*self.levels, *self.pending_levels}:
            tops.add(other)
            assert list(hosting_below(self, other)) == [
                name for name, here in self.live.items() if any(level[j] < other for j in here)
            ]
        return found

    monkeypatch.setattr(ClusterState, "hosting_below", compared)
    result = run(jobs, policy)
    assert result.preemptions > 0 and len(tops) > 1
