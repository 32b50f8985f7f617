"""Jobs the scheduler never finishes are counted, named and listed, never dropped without a word."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from corral.cli.main import cli

HEADER = "job_id,submit_time_s,duration_s,num_gpus,gpu_type,user,vc,status\n"
CLUSTER = (
    "node_groups: [{name: n, count: 1, gpus_per_node: 4, gpu_type: V100,"
    " price_per_gpu_hour: 1, watts_busy: 100, watts_idle: 0}]\n"
)
# ta may hold 2 GPUs and never borrow, so its 4-GPU job can never start.
CONFIG = "teams: {ta: {quotas: {V100: {nominal: 2, borrowing_limit: 0}}}, tb: {quotas: {V100: {nominal: 2}}}}\n"


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path, Path]:
    trace = tmp_path / "trace.csv"
    trace.write_text(HEADER + "big,0,100,4,,,ta,\nsmall,0,100,1,,,ta,\nother,50,100,1,,,tb,\n")
    cluster = tmp_path / "c1.yaml"
    cluster.write_text(CLUSTER)
    config = tmp_path / "cfg.yaml"
    config.write_text(CONFIG)
    return trace, cluster, config


def sim(files: tuple[Path, Path, Path], *args: str) -> tuple[int, str]:
    trace, cluster, config = files
    argv = ["sim", "--trace", str(trace), "--cluster", str(cluster), "--config", str(config), *args]
    result = CliRunner().invoke(cli, argv)
    return result.exit_code, result.output


def test_the_json_counts_unfinished_jobs_per_policy(files: tuple[Path, Path, Path]) -> None:
    code, out = sim(files, "--policy", "fifo", "--policy", "default", "-o", "json")
    assert code == 0, out
    data = json.loads(out)
    for name in ("fifo", "default"):
        assert data["policies"][name]["jobs"] == 2
        assert data["policies"][name]["unfinished_jobs"] == 1
    assert data["skipped_jobs"] == 0


def test_the_table_names_the_unfinished_jobs_and_why(files: tuple[Path, Path, Path]) -> None:
    code, out = sim(files)
    assert code == 0, out
    text = " ".join(out.split())
    assert "unfinished under default: 1 job never finished" in text
    assert ": big;" in text
    assert "quota" in text


def test_the_jobs_csv_lists_unfinished_jobs_without_a_finish(files: tuple[Path, Path, Path], tmp_path: Path) -> None:
    out_dir = tmp_path / "out"
    code, out = sim(files, "--out", str(out_dir))
    assert code == 0, out
    with (out_dir / "jobs-default.csv").open(newline="") as stream:
        rows = {r["job_id"]: r for r in csv.DictReader(stream)}
    assert set(rows) == {"big", "small", "other"}
    big = rows["big"]
    assert (big["submit_s"], big["start_s"], big["finish_s"], big["jct_s"], big["gpus"]) == ("0.0", "", "", "", "4")
    assert rows["small"]["finish_s"] == "100.0"
    summary = json.loads((out_dir / "summary.json").read_text())
    assert summary["policies"]["default"]["unfinished_jobs"] == 1


def test_a_run_where_every_job_finishes_reports_none(files: tuple[Path, Path, Path]) -> None:
    trace, cluster, _ = files
    result = CliRunner().invoke(cli, ["sim", "--trace", str(trace), "--cluster", str(cluster), "-o", "json"])
    assert result.exit_code == 0, result.output
    figures = json.loads(result.output)["policies"]["default"]
    assert (figures["jobs"], figures["unfinished_jobs"]) == (3, 0)
