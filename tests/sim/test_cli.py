"""``corral sim``: the documented JSON shape, tables, --out files and usage errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from corral.cli.main import cli

CLUSTERS = Path(__file__).resolve().parents[2] / "examples" / "clusters"
FIGURES = {
    "jobs",
    "avg_jct_s",
    "p50_jct_s",
    "p95_jct_s",
    "p99_jct_s",
    "avg_wait_s",
    "makespan_s",
    "utilization",
    "preemptions",
    "gpu_hours_lost",
    "p95_wait_s",
    "jain_fairness",
    "cost",
    "busy_cost",
    "energy_kwh",
    "unfinished_jobs",
}
TRACE = """job_id,submit_time_s,duration_s,num_gpus,gpu_type,user,vc,status
a,0,3600,8,,,vc1,
b,0,1800,8,,,vc1,
c,60,,1,,,vc1,
d,120,600,0,,,vc1,
e,300,7200,16,,,vc2,
"""


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    path = tmp_path / "trace.csv"
    path.write_text(TRACE)
    return path


def one_node(tmp_path: Path) -> Path:
    path = tmp_path / "cluster.yaml"
    path.write_text("node_groups:\n  - {count: 1, gpus_per_node: 8, gpu_type: V100}\n")
    return path


def sim(*args: str | Path) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["sim", *map(str, args)])
    return result.exit_code, result.output


def test_json_has_exactly_the_documented_keys(trace: Path) -> None:
    code, out = sim("--trace", trace, "--cluster", CLUSTERS / "philly.yaml", "-o", "json")
    assert code == 0, out
    data = json.loads(out)
    assert set(data) == {"policies", "skipped_jobs", "cluster", "teams"}
    assert list(data["policies"]) == ["default"]
    assert set(data["policies"]["default"]) == FIGURES
    assert data["skipped_jobs"] == 2
    figures = data["policies"]["default"]
    assert figures["jobs"] == 3
    assert 0 <= figures["utilization"] <= 1
    assert figures["preemptions"] == 0


def test_exact_figures_on_one_node(trace: Path, tmp_path: Path) -> None:
    code, out = sim("--trace", trace, "--cluster", one_node(tmp_path), "--policy", "fifo", "-o", "json")
    assert code == 0, out
    data = json.loads(out)
    assert data["skipped_jobs"] == 3  # no duration, no GPUs, wider than the cluster
    figures = data["policies"]["fifo"]
    assert figures["jobs"] == 2
    assert figures["avg_jct_s"] == (3600 + 5400) / 2
    assert figures["avg_wait_s"] == 3600 / 2
    assert figures["makespan_s"] == 5400
    assert figures["utilization"] == 1.0


def test_several_policies_window_limit_and_scale_load(trace: Path) -> None:
    args = ["--trace", trace, "--cluster", CLUSTERS / "philly.yaml", "--policy", "fifo", "--policy", "default"]
    code, out = sim(*args, "--window", "0:100", "--limit", "2", "--scale-load", "2", "-o", "json")
    assert code == 0, out
    data = json.loads(out)
    assert list(data["policies"]) == ["fifo", "default"]
    assert data["policies"]["fifo"]["jobs"] == 2
    assert data["skipped_jobs"] == 0


def test_table_output(trace: Path) -> None:
    code, out = sim("--trace", trace, "--cluster", CLUSTERS / "philly.yaml", "--policy", "fifo")
    assert code == 0, out
    assert "AVG JCT" in out
    assert "fifo" in out
    assert "1 never ran (no duration)" in out


def test_out_writes_summary_and_jobs(trace: Path, tmp_path: Path) -> None:
    out_dir = tmp_path / "out"
    code, out = sim("--trace", trace, "--cluster", CLUSTERS / "philly.yaml", "--out", out_dir, "-o", "json")
    assert code == 0, out
    assert json.loads((out_dir / "summary.json").read_text()) == json.loads(out)
    lines = (out_dir / "jobs-default.csv").read_text().splitlines()
    assert lines[0].startswith("job_id,submit_s,start_s,finish_s,jct_s,wait_s")
    assert len(lines) == 4


def test_unknown_policy_exits_2_listing_valid_names(trace: Path) -> None:
    code, out = sim("--trace", trace, "--cluster", CLUSTERS / "philly.yaml", "--policy", "srtf")
    assert code == 2
    assert "unknown policy 'srtf'" in out
    assert "default, fifo" in out


def test_bad_cluster_file_exits_2_naming_the_field(trace: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("node_groups:\n  - {count: 1, gpus_per_node: many, gpu_type: V100}\n")
    code, out = sim("--trace", trace, "--cluster", bad)
    assert code == 2
    assert "node_groups[0].gpus_per_node" in out


@pytest.mark.parametrize(
    ("option", "value", "text"), [("--window", "9:1", "window"), ("--scale-load", "0", "scale-load")]
)
def test_bad_options_exit_2(trace: Path, option: str, value: str, text: str) -> None:
    code, out = sim("--trace", trace, "--cluster", CLUSTERS / "philly.yaml", option, value)
    assert code == 2
    assert text in out


def test_bad_trace_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("job_id,submit_time_s\na,0\n")
    code, out = sim("--trace", bad, "--cluster", CLUSTERS / "philly.yaml")
    assert code == 2
    assert "missing column" in out


def test_checkpoint_interval_counts_the_gpu_hours_preemption_loses(tmp_path: Path) -> None:
    path = tmp_path / "two.csv"
    path.write_text("job_id,submit_time_s,duration_s,num_gpus\nlong,0,10000,8\nshort,5000,100,8\n")
    code, out = sim("--trace", path, "--cluster", one_node(tmp_path), "--policy", "tiresias")
    assert code == 0, out
    assert "LOST" in out
    code, out = sim(
        "--trace",
        path,
        "--cluster",
        one_node(tmp_path),
        "--policy",
        "tiresias",
        "--checkpoint-interval",
        "600",
        "-o",
        "json",
    )
    figures = json.loads(out)["policies"]["tiresias"]
    assert (figures["preemptions"], figures["gpu_hours_lost"]) == (1, pytest.approx(200 * 8 / 3600))
    assert figures["avg_jct_s"] == (10_300 + 100) / 2


def test_every_registered_policy_runs(trace: Path, tmp_path: Path) -> None:
    names = ["default", "fifo", "priority", "tiresias", "srpt-oracle"]
    args = [a for n in names for a in ("--policy", n)]
    code, out = sim("--trace", trace, "--cluster", one_node(tmp_path), *args, "-o", "json")
    assert code == 0, out
    assert list(json.loads(out)["policies"]) == names


def test_the_head_refuses_the_simulation_only_oracle() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "corral", "head", "--policy", "srpt-oracle"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "'srpt-oracle' reads traced job durations and runs only in `corral sim`" in result.stderr
    assert "valid policies are default, fifo, priority, tiresias" in result.stderr


def test_with_the_oracle_each_policy_gets_its_average_jct_over_the_oracles(trace: Path, tmp_path: Path) -> None:
    args = ("--trace", trace, "--cluster", one_node(tmp_path), "--policy", "fifo", "--policy", "srpt-oracle")
    code, out = sim(*args, "-o", "json")
    assert code == 0, out
    policies = json.loads(out)["policies"]
    fifo, oracle = policies["fifo"], policies["srpt-oracle"]
    assert fifo["avg_jct_vs_oracle"] == fifo["avg_jct_s"] / oracle["avg_jct_s"] > 1
    assert oracle["avg_jct_vs_oracle"] == 1
    code, out = sim(*args)
    assert f"average JCT ÷ srpt-oracle's (a clairvoyant bound): fifo {fifo['avg_jct_vs_oracle']:.3f}" in out
    code, out = sim("--trace", trace, "--cluster", one_node(tmp_path), "--policy", "fifo", "-o", "json")
    assert "avg_jct_vs_oracle" not in json.loads(out)["policies"]["fifo"]  # no oracle, no ratio
    result = CliRunner().invoke(cli, ["sim", *map(str, args), "--limit", "0", "-o", "json"])  # no job: no ratio
    assert [p["avg_jct_vs_oracle"] for p in json.loads(result.stdout)["policies"].values()] == [None, None]


def test_the_out_files_are_written_even_when_stdout_closes_early(trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    command = [sys.executable, "-m", "corral", "sim", "--trace", str(trace), "--cluster", str(one_node(tmp_path))]
    # The reader goes away before the table is printed (as `| head -1` can).
    shell = " ".join(f"'{part}'" for part in [*command, "--out", str(out)]) + " | head -c 0"
    subprocess.run(shell, shell=True, timeout=120, env={**os.environ, "CORRAL_HOME": str(tmp_path / "home")})
    assert {"summary.json", "jobs-default.csv", "report.html"} <= {p.name for p in out.iterdir()}


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full, a device that is always full")
@pytest.mark.parametrize("output", ["json", "table"])
def test_a_stdout_that_cannot_be_written_is_an_error_without_a_traceback(
    trace: Path, tmp_path: Path, output: str
) -> None:
    command = [sys.executable, "-m", "corral", "sim", "--trace", str(trace), "--cluster", str(one_node(tmp_path))]
    with open("/dev/full", "w") as full:
        result = subprocess.run(
            [*command, "-o", output], stdout=full, stderr=subprocess.PIPE, text=True, timeout=120, check=False
        )
    assert result.returncode == 1, result.stderr
    assert result.stderr == "error: cannot write: No space left on device\n"


@pytest.mark.parametrize("args", [["-o", "json"], ["-o", "table"], ["--help"]])
def test_a_reader_that_goes_away_ends_the_run_quietly_with_status_0(
    trace: Path, tmp_path: Path, args: list[str]
) -> None:
    command = [sys.executable, "-m", "corral", "sim", "--trace", str(trace), "--cluster", str(one_node(tmp_path))]
    env = {**os.environ, "CORRAL_HOME": str(tmp_path / "home")}
    with subprocess.Popen([*command, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env) as process:
        assert process.stdout is not None and process.stderr is not None
        process.stdout.close()  # before anything is printed, as `| head -c 10` after its first bytes
        stderr = process.stderr.read()
        assert process.wait(timeout=120) == 0, stderr
    assert stderr == b""
