"""Preemption in the simulator: exact timelines for tiresias, srpt-oracle and default, lost work, pruning."""

from __future__ import annotations

import random
from datetime import datetime
from typing import Any
from unittest.mock import patch

import pytest

from corral.sched import Plan, Policy, Snapshot, get_policy, schedule
from corral.sim import SimResult, Trace, TraceJob, build_nodes, prepare, simulate, summarize, victims
from corral.spec import ClusterSpec, NodeGroupSpec


def cluster(count: int = 1, gpus: int = 1) -> ClusterSpec:
    return ClusterSpec(node_groups=[NodeGroupSpec(name="g", count=count, gpus_per_node=gpus, gpu_type="V100")])


def job(
    job_id: str, submit: float, duration: float, gpus: int = 1, team: str = "", checkpoint: float | None = None
) -> TraceJob:
    return TraceJob(id=job_id, submit_s=submit, duration_s=duration, gpus=gpus, vc=team, checkpoint_s=checkpoint)


def run(
    jobs: list[TraceJob], policy: str, spec: ClusterSpec | None = None, checkpoint: float = 0.0, prune: bool = True
) -> SimResult:
    spec = spec or cluster()
    nodes = build_nodes(spec)
    workload = prepare(Trace(tuple(jobs)), nodes)
    return simulate(workload, nodes, get_policy(policy), spec.gpu_speed, checkpoint_s=checkpoint, prune=prune)


def times(result: SimResult) -> dict[str, tuple[float, float]]:
    return {r.id: (r.start_s, r.finish_s) for r in result.records}


def test_tiresias_demotes_a_long_job_and_a_new_one_preempts_it() -> None:
    # At t=5000 the long job has 5000 GPU-seconds, past the first threshold (3,250): queue 1.
    result = run([job("long", 0, 10_000), job("short", 5_000, 100)], "tiresias")
    assert times(result) == {"long": (0, 10_100), "short": (5_000, 5_100)}
    assert result.preemptions == 1
    assert {r.id: r.preemptions for r in result.records} == {"long": 1, "short": 0}
    assert result.lost_gpu_s == 0


def test_tiresias_does_not_preempt_a_job_in_the_same_queue() -> None:
    result = run([job("first", 0, 3_000), job("second", 1_000, 100)], "tiresias")
    assert times(result) == {"first": (0, 3_000), "second": (3_000, 3_100)}
    assert result.preemptions == 0


@pytest.mark.parametrize("policy", ["fifo", "priority"])
def test_non_preemptive_policies_never_preempt(policy: str) -> None:
    result = run([job("long", 0, 10_000), job("short", 5_000, 100)], policy)
    assert times(result) == {"long": (0, 10_000), "short": (10_000, 10_100)}
    assert result.preemptions == 0


def test_a_preempted_job_loses_the_work_since_its_last_checkpoint() -> None:
    # Checkpoints every 600 s: at t=5000 the last one was at 4800, so 200 s are done again.
    result = run([job("long", 0, 10_000), job("short", 5_000, 100)], "tiresias", checkpoint=600)
    assert times(result) == {"long": (0, 10_300), "short": (5_000, 5_100)}
    assert result.lost_gpu_s == 200
    assert summarize(result).gpu_hours_lost == pytest.approx(200 / 3600)
    record = {r.id: r for r in result.records}["long"]
    assert (record.lost_gpu_s, record.busy_gpu_s) == (200, 10_200)


@pytest.mark.parametrize("interval", [5e-324, 1e-310, 1e-300, 1e-9])
def test_checkpoints_too_frequent_to_count_lose_nothing(interval: float) -> None:
    for own in (None, interval):  # the default interval, and a job's own
        jobs = [job("long", 0, 10_000, checkpoint=own), job("short", 5_000, 100)]
        result = run(jobs, "tiresias", checkpoint=interval)
        assert times(result)["long"] == (0, 10_100)
        assert result.lost_gpu_s == 0 and all(r.lost_gpu_s == 0 for r in result.records)


def test_a_jobs_own_checkpoint_interval_overrides_the_default() -> None:
    result = run([job("long", 0, 10_000, checkpoint=1_000), job("short", 5_000, 100)], "tiresias", checkpoint=600)
    assert times(result)["long"] == (0, 10_100)
    assert result.lost_gpu_s == 0


