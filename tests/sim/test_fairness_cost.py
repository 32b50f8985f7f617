"""Fairness between teams, cost and energy: exact figures on tiny hand-computed runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from corral.cli.main import cli
from corral.sched import get_policy
from corral.sim import SimResult, Trace, TraceJob, build_nodes, prepare, simulate, summarize
from corral.sim.costs import group_rates, spend, unrated
from corral.sim.fairness import bounded_slowdown, jain, team_fairness, team_figures
from corral.sim.result import JobRecord
from corral.spec import ClusterSpec, NodeGroupSpec


def run(jobs: list[TraceJob], spec: ClusterSpec, policy: str = "fifo") -> SimResult:
    nodes = build_nodes(spec)
    return simulate(prepare(Trace(tuple(jobs)), nodes), nodes, get_policy(policy), spec.gpu_speed)


def group(name: str, count: int, gpus: int, gpu_type: str, **extra: float) -> NodeGroupSpec:
    return NodeGroupSpec.model_validate(
        {"name": name, "count": count, "gpus_per_node": gpus, "gpu_type": gpu_type, **extra}
    )


def record(jct: float, run_s: float, team: str = "", gpu_s: float = 0.0) -> JobRecord:
    return JobRecord(
        id="j",
        submit_s=0,
        start_s=jct - run_s,
        finish_s=jct,
        gpus=1,
        gpu_type="",
        nodes=(),
        busy_gpu_s=gpu_s,
        team=team,
        run_s=run_s,
    )


@pytest.mark.parametrize(
    ("values", "index"), [([1.0, 1.0, 1.0], 1.0), ([1.0, 3.0], 0.8), ([2.0, 0.0], 0.5), ([], 1.0), ([0.0], 1.0)]
)
def test_jain_index(values: list[float], index: float) -> None:
    assert jain(values) == pytest.approx(index)


@pytest.mark.parametrize(("jct", "run_s", "slowdown"), [(300, 100, 3.0), (30, 5, 3.0), (50, 100, 1.0), (0, 0, 1.0)])
def test_bounded_slowdown_floors_the_run_time_at_10_seconds(jct: float, run_s: float, slowdown: float) -> None:
    assert bounded_slowdown(record(jct, run_s)) == slowdown


def test_one_team_waiting_behind_another_lowers_jain() -> None:
    # One GPU, fifo: x runs 0-100 (slowdown 1), y waits and runs 100-200 (slowdown 2).
    jobs = [
        TraceJob(id="x1", submit_s=0, duration_s=100, gpus=1, vc="x"),
        TraceJob(id="y1", submit_s=0, duration_s=100, gpus=1, vc="y"),
    ]
    result = run(jobs, ClusterSpec(node_groups=[group("g", 1, 1, "T4")]))
    teams = team_figures(result.records)
    assert {t: f.avg_slowdown for t, f in teams.items()} == {"x": 1.0, "y": 2.0}
    assert {t: f.gpu_share for t, f in teams.items()} == {"x": 0.5, "y": 0.5}
    assert team_fairness(result.records) == pytest.approx(9 / 10)  # (1 + 2)² / (2 × (1 + 4))
    assert summarize(result).jain_fairness == pytest.approx(0.9)


def test_jobs_without_a_team_count_as_one_team() -> None:
    figures = team_figures([record(100, 100, "", 100.0), record(200, 100, "a", 300.0)])
    assert list(figures) == ["-", "a"]
    assert figures["a"].gpu_share == 0.75
    assert figures["a"].gpu_hours == pytest.approx(300 / 3600)


def test_cost_and_energy_of_one_busy_gpu_out_of_two() -> None:
    # 1 node × 2 GPUs at 3.0 per GPU-hour, 200 W busy and 20 W idle; one 1-GPU job for an hour.
    spec = ClusterSpec(node_groups=[group("g", 1, 2, "X1", price_per_gpu_hour=3.0, watts_busy=200, watts_idle=20)])
    result = run([TraceJob(id="a", submit_s=0, duration_s=3600, gpus=1)], spec)
    summary = summarize(result, group_rates(spec))
    assert result.busy_gpu_s_by_group == {"g": 3600.0}
    assert summary.makespan_s == 3600
    assert summary.cost == pytest.approx(6.0)  # 2 GPU-hours × 3.0
    assert summary.busy_cost == pytest.approx(3.0)  # 1 busy GPU-hour × 3.0
    assert summary.energy_kwh == pytest.approx(0.22)  # (3600 s × 200 W + 3600 s × 20 W) / 3.6e6


def test_busy_time_is_charged_to_the_group_the_job_ran_in() -> None:
    spec = ClusterSpec(
        node_groups=[
            group("cheap", 1, 1, "X1", price_per_gpu_hour=1.0, watts_busy=100, watts_idle=0),
            group("dear", 1, 1, "X2", price_per_gpu_hour=10.0, watts_busy=1000, watts_idle=100),
        ]
    )
    jobs = [TraceJob(id="a", submit_s=0, duration_s=1800, gpus=1, gpu_types=("X2",))]
    result = run(jobs, spec)
    assert result.busy_gpu_s_by_group == {"dear": 1800.0}
    money = spend(group_rates(spec), result.busy_gpu_s_by_group, 1800)
    assert money.cost == pytest.approx(0.5 * 1.0 + 0.5 * 10.0)
    assert money.busy_cost == pytest.approx(5.0)
    assert money.energy_kwh == pytest.approx((1800 * 1000) / 3.6e6)  # idle X1 draws 0 W, the X2 is never idle


def test_rates_come_from_the_file_then_the_catalogue_then_zero() -> None:
    spec = ClusterSpec(
        node_groups=[
            group("priced", 1, 8, "V100", price_per_gpu_hour=1.5),
            group("catalogue", 2, 4, "A100"),
            group("unknown", 1, 8, "G2", watts_busy=250),
        ]
    )
    priced, catalogue, unknown = group_rates(spec)
    assert (priced.price_per_gpu_hour, priced.watts_busy, priced.watts_idle) == (1.5, 300, 40)
    assert (catalogue.gpus, catalogue.price_per_gpu_hour, catalogue.watts_busy) == (8, 3.67, 400)
    assert (unknown.price_per_gpu_hour, unknown.watts_busy, unknown.watts_idle) == (0.0, 250, 0.0)
    assert unrated(spec) == ["node group unknown (G2) has no price_per_gpu_hour, watts_idle"]


def test_the_cli_reports_cost_and_energy_and_names_unpriced_groups(tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text("job_id,submit_time_s,duration_s,num_gpus\na,0,3600,1\n")
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(
        "node_groups:\n"
        "  - {name: g, count: 1, gpus_per_node: 2, gpu_type: X1,"
        " price_per_gpu_hour: 3, watts_busy: 200, watts_idle: 20}\n"
        "  - {name: z, count: 1, gpus_per_node: 1, gpu_type: X2}\n"
    )
    args = ["sim", "--trace", str(trace), "--cluster", str(cluster), "--policy", "fifo"]
    result = CliRunner().invoke(cli, [*args, "-o", "json"])
    assert result.exit_code == 0, result.output
    figures = json.loads(result.stdout)["policies"]["fifo"]
    # fifo places the job on g-0000 (first by name); the unpriced X2 node adds no cost and no energy.
    assert (figures["cost"], figures["busy_cost"]) == (pytest.approx(6.0), pytest.approx(3.0))
    assert figures["energy_kwh"] == pytest.approx(0.22)
    assert figures["jain_fairness"] == 1.0
    assert "note: node group z (X2) has no price_per_gpu_hour, watts_busy, watts_idle" in result.stderr
    result = CliRunner().invoke(cli, args)
    assert "JAIN (TEAMS)" in result.stdout and "ENERGY kWh" in result.stdout
