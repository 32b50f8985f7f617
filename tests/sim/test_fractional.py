"""Fractional GPUs in the simulator: fractions share a GPU, exact runs, metrics, and pruning that stays exact."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from corral.cli.main import cli
from corral.model import FULL_GPU, Job, RunningJob
from corral.sched import Placement, Plan, Policy, get_policy, schedule
from corral.sim import (
    SimResult,
    Trace,
    TraceError,
    TraceJob,
    build_nodes,
    engine,
    load_trace,
    prepare,
    simulate,
    summarize,
)
from corral.sim.costs import group_rates
from corral.sim.state import ClusterState
from corral.sim.victims import Views
from corral.spec import ClusterSpec, NodeGroupSpec

POLICIES = ["default", "fifo", "priority", "tiresias", "srpt-oracle"]


def cluster(count: int = 1, gpus: int = 1, **rates: float) -> ClusterSpec:
    group = NodeGroupSpec(name="g", count=count, gpus_per_node=gpus, gpu_type="V100", **rates)
    return ClusterSpec(node_groups=[group])


def job(job_id: str, submit: float, duration: float, gpus: float, checkpoint: float | None = None) -> TraceJob:
    return TraceJob(id=job_id, submit_s=submit, duration_s=duration, gpus=gpus, checkpoint_s=checkpoint)


def run(
    jobs: list[TraceJob],
    spec: ClusterSpec | None = None,
    policy: str = "default",
    prune: bool = True,
    checkpoint: float = 0.0,
) -> SimResult:
    spec = spec or cluster()
    nodes = build_nodes(spec)
    workload = prepare(Trace(tuple(sorted(jobs, key=lambda j: j.submit_s))), nodes)
    return simulate(workload, nodes, get_policy(policy), spec.gpu_speed, prune=prune, checkpoint_s=checkpoint)


def times(result: SimResult) -> dict[str, tuple[float, float]]:
    return {r.id: (r.start_s, r.finish_s) for r in result.records}


# The trace reader.


def rows(*lines: str, header: str = "job_id,submit_time_s,duration_s,num_gpus") -> list[dict[str, str | None]]:
    names = header.split(",")
    return [dict(zip(names, line.split(","), strict=True)) for line in lines]


@pytest.mark.parametrize(("text", "gpus"), [("0.5", 0.5), ("0.25", 0.25), (".5", 0.5), ("0.01", 0.01), ("0.99", 0.99)])
def test_a_fraction_below_one_is_read_as_it_is(text: str, gpus: float) -> None:
    (read,) = load_trace(rows(f"a,0,10,{text}")).jobs
    assert read.gpus == gpus


@pytest.mark.parametrize("text", ["1", "2.0", "8", "16"])
def test_whole_numbers_stay_whole(text: str) -> None:
    (read,) = load_trace(rows(f"a,0,10,{text}")).jobs
    assert type(read.gpus) is int and read.gpus == float(text)


@pytest.mark.parametrize("text", ["1.5", "2.25", "0.005", "0.0001", "-0.5", "-1"])
def test_a_value_neither_whole_nor_a_fraction_below_one_names_the_line_and_what_is_valid(text: str) -> None:
    with pytest.raises(TraceError) as caught:
        load_trace(rows("a,0,10,1", f"b,0,10,{text}"), source="t.csv")
    message = str(caught.value)
    assert message.startswith("t.csv, line 3: num_gpus must be a whole number, 0 or more")
    assert "a fraction of one GPU from 0.01 to below 1" in message and f"got {text!r}" in message


MILLI = "job_id,submit_time_s,duration_s,num_gpus,gpu_milli"


@pytest.mark.parametrize(
    ("num_gpus", "milli", "gpus"),
    [("1", "500", 0.5), ("1", "460", 0.46), ("1", "10", 0.01), ("1", "1000", 1), ("4", "1000", 4), ("2", "", 2)],
)
def test_gpu_milli_below_1000_asks_for_that_share_of_one_gpu(num_gpus: str, milli: str, gpus: float) -> None:
    (read,) = load_trace(rows(f"a,0,10,{num_gpus},{milli}", header=MILLI)).jobs
    assert read.gpus == gpus


def test_a_cpu_only_row_with_gpu_milli_0_is_skipped_as_cpu_only() -> None:
    trace = load_trace(rows("a,0,10,0,0", header=MILLI))
    assert trace.jobs == () and trace.skipped == {"CPU-only (0 GPUs)": 1}


@pytest.mark.parametrize(
    ("num_gpus", "milli", "text"),
    [
        ("2", "500", "gpu_milli 500 (below 1000) shares one GPU, so num_gpus must be 1, got '2'"),
        ("0.5", "500", "gpu_milli 500 (below 1000) shares one GPU, so num_gpus must be 1, got '0.5'"),
        ("1", "5", "gpu_milli must be from 10 to 1000 on a row with GPUs (1000 = whole GPUs; empty = num_gpus"),
        ("1", "0", "gpu_milli must be from 10 to 1000 on a row with GPUs"),
        ("1", "1500", "gpu_milli must be a whole number from 0 to 1000"),
        ("1", "50.5", "gpu_milli must be a whole number from 0 to 1000"),
        ("1", "half", "gpu_milli must be a number, got 'half'"),
    ],
)
def test_a_bad_gpu_milli_names_the_line_and_what_is_valid(num_gpus: str, milli: str, text: str) -> None:
    with pytest.raises(TraceError, match=r"^t\.csv, line 2: ") as caught:
        load_trace(rows(f"a,0,10,{num_gpus},{milli}", header=MILLI), source="t.csv")
    assert text in str(caught.value)


def test_corral_sim_runs_a_trace_with_fractions_and_refuses_one_and_a_half(tmp_path: Path) -> None:
    spec = tmp_path / "one.yaml"
    spec.write_text("node_groups:\n  - {name: g, count: 1, gpus_per_node: 1, gpu_type: V100}\n")
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submit_time_s,duration_s,num_gpus\na,0,100,0.5\nb,0,100,0.5\n")
    result = CliRunner().invoke(cli, ["sim", "--trace", str(trace), "--cluster", str(spec), "-o", "json"])
    assert result.exit_code == 0, result.output
    figures = json.loads(result.stdout)["policies"]["default"]
    assert (figures["makespan_s"], figures["utilization"]) == (100.0, 1.0)
    trace.write_text("job_id,submit_time_s,duration_s,num_gpus\na,0,100,1.5\n")
    result = CliRunner().invoke(cli, ["sim", "--trace", str(trace), "--cluster", str(spec)])
    assert result.exit_code == 2
    assert "line 2: num_gpus must be a whole number" in " ".join(result.output.split())


def test_the_example_trace_with_fractions_runs_on_the_example_cluster() -> None:
    examples = Path(__file__).resolve().parents[2] / "examples"
    result = CliRunner().invoke(
        cli,
        [
            "sim",
            "--trace",
            str(examples / "traces" / "shared_gpus.csv"),
            "--cluster",
            str(examples / "clusters" / "small.yaml"),
            "--policy",
            "default",
            "--policy",
            "fifo",
        ],
    )
    assert result.exit_code == 0, result.output


# Exact runs.


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("prune", [True, False])
def test_two_halves_run_together_on_one_gpu(policy: str, prune: bool) -> None:
    result = run([job("a", 0, 100, 0.5), job("b", 0, 100, 0.5)], policy=policy, prune=prune)
    assert times(result) == {"a": (0, 100), "b": (0, 100)}
    summary = summarize(result)
    assert (summary.makespan_s, summary.utilization) == (100, 1.0)
    assert [r.busy_gpu_s for r in result.records] == [50.0, 50.0]


@pytest.mark.parametrize("policy", POLICIES)
def test_three_halves_on_one_gpu_take_two_durations(policy: str) -> None:
    result = run([job("a", 0, 100, 0.5), job("b", 0, 100, 0.5), job("c", 0, 100, 0.5)], policy=policy)
    assert times(result) == {"a": (0, 100), "b": (0, 100), "c": (100, 200)}
    summary = summarize(result)
    assert (summary.makespan_s, summary.utilization) == (200, 0.75)


@pytest.mark.parametrize("prune", [True, False])
def test_a_half_and_a_whole_gpu_job_take_turns_on_one_gpu(prune: bool) -> None:
    # A GPU holding a fraction is not free for a whole-GPU job, whichever comes first.
    first = run([job("half", 0, 100, 0.5), job("whole", 0, 100, 1)], policy="fifo", prune=prune)
    assert times(first) == {"half": (0, 100), "whole": (100, 200)}
    second = run([job("whole", 0, 100, 1), job("half", 1, 100, 0.5)], policy="fifo", prune=prune)
    assert times(second) == {"whole": (0, 100), "half": (100, 200)}


@pytest.mark.parametrize("prune", [True, False])
def test_a_later_half_shares_the_gpu_while_the_whole_gpu_job_waits_unless_the_order_is_strict(prune: bool) -> None:
    jobs = [job("a", 0, 100, 0.5), job("whole", 0, 100, 1), job("c", 0, 100, 0.5)]
    assert times(run(jobs, policy="priority", prune=prune)) == {"a": (0, 100), "c": (0, 100), "whole": (100, 200)}
    assert times(run(jobs, policy="fifo", prune=prune)) == {"a": (0, 100), "whole": (100, 200), "c": (200, 300)}


def test_fractions_fill_a_gpu_up_to_exactly_one() -> None:
    quarters = [job(f"q{i}", 0, 100, 0.25) for i in range(5)]
    assert times(run(quarters))["q4"] == (100, 200)  # four quarters fill the GPU
    thirds = [job(f"t{i}", 0, 100, 0.3) for i in range(4)]
    assert [times(run(thirds))[f"t{i}"][0] for i in range(4)] == [0, 0, 0, 100]  # 0.9 held; 0.3 more does not fit
    unequal = [job("big", 0, 100, 0.6), job("small", 0, 100, 0.5)]
    assert times(run(unequal)) == {"big": (0, 100), "small": (100, 200)}


def test_fractions_pack_onto_the_shared_gpu_and_leave_the_others_whole() -> None:
    # Two halves share GPU 0 of a 2-GPU node, so the whole-GPU job starts on GPU 1 at once.
    jobs = [job("a", 0, 100, 0.5), job("b", 0, 100, 0.5), job("whole", 0, 100, 1)]
    assert times(run(jobs, cluster(gpus=2))) == {"a": (0, 100), "b": (0, 100), "whole": (0, 100)}
    # Two whole-GPU jobs after one half: one waits for the half to end.
    jobs = [job("a", 0, 50, 0.5), job("w1", 0, 100, 1), job("w2", 0, 100, 1)]
    assert times(run(jobs, cluster(gpus=2), policy="fifo")) == {"a": (0, 50), "w1": (0, 100), "w2": (50, 150)}


def test_a_half_gpu_counts_half_in_busy_gpu_hours_cost_and_energy() -> None:
    spec = cluster(price_per_gpu_hour=2.0, watts_busy=300.0, watts_idle=100.0)
    result = run([job("a", 0, 3600, 0.5)], spec)
    assert result.busy_gpu_s_by_group == {"g": 1800.0}
    summary = summarize(result, group_rates(spec))
    assert (summary.utilization, summary.cost, summary.busy_cost) == (0.5, 2.0, 1.0)
    assert summary.energy_kwh == pytest.approx((1800 * 300 + 1800 * 100) / 3_600_000)
    assert result.records[0].gpus == 0.5


@pytest.mark.parametrize("prune", [True, False])
def test_a_preempted_half_loses_half_a_gpu_of_work_since_its_checkpoint(prune: bool) -> None:
    # Under tiresias a 0.5-GPU job passes 3,250 GPU-seconds at t = 6,500 and drops a queue; the whole-GPU job
    # arriving at 7,000 preempts it. Checkpoints every 900 s keep 6,300 s: 700 s × 0.5 GPU = 350 GPU-s lost.
    jobs = [job("long", 0, 10_000, 0.5), job("new", 7_000, 100, 1)]
    result = run(jobs, policy="tiresias", prune=prune, checkpoint=900)
    assert times(result) == {"new": (7_000, 7_100), "long": (0, 10_800)}
    assert (result.preemptions, result.lost_gpu_s) == (1, 350.0)
    long = next(r for r in result.records if r.id == "long")
    assert long.busy_gpu_s == (7_000 + 3_700) * 0.5


@pytest.mark.parametrize("prune", [True, False])
def test_a_fraction_past_a_threshold_by_the_scheduler_s_count_can_be_preempted(prune: bool) -> None:
    # A 0.3-GPU job reaches 3,250 GPU-seconds at 3,250 / 0.3 s; the scheduler counts it there a millionth of a
    # GPU-second early, so a whole-GPU job arriving 2 µs before preempts it on arrival, pruned or not.
    result = run([job("long", 0, 50_000, 0.3), job("new", 10_833.333331, 100, 1)], policy="tiresias", prune=prune)
    assert times(result)["new"] == (10_833.333331, 10_933.333331)
    assert result.preemptions == 1


# Properties over random traces with fractions.


@contextmanager
def watched() -> Iterator[list[str]]:
    """While in it, every start is checked (no GPU holds more than one GPU's worth of fractions, and the free
    GPUs the simulator counts are those holding nothing) and so is every cycle's plan (the same as on the full
    snapshot); yields the ids of the jobs started."""
    started: list[str] = []
    start, cycle = ClusterState.start, engine.plan_cycle

    def checked_start(state: ClusterState, job: Job, placement: Placement, running: RunningJob) -> None:
        start(state, job, placement, running)
        for alloc in placement.allocations:
            held: dict[int, float] = {}
            for live in state.live[alloc.node].values():
                for index in live.allocation.gpus:
                    held[index] = held.get(index, 0.0) + live.allocation.gpu_fraction
            assert all(total <= FULL_GPU + 1e-9 for total in held.values()), (alloc.node, held)
            empty = [i for i in range(len(state.nodes[alloc.node].gpus)) if held.get(i, 0.0) <= 1e-9]
            assert state.free[alloc.node] == len(empty)
        started.append(job.id)

    def checked_cycle(state: ClusterState, policy: Policy, views: Views, at: datetime) -> Plan | None:
        plan = cycle(state, policy, views, at)
        state.prune, prune = False, state.prune
        try:
            snapshot = state.snapshot(views)
        finally:
            state.prune = prune
        full = None if snapshot is None else schedule(snapshot, policy, at)
        assert _decisions(plan) == _decisions(full), at
        return plan

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ClusterState, "start", checked_start)
        patch.setattr(engine, "plan_cycle", checked_cycle)
        yield started


def _decisions(plan: Plan | None) -> object:
    if plan is None or not (plan.placements or plan.preemptions):
        return None
    return plan.placements, [(p.victim_job_id, p.for_job_id) for p in plan.preemptions]


def random_jobs(rng: random.Random, count: int, sizes: list[float]) -> list[TraceJob]:
    return [
        job(
            f"j{i:03d}",
            float(rng.randrange(0, 4_000, 25)),
            float(rng.choice([30, 400, 1_500, 5_000, 12_000])),
            rng.choice(sizes),
            checkpoint=rng.choice([None, 300.0]),
        )
        for i in range(count)
    ]


SIZES = [0.25, 0.5, 0.5, 0.3, 0.75, 1, 1, 2, 4]


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    count=st.integers(1, 24),
    nodes=st.integers(1, 3),
    gpus=st.sampled_from([1, 2, 4]),
    policy=st.sampled_from(POLICIES),
    first_nodes=st.sampled_from([(8,), (1,), (2, 5)]),
)
def test_random_traces_with_fractions_pruned_equal_full_and_never_overfill_a_gpu(
    seed: int, count: int, nodes: int, gpus: int, policy: str, first_nodes: tuple[int, ...]
) -> None:
    jobs = random_jobs(random.Random(seed), count, SIZES)
    spec = cluster(count=nodes, gpus=gpus)
    with watched() as started, pytest.MonkeyPatch.context() as patch:
        patch.setattr("corral.sim.victims.FIRST_NODES", first_nodes)
        pruned = run(jobs, spec, policy, checkpoint=600)
    full = run(jobs, spec, policy, prune=False, checkpoint=600)
    assert pruned.records == full.records
    assert (pruned.preemptions, pruned.lost_gpu_s) == (full.preemptions, full.lost_gpu_s)
    fits = [j for j in jobs if j.gpus <= nodes * gpus]
    assert sorted(r.id for r in pruned.records) == sorted(j.id for j in fits)
    assert len(started) == len(fits) + pruned.preemptions
    if pruned.records:
        makespan = summarize(pruned).makespan_s
        busy = sum(r.busy_gpu_s for r in pruned.records)
        assert busy <= nodes * gpus * makespan + 1e-6  # utilization at most 1 before any rounding


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_small_snapshots_give_the_same_run_as_full_ones_with_fractions(policy: str, seed: int) -> None:
    rng = random.Random(seed)
    jobs = random_jobs(rng, 150, [*SIZES, 8, 16])
    spec = ClusterSpec(
        node_groups=[
            NodeGroupSpec(name="v", count=5, gpus_per_node=8, gpu_type="V100"),
            NodeGroupSpec(name="t", count=4, gpus_per_node=4, gpu_type="T4"),
        ]
    )
    with watched():
        pruned = run(jobs, spec, policy, checkpoint=600)
    full = run(jobs, spec, policy, prune=False, checkpoint=600)
    assert pruned.records == full.records
    assert (pruned.preemptions, pruned.lost_gpu_s) == (full.preemptions, full.lost_gpu_s)
    assert pruned.cycles <= full.cycles


@pytest.mark.parametrize("first_nodes", [(1,), (3, 9)])
@pytest.mark.parametrize("seed", [1, 2])
def test_cycles_given_the_first_nodes_victims_give_the_same_run_with_fractions(
    first_nodes: tuple[int, ...], seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("corral.sim.victims.FIRST_NODES", first_nodes)
    rng = random.Random(seed)
    jobs = random_jobs(rng, 160, SIZES)
    spec = cluster(count=12, gpus=4)
    for checkpoint in (0.0, 900.0):
        with watched():
            pruned = run(jobs, spec, "default", checkpoint=checkpoint)
        full = run(jobs, spec, "default", prune=False, checkpoint=checkpoint)
        assert pruned.records == full.records
        assert (pruned.preemptions, pruned.lost_gpu_s) == (full.preemptions, full.lost_gpu_s)
        assert pruned.preemptions > 0
