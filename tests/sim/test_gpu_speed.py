"""The speed table reaches the scheduler: a job waits for a faster GPU type it prefers, as on the head."""

from __future__ import annotations

import random

import pytest
from click.testing import CliRunner

from corral.cli.main import cli
from corral.sched import get_policy
from corral.sim import SimResult, Trace, TraceJob, build_nodes, prepare, read_trace, simulate
from corral.spec import ClusterSpec, NodeGroupSpec

SPEED = {"H100": 1.0, "A100": 0.5}


def cluster(*groups: tuple[int, int, str]) -> ClusterSpec:
    return ClusterSpec(
        node_groups=[
            NodeGroupSpec(name=t.lower() + ("" if g == 8 else f"-{g}"), count=c, gpus_per_node=g, gpu_type=t)
            for c, g, t in groups
        ],
        gpu_speed=SPEED,
    )


def run(
    jobs: list[TraceJob],
    spec: ClusterSpec,
    policy: str = "fifo",
    *,
    prune: bool = True,
    scheduler_speed: dict[str, float] | None = None,
) -> SimResult:
    nodes = build_nodes(spec)
    workload = prepare(Trace(tuple(sorted(jobs, key=lambda j: j.submit_s))), nodes)
    return simulate(workload, nodes, get_policy(policy), spec.gpu_speed, prune=prune, scheduler_speed=scheduler_speed)


def where(result: SimResult) -> dict[str, tuple[float, float, tuple[str, ...]]]:
    return {r.id: (r.start_s, r.finish_s, r.nodes) for r in result.records}


def h100_busy_until_100(busy_limit: float | None = 100.0) -> list[TraceJob]:
    """An H100 node busy until t=100 (its time limit says so), an A100 node free, and a job
    preferring H100 at t=10 that runs 1,000 s at speed 1.0 (its time limit: 1,200 s)."""
    return [
        TraceJob(id="busy", submit_s=0, duration_s=100, gpus=8, gpu_types=("H100",), time_limit_s=busy_limit),
        TraceJob(id="j", submit_s=10, duration_s=1000, gpus=8, gpu_types=("H100", "A100"), time_limit_s=1200),
    ]


@pytest.mark.parametrize("policy", ["fifo", "priority", "default", "tiresias"])
@pytest.mark.parametrize("prune", [True, False])
def test_a_job_waits_for_the_h100_that_frees_soon_instead_of_the_free_a100(policy: str, prune: bool) -> None:
    # At t=10: 90 s of wait + 1,200 s on H100 < 1,200 / 0.5 = 2,400 s on the A100 now.
    result = run(h100_busy_until_100(), cluster((1, 8, "H100"), (1, 8, "A100")), policy, prune=prune)
    assert where(result) == {"busy": (0, 100, ("h100-0000",)), "j": (100, 1100, ("h100-0000",))}
    assert {r.id: r.gpu_type for r in result.records}["j"] == "H100"


def test_without_the_table_for_the_scheduler_the_job_takes_the_free_a100() -> None:
    result = run(h100_busy_until_100(), cluster((1, 8, "H100"), (1, 8, "A100")), scheduler_speed={})
    assert where(result)["j"] == (10, 2010, ("a100-0000",))  # 1,000 s at speed 0.5


def test_a_running_job_without_a_time_limit_frees_nothing_the_scheduler_knows_of() -> None:
    result = run(h100_busy_until_100(busy_limit=None), cluster((1, 8, "H100"), (1, 8, "A100")))
    assert where(result)["j"] == (10, 2010, ("a100-0000",))


def test_the_job_runs_on_the_slower_type_when_waiting_would_finish_later() -> None:
    # The H100 job's time limit says 5,000 s: 4,990 + 1,200 > 2,400, so the A100 now is sooner.
    jobs = h100_busy_until_100(busy_limit=5000)
    assert where(run(jobs, cluster((1, 8, "H100"), (1, 8, "A100"))))["j"] == (10, 2010, ("a100-0000",))


