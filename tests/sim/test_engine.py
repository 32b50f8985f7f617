"""The engine: exact JCTs on tiny traces, the scheduler's own placements, determinism."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from corral.model import Node
from corral.sched import Snapshot, get_policy, schedule
from corral.sim import (
    EPOCH,
    NEVER_FITS,
    SimResult,
    Trace,
    TraceJob,
    build_nodes,
    gang_request,
    percentile,
    prepare,
    read_trace,
    simulate,
    summarize,
)
from corral.spec import ClusterSpec, NodeGroupSpec

TRACES = Path(__file__).resolve().parents[3] / "shared" / "traces"


def cluster(*groups: tuple[int, int, str], speed: dict[str, float] | None = None) -> ClusterSpec:
    return ClusterSpec(
        node_groups=[
            NodeGroupSpec(name=f"{t.lower()}-{g}", count=c, gpus_per_node=g, gpu_type=t) for c, g, t in groups
        ],
        gpu_speed=speed or {},
    )


def job(job_id: str, submit: float, duration: float, gpus: int = 1, types: tuple[str, ...] = ()) -> TraceJob:
    return TraceJob(id=job_id, submit_s=submit, duration_s=duration, gpus=gpus, gpu_types=types)


def run(jobs: list[TraceJob], spec: ClusterSpec, policy: str = "default", prune: bool = True) -> SimResult:
    nodes = build_nodes(spec)
    return simulate(prepare(Trace(tuple(jobs)), nodes), nodes, get_policy(policy), spec.gpu_speed, prune=prune)


def times(result: SimResult) -> dict[str, tuple[float, float]]:
    return {r.id: (r.start_s, r.finish_s) for r in result.records}


def test_two_jobs_on_one_gpu_run_in_submit_order() -> None:
    result = run([job("a", 0, 10), job("b", 0, 5)], cluster((1, 1, "V100")))
    assert times(result) == {"a": (0, 10), "b": (10, 15)}
    assert {r.id: r.jct_s for r in result.records} == {"a": 10, "b": 15}
    assert {r.id: r.wait_s for r in result.records} == {"a": 0, "b": 10}


def test_a_finish_and_an_arrival_at_the_same_time_share_one_cycle() -> None:
    result = run([job("a", 0, 10), job("b", 10, 5), job("c", 10, 5)], cluster((1, 1, "V100")))
    assert times(result) == {"a": (0, 10), "b": (10, 15), "c": (15, 20)}
    assert result.cycles == 3


def test_a_small_job_goes_ahead_of_a_large_one_that_does_not_fit() -> None:
    jobs = [job("big", 0, 100, gpus=2), job("wide", 1, 50, gpus=2), job("small", 2, 10)]
    assert times(run(jobs, cluster((1, 3, "V100")))) == {"big": (0, 100), "small": (2, 12), "wide": (100, 150)}


def test_metrics_of_a_tiny_run() -> None:
    summary = summarize(run([job("a", 0, 10), job("b", 0, 5)], cluster((1, 2, "V100"))))
    assert summary.jobs == 2
    assert summary.avg_jct_s == 7.5
    assert summary.makespan_s == 10
    assert summary.utilization == pytest.approx(15 / 20)
    assert summary.avg_wait_s == 0
    assert summary.preemptions == 0


def test_percentile_interpolates() -> None:
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile([5.0], 99) == 5.0
    assert percentile([], 50) == 0.0


def test_a_gang_too_wide_for_the_largest_nodes_spreads_over_more_smaller_ones() -> None:
    # 12 GPUs on one 8-GPU and two 4-GPU nodes: 2 x 6 never fits, 3 x 4 does.
    spec = cluster((1, 8, "V100"), (2, 4, "V100"))
    workload = prepare(Trace((job("g", 0, 10, gpus=12),)), build_nodes(spec))
    assert workload.skipped == {}
    request = workload.jobs[0].job.request
    assert (request.nodes, request.gpus_per_node) == (3, 4)
    result = run([job("g", 0, 10, gpus=12)], spec)
    assert len(result.records[0].nodes) == 3 and result.records[0].gpus == 12
    # 12 GPUs on one 8-GPU and one 4-GPU node: no even split fits two nodes; it is skipped.
    workload = prepare(Trace((job("g", 0, 10, gpus=12),)), build_nodes(cluster((1, 8, "V100"), (1, 4, "V100"))))
    assert workload.jobs == () and workload.skipped == {NEVER_FITS: 1}


def test_gpu_speed_divides_the_run_time() -> None:
    result = run([job("a", 0, 100, types=("A100",))], cluster((1, 1, "A100"), speed={"A100": 2.0}))
    assert times(result) == {"a": (0, 50)}


def test_jobs_wider_than_a_node_become_gangs() -> None:
    assert gang_request(job("x", 0, 1, gpus=16), 8).nodes == 2
    assert gang_request(job("x", 0, 1, gpus=12), 8).gpus_per_node == 6
    assert gang_request(job("x", 0, 1, gpus=4), 8).nodes == 1
    result = run([job("g", 0, 10, gpus=16)], cluster((2, 8, "V100")))
    assert result.records[0].nodes == ("v100-8-0000", "v100-8-0001")
    assert result.records[0].gpus == 16


def test_jobs_that_can_never_fit_are_skipped_and_counted() -> None:
    nodes = build_nodes(cluster((2, 8, "V100")))
    trace = Trace((job("ok", 0, 1), job("huge", 0, 1, gpus=32), job("t4", 0, 1, types=("T4",))), skipped={"x": 1})
    workload = prepare(trace, nodes)
    assert [j.job.id for j in workload.jobs] == ["ok"]
    assert workload.skipped == {NEVER_FITS: 2, "x": 1}
    assert workload.skipped_total == 3


def test_a_traced_gpu_type_matches_the_cluster_file_whatever_its_case() -> None:
    spec = cluster((1, 8, "V100"), (1, 4, "T4"))
    jobs = [
        job("lower", 0, 10, types=("v100",)),
        job("either", 0, 10, types=("t4", "K80")),
        job("k80", 0, 1, types=("k80",)),
    ]
    nodes = build_nodes(spec)
    workload = prepare(Trace(tuple(jobs)), nodes)
    assert {j.job.id: j.job.request.gpu_types for j in workload.jobs} == {"lower": ("V100",), "either": ("T4", "K80")}
    assert workload.skipped == {NEVER_FITS: 1}  # the cluster has no K80, in any case
    result = simulate(workload, nodes, get_policy("default"))
    assert {r.id: r.gpu_type for r in result.records} == {"lower": "V100", "either": "T4"}


def test_groups_whose_types_differ_in_case_are_one_type_spelled_as_the_first() -> None:
    nodes = build_nodes(cluster((1, 8, "V100"), (1, 4, "v100")))
    workload = prepare(Trace((job("a", 0, 1, types=("v100",)), job("b", 0, 1, types=("V100",)))), nodes)
    assert [j.job.request.gpu_types for j in workload.jobs] == [("V100",), ("V100",)]


def test_first_cycle_places_what_schedule_places_on_the_full_snapshot() -> None:
    spec = cluster((3, 8, "V100"), (2, 4, "T4"))
    jobs = [job(f"j{i}", 0, 100 + i, gpus=g) for i, g in enumerate([1, 8, 4, 2, 1, 8, 4, 16, 1, 2, 4])]
    nodes = build_nodes(spec)
    workload = prepare(Trace(tuple(jobs)), nodes)
    for name in ("default", "fifo"):
        policy = get_policy(name)
        plan = schedule(Snapshot(nodes=nodes, pending=tuple(j.job for j in workload.jobs)), policy, EPOCH)
        started = {r.id: r.nodes for r in simulate(workload, nodes, policy).records if r.start_s == 0}
        assert started == {p.job_id: tuple(a.node for a in p.allocations) for p in plan.placements}


def random_jobs(seed: int, count: int) -> list[TraceJob]:
    rng = random.Random(seed)
    types = [(), (), ("V100",), ("T4",), ("T4", "V100")]
    return [
        job(
            f"r{i:03d}",
            float(rng.randrange(0, 2000)),
            float(rng.randrange(1, 500)),
            gpus=rng.choice([1, 1, 1, 2, 3, 4, 8, 16]),
            types=rng.choice(types),
        )
        for i in range(count)
    ]


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("policy", ["default", "fifo"])
def test_small_snapshots_give_the_same_run_as_full_ones(seed: int, policy: str) -> None:
    spec = cluster((5, 8, "V100"), (6, 4, "T4"), (3, 2, "T4"))
    jobs = sorted(random_jobs(seed, 150), key=lambda j: j.submit_s)
    pruned = run(jobs, spec, policy, prune=True)
    full = run(jobs, spec, policy, prune=False)
    assert pruned.records == full.records
    assert pruned.cycles <= full.cycles


@pytest.mark.skipif(not TRACES.is_dir(), reason=f"trace directory {TRACES} is not present")
@pytest.mark.parametrize("policy", ["default", "fifo"])
def test_philly_sample_same_with_small_and_full_snapshots(policy: str) -> None:
    nodes = build_nodes(cluster((4, 8, "V100")))
    workload = prepare(read_trace(TRACES / "philly_pollux_2017-10-02_7d.csv", limit=300), nodes)
    pruned = simulate(workload, nodes, get_policy(policy))
    assert pruned.records == simulate(workload, nodes, get_policy(policy), prune=False).records
    assert len(pruned.records) == len(workload.jobs)


def test_same_input_same_output() -> None:
    spec = cluster((4, 8, "V100"), (4, 4, "T4"))
    jobs = sorted(random_jobs(9, 200), key=lambda j: j.submit_s)
    first, second = run(jobs, spec), run(jobs, spec)
    assert first == second
    assert summarize(first) == summarize(second)


def test_nodes_with_two_gpu_types_are_refused() -> None:
    nodes = build_nodes(cluster((1, 2, "V100")))
    mixed = Node(name="mixed", state=nodes[0].state, gpus=(nodes[0].gpus[0], type(nodes[0].gpus[0])(1, "T4", 0)))
    with pytest.raises(ValueError, match="one GPU type per node"):
        simulate(prepare(Trace(()), [mixed]), [mixed], get_policy("default"))


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
@pytest.mark.parametrize("policy", ["default", "fifo"])
def test_small_snapshots_give_the_same_run_as_full_ones_with_racks(seed: int, policy: str) -> None:
    # A gang goes to the rack that holds it whole: which one depends on every node with room, not
    # only on the first ones of each kind.
    spec = ClusterSpec(
        node_groups=[NodeGroupSpec(name="v100", count=10, gpus_per_node=8, gpu_type="V100", nodes_per_rack=3)]
    )
    rng = random.Random(seed)
    jobs = sorted(
        (
            job(
                f"g{i:03d}",
                float(rng.randrange(0, 3000)),
                float(rng.randrange(50, 900)),
                rng.choice([1, 2, 8, 16, 24, 32]),
            )
            for i in range(120)
        ),
        key=lambda j: j.submit_s,
    )
    pruned = run(jobs, spec, policy, prune=True)
    full = run(jobs, spec, policy, prune=False)
    assert pruned.records == full.records


def test_a_gpu_speed_key_matches_the_groups_type_whatever_its_case():
    from corral.spec.cluster import parse_cluster_spec

    spec = parse_cluster_spec(
        {"node_groups": [{"count": 1, "gpus_per_node": 8, "gpu_type": "V100"}], "gpu_speed": {"v100": 2}}
    )
    assert spec.gpu_speed == {"V100": 2.0}
    assert spec.speed("V100") == 2.0


def test_a_reservation_goes_to_the_first_job_blocked_behind_a_time_limited_job_placed_in_the_cycle() -> None:
    # One 12-GPU node. a (8 GPUs, limit 100 s) starts at once; b (8 GPUs) is then the first blocked job
    # and gets the reservation at t = 100 on 8 GPUs; c (12 GPUs) waits behind it; d (3 GPUs, no limit)
    # fits beside b's reservation, so it starts at once, as on the head. Reserving for c instead (all
    # 12 GPUs) would hold d back until t = 300.
    jobs = [
        TraceJob(id="a", submit_s=0, duration_s=100, gpus=8, time_limit_s=100),
        TraceJob(id="b", submit_s=0, duration_s=100, gpus=8),
        TraceJob(id="c", submit_s=0, duration_s=100, gpus=12),
        TraceJob(id="d", submit_s=0, duration_s=50, gpus=3),
    ]
    spec = cluster((1, 12, "V100"))
    pruned, full = run(jobs, spec, prune=True), run(jobs, spec, prune=False)
    assert times(full) == {"a": (0, 100), "d": (0, 50), "b": (100, 200), "c": (200, 300)}
    assert pruned.records == full.records


@pytest.mark.parametrize("prune", [True, False])
def test_fifo_starts_jobs_in_submit_order_even_when_a_later_one_fits_first(prune: bool) -> None:
    spec = cluster((1, 4, "V100"))
    jobs = [job("a", 0, 100, gpus=2), job("b", 1, 100, gpus=4), job("c", 2, 100, gpus=1)]
    assert times(run(jobs, spec, "fifo", prune=prune)) == {"a": (0, 100), "b": (100, 200), "c": (200, 300)}
    # Without the strict order, c goes past b, which waits for every GPU of the node.
    assert times(run(jobs, spec, "priority", prune=prune)) == {"a": (0, 100), "b": (102, 202), "c": (2, 102)}


@pytest.mark.parametrize("seed", [4, 5, 6])
def test_fifo_start_order_is_submit_order(seed: int) -> None:
    spec = cluster((3, 8, "V100"), (2, 4, "T4"))
    jobs = sorted(random_jobs(seed, 120), key=lambda j: j.submit_s)
    result = run(jobs, spec, "fifo")
    submitted = {j.id: (j.submit_s, j.id) for j in jobs}
    order = sorted(result.records, key=lambda r: submitted[r.id])
    assert [r.start_s for r in order] == sorted(r.start_s for r in order)
    assert result.records == run(jobs, spec, "fifo", prune=False).records


def test_a_gang_across_racks_runs_slower_by_the_cluster_files_factor(tmp_path: Path) -> None:
    # Two racks of one 4-GPU node: an 8-GPU gang spans both and takes 1.5 × 100 s; within one rack it
    # would not be slowed (a 4-GPU job on one node).
    spec = ClusterSpec(
        node_groups=[NodeGroupSpec(name="v", count=2, gpus_per_node=4, gpu_type="V100", nodes_per_rack=1)],
        cross_rack_slowdown=1.5,
    )
    nodes = build_nodes(spec)
    workload = prepare(Trace((job("gang", 0, 100, gpus=8), job("single", 200, 100, gpus=4))), nodes)
    result = simulate(workload, nodes, get_policy("fifo"), cross_rack_slowdown=spec.cross_rack_slowdown)
    assert times(result) == {"gang": (0, 150), "single": (200, 300)}
    same_rack = ClusterSpec(
        node_groups=[NodeGroupSpec(name="v", count=2, gpus_per_node=4, gpu_type="V100", nodes_per_rack=2)],
        cross_rack_slowdown=1.5,
    )
    nodes = build_nodes(same_rack)
    workload = prepare(Trace((job("gang", 0, 100, gpus=8),)), nodes)
    assert times(simulate(workload, nodes, get_policy("fifo"), cross_rack_slowdown=1.5)) == {"gang": (0, 100)}


def test_the_cross_rack_slowdown_reaches_corral_sim_from_the_cluster_file(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from corral.cli.main import cli

    cluster_file = tmp_path / "cluster.yaml"
    cluster_file.write_text(
        "node_groups:\n  - {name: v, count: 2, gpus_per_node: 4, gpu_type: V100, nodes_per_rack: 1}\n"
        "cross_rack_slowdown: 2\n"
    )
    trace = tmp_path / "trace.csv"
    trace.write_text("job_id,submit_time_s,duration_s,num_gpus\ngang,0,100,8\n")
    result = CliRunner().invoke(cli, ["sim", "--trace", str(trace), "--cluster", str(cluster_file), "-o", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["policies"]["default"]["avg_jct_s"] == 200
    cluster_file.write_text(
        "node_groups:\n  - {name: v, count: 2, gpus_per_node: 4, gpu_type: V100, nodes_per_rack: 1}\n"
        "cross_rack_slowdown: 0.5\n"
    )
    refused = CliRunner().invoke(cli, ["sim", "--trace", str(trace), "--cluster", str(cluster_file)])
    assert refused.exit_code == 2
    assert "cross_rack_slowdown" in refused.output
