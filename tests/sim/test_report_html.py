"""--out's report.html and plots, the timeline the engine records for them, and the progress bar."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from corral.cli.main import cli
from corral.cli.sim import simulate_policies
from corral.sched import get_policy
from corral.sim import Trace, TraceJob, build_nodes, prepare, simulate
from corral.sim.htmlreport import out_files
from corral.sim.plots import PLOTS, resample, shown_teams
from corral.sim.result import Sample
from corral.spec import ClusterSpec, NodeGroupSpec

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
TRACE = """job_id,submit_time_s,duration_s,num_gpus,gpu_type,user,vc,status
a,0,3600,4,,,vc1,
b,0,1800,8,,,vc2,
c,600,600,2,,,vc1,
d,900,7200,1,,,,
"""


def one_gpu_cluster() -> tuple[ClusterSpec, Trace]:
    spec = ClusterSpec(node_groups=[NodeGroupSpec(count=1, gpus_per_node=1, gpu_type="T4")])
    jobs = (TraceJob(id="a", submit_s=0, duration_s=100, gpus=1), TraceJob(id="b", submit_s=0, duration_s=100, gpus=1))
    return spec, Trace(jobs=jobs)


def sim_inputs(tmp_path: Path, trace_csv: str, cluster_yaml: str) -> tuple[list[str], Path]:
    """``corral sim`` arguments for this trace and cluster file, written under tmp_path, and an --out folder."""
    trace, cluster = tmp_path / "trace.csv", tmp_path / "cluster.yaml"
    trace.write_text(trace_csv, encoding="utf-8")
    cluster.write_text(cluster_yaml)
    return ["sim", "--trace", str(trace), "--cluster", str(cluster)], tmp_path / "out"


def test_out_writes_a_report_with_its_plots(tmp_path: Path) -> None:
    cluster = "node_groups:\n  - {name: v100, count: 1, gpus_per_node: 8, gpu_type: V100}\n"
    sim, out = sim_inputs(tmp_path, TRACE, cluster)
    args = [*sim, "--policy", "fifo", "--policy", "tiresias"]
    result = CliRunner().invoke(cli, [*args, "--out", str(out), "-o", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["policies"]["fifo"]["jobs"] == 4
    page = (out / "report.html").read_text()
    assert page.startswith("<!doctype html>")
    assert set(re.findall(r'<img src="([^"]+)"', page)) == set(PLOTS.values())
    for filename in PLOTS.values():
        data = (out / filename).read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 1000
    assert "<td>fifo</td>" in page and "<td>tiresias</td>" in page
    assert "Teams under fifo" in page and "<td>vc2</td>" in page
    assert {p.name for p in out.iterdir()} == {
        "summary.json",
        "jobs-fifo.csv",
        "jobs-tiresias.csv",
        "report.html",
    } | set(PLOTS.values())
    assert {p.name for p in out.iterdir()} == set(out_files(["fifo", "tiresias"]))
    table = CliRunner().invoke(cli, [*args, "--out", str(out)])
    assert f"wrote {out}/summary.json, jobs-fifo.csv, jobs-tiresias.csv, report.html" in table.output


@pytest.mark.parametrize(
    ("teams", "cell"),
    [
        # A vc such as $\frac$ or a$b is text from the trace; matplotlib would read $…$ as TeX and fail.
        (["$\\frac$", "a$b", "$x^2$"], "<td>$\\frac$</td>"),
        # Warnings are errors in the tests: matplotlib's 'Glyph … missing from font' would fail the command.
        (["\u56e2\u961f", "\U0001f600"], "<td>\u56e2\u961f</td>"),
    ],
    ids=["dollar signs drawn as written", "glyphs the plot's font lacks give no warnings"],
)
def test_team_names_from_the_trace_are_drawn_as_written(tmp_path: Path, teams: list[str], cell: str) -> None:
    rows = "".join(f"{chr(ord('a') + i)},0,10,1,{team}\n" for i, team in enumerate(teams))
    trace = "job_id,submit_time_s,duration_s,num_gpus,vc\n" + rows
    cluster = "node_groups:\n  - {count: 1, gpus_per_node: 8, gpu_type: V100}\n"
    sim, out = sim_inputs(tmp_path, trace, cluster)
    result = CliRunner().invoke(cli, [*sim, "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert (out / "team_share.png").read_bytes().startswith(PNG_MAGIC)
    assert cell in (out / "report.html").read_text(encoding="utf-8")


def test_the_team_share_plot_draws_the_largest_teams_and_sums_the_others() -> None:
    shares = {"a": {f"t{i:04d}": (i + 1) / 5e8 for i in range(3001)}, "b": {"t0000": 0.5, "zz": 1e-9}}
    teams, bars = shown_teams(shares, limit=20)
    assert teams == ["t0000", *(f"t{i:04d}" for i in range(2982, 3001)), "2,982 other teams"]
    assert len(bars["a"]) == len(bars["b"]) == 21
    assert sum(bars["a"]) == pytest.approx(sum(shares["a"].values()))
    assert bars["b"][0] == 0.5 and bars["b"][-1] == 1e-9  # zz is among the others: its share is in their bar
    few = {"a": {"y": 0.25, "x": 0.75}}
    assert shown_teams(few) == (["x", "y"], {"a": [0.75, 0.25]})


def test_the_timeline_is_recorded_only_when_asked() -> None:
    spec, trace = one_gpu_cluster()
    nodes = build_nodes(spec)
    workload = prepare(trace, nodes)
    assert simulate(workload, nodes, get_policy("fifo")).timeline == ()
    timeline = simulate(workload, nodes, get_policy("fifo"), timeline=True).timeline
    assert timeline == (Sample(0, 1, 1), Sample(100, 1, 0), Sample(200, 0, 0))


def test_resample_keeps_the_value_in_force() -> None:
    samples = [Sample(0, 0, 0), Sample(10, 5, 0), Sample(60, 3, 0), Sample(100, 2, 0)]
    assert resample(samples, lambda s: s.busy_gpus) == ([0, 10, 60, 100], [0, 5, 3, 2])
    assert resample(samples, lambda s: s.busy_gpus, points=3) == ([0, 50, 100], [0, 5, 2])


def test_the_progress_bar_advances_per_policy_as_jobs_finish() -> None:
    spec, trace = one_gpu_cluster()
    nodes = build_nodes(spec)
    workload = prepare(trace, nodes)
    finished: list[str] = []
    simulate(workload, nodes, get_policy("fifo"), on_finish=lambda: finished.append("job"))
    assert finished == ["job", "job"]
    stream = io.StringIO()
    results = simulate_policies(workload, nodes, ["fifo", "default"], {}, 0.0, progress=stream)
    assert list(results) == ["fifo", "default"]
    shown = stream.getvalue()
    assert "fifo" in shown and "default" in shown and "2/2" in shown


def test_no_progress_bar_without_a_terminal(tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text(TRACE)
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text("node_groups:\n  - {count: 1, gpus_per_node: 8, gpu_type: V100}\n")
    result = CliRunner().invoke(cli, ["sim", "--trace", str(trace), "--cluster", str(cluster), "-o", "json"])
    assert result.exit_code == 0
    assert "━" not in result.output
    json.loads(result.output)


def test_the_report_shows_no_ratio_when_the_oracle_took_no_time(tmp_path: Path) -> None:
    sim, out = sim_inputs(
        tmp_path,
        "job_id,submit_time_s,duration_s,num_gpus\nz,0,0,1\n",
        "node_groups:\n  - {count: 1, gpus_per_node: 1, gpu_type: V100}\n",
    )
    args = [*sim, "--policy", "srpt-oracle", "--policy", "fifo"]
    result = CliRunner().invoke(cli, [*args, "--out", str(out), "-o", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["policies"]["fifo"]["avg_jct_vs_oracle"] is None
    page = (out / "report.html").read_text()
    assert "avg JCT ÷ srpt-oracle" in page and "<td>-</td>" in page


def test_the_report_shows_small_costs_and_energy_as_the_table_does(tmp_path: Path) -> None:
    sim, out = sim_inputs(
        tmp_path,
        "job_id,submit_time_s,duration_s,num_gpus\na,0,3600,1\n",
        "node_groups:\n  - {count: 1, gpus_per_node: 2, gpu_type: V100, price_per_gpu_hour: 0.2,"
        " watts_busy: 300, watts_idle: 40}\n",
    )
    result = CliRunner().invoke(cli, [*sim, "--out", str(out)])
    assert result.exit_code == 0, result.output
    # cost 2 GPUs x 1 h x 0.2 = 0.40; busy cost 0.20; energy (3600 x 300 + 3600 x 40) J = 0.34 kWh
    assert "0.40  0.20       0.34" in result.output
    page = (out / "report.html").read_text()
    assert "<td>0.40</td><td>0.20</td><td>0.34</td>" in page