def test_the_time_limit_column_of_a_trace_is_read(tmp_path) -> None:
    path = tmp_path / "trace.csv"
    path.write_text(
        "job_id,submit_time_s,duration_s,num_gpus,gpu_type,time_limit_s\na,0,10,1,H100|A100,60\nb,0,10,1,,\n"
    )
    assert [j.time_limit_s for j in read_trace(path).jobs] == [60.0, None]
    path.write_text("job_id,submit_time_s,duration_s,num_gpus,time_limit_s\na,0,10,1,0\n")
    with pytest.raises(ValueError, match="line 2: time_limit_s must be above 0"):
        read_trace(path)


def random_jobs(seed: int, count: int) -> list[TraceJob]:
    rng = random.Random(seed)
    types = [(), ("H100",), ("A100",), ("H100", "A100"), ("H100", "A100"), ("A100", "H100")]
    jobs = []
    for i in range(count):
        duration = float(rng.randrange(1, 400))
        limit = rng.choice([None, float(round(duration * rng.uniform(1.0, 3.0)))])
        jobs.append(
            TraceJob(
                id=f"r{i:03d}",
                submit_s=float(rng.randrange(0, 1500)),
                duration_s=duration,
                gpus=rng.choice([1, 1, 2, 4, 8, 16]),
                gpu_types=rng.choice(types),
                user=rng.choice(["", "u1", "u2"]),
                time_limit_s=limit,
            )
        )
    return jobs


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("policy", ["fifo", "priority", "default", "tiresias"])
def test_pruned_and_full_snapshots_give_the_same_run_with_a_speed_table(seed: int, policy: str) -> None:
    spec = cluster((3, 8, "H100"), (4, 8, "A100"), (2, 4, "A100"))
    jobs = random_jobs(seed, 120)
    pruned = run(jobs, spec, policy, prune=True)
    full = run(jobs, spec, policy, prune=False)
    assert pruned.records == full.records
    assert len(pruned.records) == len(jobs)
    # The table changed some decisions, so the comparison covered held-back jobs.
    assert where(run(jobs, spec, policy, scheduler_speed={})) != where(pruned)


def test_corral_sim_config_gives_the_scheduler_the_heads_speed_table(tmp_path) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text(
        "job_id,submit_time_s,duration_s,num_gpus,gpu_type,time_limit_s\n"
        "busy,0,100,8,H100,100\nj,10,1000,8,H100|A100,1200\n"
    )
    spec = tmp_path / "cluster.yaml"
    spec.write_text(
        "node_groups:\n"
        "  - {count: 1, gpus_per_node: 8, gpu_type: H100}\n"
        "  - {count: 1, gpus_per_node: 8, gpu_type: A100}\n"
        "gpu_speed: {H100: 1.0, A100: 0.5}\n"
    )
    config = tmp_path / "corral.yaml"

    def finish_of_j(*extra: str) -> float:
        out = tmp_path / f"out{len(list(tmp_path.iterdir()))}"
        args = ["sim", "--trace", str(trace), "--cluster", str(spec), "--policy", "fifo", "--out", str(out), *extra]
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, result.output
        rows = (out / "jobs-fifo.csv").read_text().splitlines()
        return float(next(r for r in rows if r.startswith("j,")).split(",")[3])

    assert finish_of_j() == 1100  # the cluster file's table: waits for the H100
    config.write_text("gpu_speed: {}\n")
    assert finish_of_j("--config", str(config)) == 2010  # a head with this config never waits
    config.write_text("gpu_speed: {H100: 1.0, A100: 0.96}\n")
    assert finish_of_j("--config", str(config)) == 2010  # 90 + 1,200 > 1,200 / 0.96 = 1,250: the A100 now
    config.write_text("gpu_speed: {H100: 0}\n")
    result = CliRunner().invoke(cli, ["sim", "--trace", str(trace), "--cluster", str(spec), "--config", str(config)])
    assert result.exit_code == 2
    assert "--config" in result.output
