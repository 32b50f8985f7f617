"""Figures in the simulator's files are plain decimals: ``0.00001``, never ``1e-05`` or ``1e+06``."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from corral.cli.main import cli
from corral.sched.describe import plain_decimal

HEADER = "job_id,submit_time_s,duration_s,num_gpus,gpu_type,user,vc,status\n"
TRACE = HEADER + "a,0.00001,0.00002,1,,,,\nb,0.00003,7,0.25,,,,\n"
CLUSTER = (
    "node_groups: [{name: n, count: 1, gpus_per_node: 4, gpu_type: V100,"
    " price_per_gpu_hour: 0.00001, watts_busy: 1000000, watts_idle: 0.5}]\n"
)
EXPONENT = re.compile(r"[0-9]e[+-]?[0-9]", re.IGNORECASE)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (2.3e-05, "0.000023"),
        (3.0000000000000004e-05, "0.000030000000000000004"),
        (100.0, "100.0"),
        (0.0, "0.0"),
        (1e16, "10000000000000000.0"),
        (-2.5e-07, "-0.00000025"),
        (4, "4"),
    ],
)
def test_a_plain_decimal_keeps_every_digit_and_no_exponent(value: float, text: str) -> None:
    assert plain_decimal(value) == text
    assert float(text) == value


def test_the_jobs_csv_and_the_report_write_small_and_large_figures_as_plain_decimals(tmp_path: Path) -> None:
    trace, cluster, out = tmp_path / "t.csv", tmp_path / "c.yaml", tmp_path / "out"
    trace.write_text(TRACE)
    cluster.write_text(CLUSTER)
    result = CliRunner().invoke(cli, ["sim", "--trace", str(trace), "--cluster", str(cluster), "--out", str(out)])
    assert result.exit_code == 0, result.output
    text = (out / "jobs-default.csv").read_text()
    assert not EXPONENT.search(text), text
    rows = {r["job_id"]: r for r in csv.DictReader(text.splitlines())}
    assert (rows["a"]["submit_s"], rows["a"]["start_s"], rows["a"]["wait_s"]) == ("0.00001", "0.00001", "0.0")
    assert float(rows["a"]["jct_s"]) == pytest.approx(0.00002)
    assert (rows["b"]["submit_s"], rows["b"]["gpus"], rows["b"]["jct_s"]) == ("0.00003", "0.25", "7.0")
    page = (out / "report.html").read_text()
    assert "<td>0.00001</td><td>1000000 / 0.5</td>" in page
