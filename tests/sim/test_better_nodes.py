"""Cycles given the nodes where a search could do better, with gangs running: the same run as full cycles."""

from __future__ import annotations

import random
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

import pytest

from corral.model import Allocation, Job, Request, RunningJob
from corral.sched import Placement, Plan, Preemption, get_policy
from corral.sim import SimResult, Trace, TraceJob, build_nodes, prepare, simulate, victims
from corral.sim.state import ClusterState
from corral.sim.workload import EPOCH
from corral.spec import ClusterSpec, NodeGroupSpec


def overloaded(seed: int, count: int = 200) -> list[TraceJob]:
    # Gangs of two and four nodes start first and run long enough to be demoted, then one-node jobs keep
    # the cluster overloaded and stop them; no job loses work when stopped, so the search scans nodes by name.
    rng = random.Random(seed)
    gangs = [
        TraceJob(id=f"g{i:02d}", submit_s=float(50 * i), duration_s=40_000.0, gpus=rng.choice([16, 16, 32]))
        for i in range(6)
    ]
    return gangs + [
        TraceJob(
            id=f"j{i:03d}",
            submit_s=float(rng.randrange(1_000, 20_000, 50)),
            duration_s=float(rng.choice([30, 600, 3_000, 9_000, 40_000])),
            gpus=rng.choice([1, 1, 1, 2, 4, 8]),
        )
        for i in range(count)
    ]


def run(jobs: list[TraceJob], policy: str, prune: bool) -> SimResult:
    spec = ClusterSpec(node_groups=[NodeGroupSpec(name="g", count=16, gpus_per_node=8, gpu_type="V100")])
    nodes = build_nodes(spec)
    return simulate(prepare(Trace(tuple(jobs)), nodes), nodes, get_policy(policy), spec.gpu_speed, prune=prune)


@pytest.mark.parametrize("policy", ["default", "tiresias"])
@pytest.mark.parametrize("seed", [1, 2])
def test_searches_that_stop_gang_victims_give_the_same_run(
    policy: str, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("corral.sim.victims.FIRST_NODES", (1,))
    monkeypatch.setattr("corral.sim.victims.BETTER_NODES", 2)
    better = victims._with_better_nodes
    kept: list[Plan] = []

    def spy(state: Any, *args: Any) -> Plan | None:
        plan = better(state, *args)
        if plan is not None and any(len(state.running_nodes[p.victim_job_id]) > 1 for p in plan.preemptions):
            kept.append(plan)
        return plan

    monkeypatch.setattr("corral.sim.victims._with_better_nodes", spy)
    jobs = overloaded(seed)
    pruned, full = run(jobs, policy, True), run(jobs, policy, False)
    assert pruned.records == full.records
    assert pruned.preemptions == full.preemptions > 0
    assert kept  # plans that stop a gang, settled with the added nodes, were kept


def judged(k_level_high: bool) -> tuple[bool, list[str] | None]:
    """Whether a one-node 8-GPU job's choice of a gang victim is judged settled, and the nodes it could do
    better on, with nodes g-0000 (the gang's 4 GPUs and job h's 4) and g-0002 (the gang's other 4 GPUs and
    4 free) passed, and g-0001 (job k's 8 GPUs) not: the gang alone makes room only on g-0002."""
    spec = ClusterSpec(node_groups=[NodeGroupSpec(name="g", count=3, gpus_per_node=8, gpu_type="V100")])
    policy = get_policy("default")
    state = ClusterState(build_nodes(spec), policy, prune=True)
    at = EPOCH + timedelta(seconds=100_000)
    demoted, fresh = 50_000.0, 0.0
    views: dict[str, RunningJob] = {}
    running = {
        "gang": ([("g-0000", 4), ("g-0002", 4)], demoted),
        "h": ([("g-0000", 4)], demoted),
        "k": ([("g-0001", 8)], fresh if k_level_high else demoted),
    }
    for seq, (job_id, (shares, attained)) in enumerate(running.items()):
        job = Job(job_id, seq, Request(nodes=len(shares), gpus_per_node=float(shares[0][1])), preemptible=True)
        allocations = tuple(Allocation(node, tuple(range(8 - gpus, 8))) for node, gpus in shares)
        views[job_id] = RunningJob(job_id, EPOCH, preemptible=True, last_checkpoint_at=at, attained_gpu_s=attained)
        state.add(job)
        state.start(job, Placement(job_id, "V100", allocations), views[job_id])
    state.add(Job("j", 9, Request(gpus_per_node=8.0)))
    assert policy.level(state.keys["j"][2]) > max(policy.level(views[k]) for k in ("gang", "h"))
    plan = Plan(preemptions=(Preemption("gang", "j", ""),))
    passed = {"g-0000", "g-0002"}

    def view(ids: Iterable[str]) -> tuple[RunningJob, ...]:
        return tuple(views[i] for i in ids)

    return (
        victims._settled_among(state, view, plan, "j", passed, at),
        victims._better_nodes(state, view, plan, "j", passed, at),
    )


def test_a_choice_of_a_gang_victim_is_judged_on_the_last_node_hosting_it() -> None:
    # The search chose the gang on g-0002, though it also runs on g-0000: k, stopped alone, would have
    # made room on g-0001, named before g-0002, so a search given every victim chooses k there.
    assert judged(k_level_high=False) == (False, ["g-0001"])
    # With k at the job's level, no node not passed could do better.
    assert judged(k_level_high=True) == (True, [])
