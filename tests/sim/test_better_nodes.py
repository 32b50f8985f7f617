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
    # Gangs of two and four nodes start first and run long enough to be demoted, then other jobs (some of
    # them gangs) keep the cluster overloaded and stop them; no job loses work when stopped, so the search
    # scans nodes by name.
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
            gpus=rng.choice([1, 1, 1, 2, 4, 8, 16]),
        )
        for i in range(count)
    ]


def run(jobs: list[TraceJob], policy: str, prune: bool) -> SimResult:
    spec = ClusterSpec(node_groups=[NodeGroupSpec(name="g", count=16, gpus_per_node=8, gpu_type="V100")])
    nodes = build_nodes(spec)
    return simulate(prepare(Trace(tuple(jobs)), nodes), nodes, get_policy(policy), spec.gpu_speed, prune=prune)


@pytest.mark.parametrize("policy", ["default", "tiresias"])
@pytest.mark.parametrize("seed", [1, 2])
def test_cycles_with_gangs_given_the_nodes_where_a_search_could_do_better_give_the_same_run(
    policy: str, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("corral.sim.victims.FIRST_NODES", (1,))
    monkeypatch.setattr("corral.sim.victims.BETTER_NODES", 2)
    better = victims._with_better_nodes
    kept: list[str] = []

    def spy(state: Any, *args: Any) -> Plan | None:
        plan = better(state, *args)
        if plan is not None:
            stops = plan.preemptions
            if any(len(state.running_nodes[p.victim_job_id]) > 1 for p in stops):
                kept.append("stops a gang")
            if any(state.keys[p.for_job_id][2].request.nodes > 1 for p in stops):
                kept.append("a gang stops")
        return plan

    monkeypatch.setattr("corral.sim.victims._with_better_nodes", spy)
    jobs = overloaded(seed)
    pruned, full = run(jobs, policy, True), run(jobs, policy, False)
    assert pruned.records == full.records
    assert pruned.preemptions == full.preemptions > 0
    assert set(kept) == {"stops a gang", "a gang stops"}  # such plans, settled with the added nodes, were kept


AT = EPOCH + timedelta(seconds=100_000)


def judged(
    running: dict[str, list[tuple[str, int]]], demoted: set[str], pending: Request, chosen: list[str], passed: set[str]
) -> tuple[bool, list[str] | None]:
    """Whether the pending job's choice of ``chosen`` is judged settled with the victims on ``passed`` given,
    and the nodes it could do better on; jobs in ``demoted`` are below its level, the others at it."""
    spec = ClusterSpec(node_groups=[NodeGroupSpec(name="g", count=4, gpus_per_node=8, gpu_type="V100")])
    policy = get_policy("default")
    state = ClusterState(build_nodes(spec), policy, prune=True)
    views: dict[str, RunningJob] = {}
    for seq, (job_id, shares) in enumerate(running.items()):
        job = Job(job_id, seq, Request(nodes=len(shares), gpus_per_node=float(shares[0][1])), preemptible=True)
        allocations = tuple(Allocation(node, tuple(range(8 - gpus, 8))) for node, gpus in shares)
        attained = 50_000.0 if job_id in demoted else 0.0
        views[job_id] = RunningJob(job_id, EPOCH, preemptible=True, last_checkpoint_at=AT, attained_gpu_s=attained)
        state.add(job)
        state.start(job, Placement(job_id, "V100", allocations), views[job_id])
    state.add(Job("j", 99, pending))
    job_level = policy.level(state.keys["j"][2])
    assert all((policy.level(views[v]) < job_level) == (v in demoted) for v in running)
    plan = Plan(preemptions=tuple(Preemption(v, "j", "") for v in chosen))

    def view(ids: Iterable[str]) -> tuple[RunningJob, ...]:
        return tuple(views[i] for i in ids)

    return (
        victims._settled_among(state, view, plan, "j", passed, AT),
        victims._better_nodes(state, view, plan, "j", passed, AT),
    )


def test_a_choice_of_a_gang_victim_is_judged_on_the_last_node_hosting_it() -> None:
    # The gang runs on g-0000 (beside h) and g-0002 (beside 4 free GPUs): stopping it alone makes room on
    # g-0002 only, so the search chose it there. k, stopped alone, would make room on g-0001, named before
    # g-0002, so a search given every victim chooses k there.
    running = {"gang": [("g-0000", 4), ("g-0002", 4)], "h": [("g-0000", 4)], "k": [("g-0001", 8)], "x": [("g-0003", 8)]}
    one_node = Request(gpus_per_node=8.0)
    passed = {"g-0000", "g-0002"}
    assert judged(running, {"gang", "h", "k"}, one_node, ["gang"], passed) == (False, ["g-0001"])
    # With k at the job's level, no node not passed could do better.
    assert judged(running, {"gang", "h"}, one_node, ["gang"], passed) == (True, [])


def test_a_gangs_choice_is_judged_on_its_worst_node() -> None:
    # A two-node gang stopped a on g-0000 and b and c on g-0001: its worst option is 2 victims on g-0001.
    # d alone would make room on g-0002, so a search given every victim takes g-0000 and g-0002; e and f on
    # g-0003 only tie on count, after g-0001 by name.
    running = {"a": [("g-0000", 8)], "b": [("g-0001", 4)], "c": [("g-0001", 4)], "d": [("g-0002", 8)]}
    running |= {"e": [("g-0003", 4)], "f": [("g-0003", 4)]}
    gang = Request(nodes=2, gpus_per_node=8.0)
    passed = {"g-0000", "g-0001"}
    assert judged(running, set(running), gang, ["a", "b", "c"], passed) == (False, ["g-0002"])
    assert judged(running, set(running) - {"d"}, gang, ["a", "b", "c"], passed) == (True, [])