def test_lost_work_counts_every_gpu_of_a_gang() -> None:
    spec = cluster(gpus=2)
    result = run([job("gang", 0, 10_000, gpus=2), job("one", 5_000, 100)], "tiresias", spec, checkpoint=3_000)
    # 5000 s into the run, the checkpoint at 3000 s keeps 3000 s: 2000 s × 2 GPUs are lost.
    assert result.lost_gpu_s == 4_000
    assert times(result) == {"gang": (0, 12_100), "one": (5_000, 5_100)}


def test_srpt_oracle_preempts_for_a_job_with_less_remaining_work() -> None:
    result = run([job("big", 0, 1_000), job("small", 10, 100)], "srpt-oracle")
    assert times(result) == {"big": (0, 1_100), "small": (10, 110)}
    assert result.preemptions == 1


def test_srpt_oracle_keeps_a_job_whose_remaining_work_is_smaller() -> None:
    result = run([job("nearly-done", 0, 1_000), job("bigger", 950, 100)], "srpt-oracle")
    assert times(result) == {"nearly-done": (0, 1_000), "bigger": (1_000, 1_100)}


def test_default_lets_a_team_known_for_short_jobs_go_first_and_preempt() -> None:
    jobs = [
        job("tiny-1", 0, 10, team="tiny"),
        job("long", 20, 5_000, team="big"),
        job("new", 30, 100, team="new"),
        job("tiny-2", 30, 10, team="tiny"),
    ]
    result = run(jobs, "default")
    # tiny-2 is expected to take 10 GPU-seconds (its team's history): it preempts "long"
    # (no history: one GPU-hour assumed). "long" then resumes before "new": same size class, submitted first.
    assert times(result) == {"tiny-1": (0, 10), "long": (20, 5_030), "tiny-2": (30, 40), "new": (5_030, 5_130)}


def test_default_demotes_a_job_past_two_gpu_hours() -> None:
    result = run([job("long", 0, 10_000, team="a"), job("new", 8_000, 100, team="b")], "default")
    assert times(result) == {"long": (0, 10_100), "new": (8_000, 8_100)}


def test_default_learns_only_from_finished_jobs() -> None:
    # "ok" runs long and is still running when "b" arrives: no history yet, so no preemption.
    result = run([job("ok", 0, 5_000, team="a"), job("b", 100, 10, team="a")], "default")
    assert times(result) == {"ok": (0, 5_000), "b": (5_000, 5_010)}


def random_jobs(seed: int, count: int = 60) -> list[TraceJob]:
    rng = random.Random(seed)
    teams = ["a", "b", "c"]
    return [
        job(
            f"j{i:03d}",
            float(rng.randrange(0, 20_000, 50)),
            float(rng.choice([30, 600, 3_000, 9_000, 40_000])),
            gpus=rng.choice([1, 1, 1, 2, 4, 8, 16]),
            team=rng.choice(teams),
        )
        for i in range(count)
    ]


@pytest.mark.parametrize("policy", ["tiresias", "srpt-oracle", "default"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_pruned_snapshots_give_the_same_run_as_full_ones(policy: str, seed: int) -> None:
    jobs, spec = random_jobs(seed), cluster(count=4, gpus=8)
    pruned, full = run(jobs, policy, spec, checkpoint=900), run(jobs, policy, spec, checkpoint=900, prune=False)
    assert times(pruned) == times(full)
    assert (pruned.preemptions, pruned.lost_gpu_s) == (full.preemptions, full.lost_gpu_s)


@pytest.mark.parametrize("policy", ["tiresias", "srpt-oracle", "default", "priority"])
def test_every_job_completes_and_utilization_stays_at_most_one(policy: str) -> None:
    jobs = random_jobs(7)
    result = run(jobs, policy, cluster(count=4, gpus=8), checkpoint=600)
    assert sorted(r.id for r in result.records) == sorted(j.id for j in jobs)
    assert result.unfinished == 0
    assert 0 < summarize(result).utilization <= 1
    duration = {j.id: j.duration_s for j in jobs}
    assert all(r.finish_s - r.start_s >= duration[r.id] for r in result.records)


@pytest.mark.parametrize("policy", ["tiresias", "srpt-oracle", "default"])
def test_the_same_inputs_give_the_same_run(policy: str) -> None:
    jobs = random_jobs(11)
    first, second = run(jobs, policy, cluster(count=4, gpus=8)), run(jobs, policy, cluster(count=4, gpus=8))
    assert first.records == second.records


@pytest.mark.parametrize("first_nodes", [(1,), (3, 9), (16, 128)])
@pytest.mark.parametrize("seed", [1, 2])
def test_cycles_given_the_first_nodes_victims_give_the_same_run(
    first_nodes: tuple[int, ...], seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Overloaded, continuous checkpoints: victims lose nothing, so the search scans nodes by name.
    monkeypatch.setattr("corral.sim.victims.FIRST_NODES", first_nodes)
    jobs, spec = random_jobs(seed, count=160), cluster(count=20, gpus=8)
    passed: list[int] = []

    def spy(snapshot: Snapshot, policy: Policy, at: datetime) -> Plan:
        passed.append(len(snapshot.running))
        return schedule(snapshot, policy, at)

    with patch("corral.sim.victims.schedule", spy):
        pruned = run(jobs, "default", spec)
    full = run(jobs, "default", spec, prune=False)
    assert pruned.records == full.records
    assert pruned.preemptions > 0 and min(passed) <= first_nodes[0] * 8


@pytest.mark.parametrize("policy", ["default", "tiresias"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_cycles_given_the_nodes_where_a_search_could_do_better_give_the_same_run(
    policy: str, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Overloaded, victims lose nothing: a search left unsettled by the first node's victims gets the nodes
    # where it could stop fewer jobs (not the next ones in name order), and its plan must be the full one's.
    monkeypatch.setattr("corral.sim.victims.FIRST_NODES", (1,))
    monkeypatch.setattr("corral.sim.victims.BETTER_NODES", 2)
    rng = random.Random(seed)
    jobs = [
        job(
            f"j{i:03d}",
            float(rng.randrange(0, 20_000, 50)),
            float(rng.choice([30, 600, 3_000, 9_000, 40_000])),
            gpus=rng.choice([1, 1, 1, 2, 4, 8]),
        )
        for i in range(200)
    ]
    spec = cluster(count=16, gpus=8)
    better = victims._with_better_nodes
    outcomes: list[bool] = []

    def spy(*args: Any) -> Plan | None:
        plan = better(*args)
        outcomes.append(plan is not None)
        return plan

    monkeypatch.setattr("corral.sim.victims._with_better_nodes", spy)
    pruned = run(jobs, policy, spec)
    full = run(jobs, policy, spec, prune=False)
    assert pruned.records == full.records
    assert pruned.preemptions == full.preemptions > 0
    assert any(outcomes)  # plans settled with the added nodes were kept


@pytest.mark.parametrize("first_nodes", [(1,), (3, 9)])
@pytest.mark.parametrize("seed", [1, 2])
def test_cycles_given_the_cheapest_nodes_victims_give_the_same_run(
    first_nodes: tuple[int, ...], seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Checkpoints every 900 s: victims lose work, so the search scans nodes by their cheapest victim's cost.
    monkeypatch.setattr("corral.sim.victims.FIRST_NODES", first_nodes)
    jobs, spec = random_jobs(seed, count=160), cluster(count=20, gpus=8)
    cheapest = victims._first_by_cost
    given: list[int] = []

    def spy(*args: Any) -> tuple[list[str], set[str]] | None:
        found = cheapest(*args)
        if found is not None:
            given.append(len(found[1]))
        return found

    monkeypatch.setattr("corral.sim.victims._first_by_cost", spy)
    pruned = run(jobs, "default", spec, checkpoint=900)
    full = run(jobs, "default", spec, checkpoint=900, prune=False)
    assert pruned.records == full.records
    assert (pruned.preemptions, pruned.lost_gpu_s) == (full.preemptions, full.lost_gpu_s) and pruned.lost_gpu_s > 0
    assert given and max(given) <= max(first_nodes)  # cycles were given only the cheapest nodes' victims


@pytest.mark.parametrize("policy", ["tiresias", "srpt-oracle"])
def test_a_job_preempts_on_its_gpu_type_when_the_first_nodes_hold_only_other_types(policy: str) -> None:
    # Eight V100 nodes come first by name, each running a demoted job that loses nothing when stopped;
    # the one A100 node runs another. A short A100 job arriving at t=4000 preempts the A100 job, as
    # a cycle given every running job decides; it does not wait for the A100 job to finish.
    spec = ClusterSpec(
        node_groups=[
            NodeGroupSpec(name="a", count=8, gpus_per_node=1, gpu_type="V100"),
            NodeGroupSpec(name="b", count=1, gpus_per_node=1, gpu_type="A100"),
        ]
    )
    long = [TraceJob(id=f"v{i}", submit_s=0, duration_s=100_000, gpus=1, gpu_types=("V100",)) for i in range(8)]
    long.append(TraceJob(id="a", submit_s=0, duration_s=100_000, gpus=1, gpu_types=("A100",)))
    short = TraceJob(id="new", submit_s=4_000, duration_s=100, gpus=1, gpu_types=("A100",))
    pruned = run([*long, short], policy, spec)
    assert times(pruned)["new"] == (4_000, 4_100)
    assert pruned.records == run([*long, short], policy, spec, prune=False).records


@pytest.mark.parametrize("prune", [True, False])
def test_a_job_the_scheduler_already_sees_past_a_threshold_can_be_preempted(prune: bool) -> None:
    # A 3-GPU job reaches 3,250 GPU-seconds at 3,250 / 3 s, its crossing event. The scheduler counts a threshold
    # as reached a millionth of a GPU-second early, so for a job arriving 0.1 µs before that event it is demoted
    # already, and the new job preempts it on arrival, with pruned snapshots as with full ones.
    jobs = [job("long", 0, 5_000, gpus=3), job("new", 1083.3333332, 100)]
    result = run(jobs, "tiresias", cluster(gpus=3), prune=prune)
    assert times(result)["new"] == (1083.3333332, 1183.3333332)
    assert result.preemptions == 1


def test_a_gang_counts_the_room_a_victim_stopped_for_an_earlier_job_leaves(monkeypatch: pytest.MonkeyPatch) -> None:
    # g-0000 runs v (3 GPUs) and z (1), g-0001 runs w (4); all lose nothing when stopped. At t=100 a (1 GPU)
    # and g (6 GPUs: 2 × 3) arrive; srpt-oracle ranks a above v, v not below g, z and w below g. The full cycle
    # stops v for a, then gives g the 2 GPUs v leaves over, z's and w's. A cycle passed the first node's
    # victims alone (v and z) finds nothing for g: it must not take that as final because only g-0001 could
    # hold a share once every job below g is gone, since v's room counts too.
    monkeypatch.setattr("corral.sim.victims.FIRST_NODES", (1,))
    plans: list[tuple[datetime, set[tuple[str, str]]]] = []
    cycle = victims.plan_cycle

    def spy(state: Any, policy: Policy, views: Any, at: datetime) -> Plan | None:
        plan = cycle(state, policy, views, at)
        if plan is not None and plan.preemptions:
            plans.append((at, {(p.victim_job_id, p.for_job_id) for p in plan.preemptions}))
        return plan

    monkeypatch.setattr("corral.sim.engine.plan_cycle", spy)
    jobs = [
        TraceJob(id="v", submit_s=0, duration_s=1_000, gpus=3),
        TraceJob(id="z", submit_s=0, duration_s=100_000, gpus=1),
        TraceJob(id="w", submit_s=0, duration_s=50_000, gpus=4),
        TraceJob(id="a", submit_s=100, duration_s=10, gpus=1),
        TraceJob(id="g", submit_s=100, duration_s=500, gpus=6),
    ]
    run(jobs, "srpt-oracle", cluster(count=2, gpus=4))
    assert plans[0][1] == {("v", "a"), ("z", "g"), ("w", "g")}


def test_a_cycle_whose_first_nodes_hold_every_possible_victim_is_planned_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # On 8 nodes the first 8 nodes of the victim search's order hold every possible victim: that cycle is the
    # one with all of them, so it is not tried with "the first nodes' victims" before.
    from corral.sim.state import ClusterState

    given: list[tuple[int, int]] = []
    with_victims = ClusterState.with_victims

    def spy(state: ClusterState, chosen: Any, lowest: int, views: Any) -> Snapshot | None:
        given.append((len(chosen), len(state.victims())))
        return with_victims(state, chosen, lowest, views)

    monkeypatch.setattr(ClusterState, "with_victims", spy)
    jobs, spec = random_jobs(5, count=120), cluster(count=8, gpus=4)
    result = run(jobs, "tiresias", spec)
    assert result.preemptions > 0
    assert all(passed < possible for passed, possible in given)
    assert result.records == run(jobs, "tiresias", spec, prune=False).records
