"""Counts in the text output read as English (``1 job``, ``2 jobs``), JSON is untouched, and a run with
nothing to simulate says why; ``corral sim plan`` refuses to plan for no job, and unreadable files exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from corral.cli.main import cli
from corral.sim import NEVER_FITS, NEVER_RAN, NO_GPUS
from corral.sim.report import amount, counted, hours, skipped_note

HEADER = "job_id,submit_time_s,duration_s,num_gpus\n"
ONE_GPU = "node_groups: [{name: n, count: 1, gpus_per_node: 1, gpu_type: V100, price_per_gpu_hour: 1}]\n"


def invoke(tmp_path: Path, rows: str, *args: str, cluster: str = ONE_GPU) -> Result:
    trace = tmp_path / "t.csv"
    trace.write_text(HEADER + rows)
    path = tmp_path / "c.yaml"
    path.write_text(cluster)
    return CliRunner().invoke(cli, ["sim", *args, "--trace", str(trace), "--cluster", str(path)])


@pytest.mark.parametrize(("count", "text"), [(0, "0 jobs"), (1, "1 job"), (2, "2 jobs"), (1_000_000, "1000000 jobs")])
def test_counted(count: int, text: str) -> None:
    assert counted(count, "job") == text


def test_the_skipped_line_agrees_with_each_count() -> None:
    assert skipped_note({NEVER_FITS: 1}) == "skipped 1 trace row: 1 never fits this cluster"
    note = skipped_note({NO_GPUS: 2, NEVER_FITS: 3, NEVER_RAN: 1})
    assert note == "skipped 6 trace rows: 2 CPU-only (0 GPUs), 3 never fit this cluster, 1 never ran (no duration)"


def test_one_job_on_one_node_with_one_gpu(tmp_path: Path) -> None:
    result = invoke(tmp_path, "a,0,10,1\nb,0,10,2\n")
    assert result.exit_code == 0, result.output
    assert result.output.startswith("1 job from t.csv on 1 node, 1 GPU: n 1×1 V100\n")
    assert "skipped 1 trace row: 1 never fits this cluster" in result.output


def test_plural_counts_keep_their_s(tmp_path: Path) -> None:
    cluster = ONE_GPU.replace("count: 1, gpus_per_node: 1", "count: 2, gpus_per_node: 4")
    result = invoke(tmp_path, "a,0,10,1\nb,0,10,1\nc,0,10,9\nd,0,10,9\n", cluster=cluster)
    assert result.exit_code == 0, result.output
    assert result.output.startswith("2 jobs from t.csv on 2 nodes, 8 GPUs: n 2×4 V100\n")
    assert "skipped 2 trace rows: 2 never fit this cluster" in result.output


def test_json_keeps_its_shape_and_numbers(tmp_path: Path) -> None:
    result = invoke(tmp_path, "a,0,10,1\nb,0,10,2\n", "-o", "json")
    document = json.loads(result.stdout)
    assert (document["policies"]["default"]["jobs"], document["skipped_jobs"]) == (1, 1)
    assert set(document) == {"policies", "skipped_jobs", "cluster", "teams"}


def test_plan_counts_agree(tmp_path: Path) -> None:
    result = invoke(tmp_path, "a,0,10,1\nb,0,,1\n", "plan", "--target-p95-wait", "0", "--gpu-type", "V100")
    assert result.exit_code == 0, result.output
    assert "; 1 job (1 trace row skipped); 1 simulation\n" in result.output
    assert "recommended: n 1×1 V100 (1 GPU), 1.00 per hour" in result.output


@pytest.mark.parametrize(
    ("rows", "args", "why"),
    [
        ("", (), "the trace has no rows below its header"),
        ("a,0,10,1\n", ("--window", "100:"), "--window 100: keeps no trace row (its one row was submitted at 0 s)"),
        (
            "a,0,10,1\nb,2500000,10,1\n",
            ("--window", ":-1"),
            "--window :-1 keeps no trace row (its 2 rows were submitted from 0 s to 2,500,000 s)",
        ),
        ("a,0,10,1\n", ("--limit", "0"), "--limit 0 keeps no trace row"),
    ],
)
def test_no_job_to_simulate_is_said_on_stderr(tmp_path: Path, rows: str, args: tuple[str, ...], why: str) -> None:
    result = invoke(tmp_path, rows, *args, "-o", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["policies"]["default"]["jobs"] == 0
    assert result.stderr == f"note: no job to simulate: {why}\n"
    plan = invoke(tmp_path, rows, "plan", "--target-p95-wait", "0", *args)
    assert plan.exit_code == 2, plan.output
    assert f"no job to plan for: {why}" in " ".join(plan.output.split())


def test_plan_with_every_row_skipped_exits_2_saying_why(tmp_path: Path) -> None:
    result = invoke(tmp_path, "a,0,10,2\nb,0,,1\n", "plan", "--target-p95-wait", "0")
    assert result.exit_code == 2, result.output
    out = " ".join(result.output.split())
    assert "--trace" in out and "every trace row was skipped (1 never fits this cluster, 1 never ran" in out


def test_skipped_rows_alone_need_no_note(tmp_path: Path) -> None:
    result = invoke(tmp_path, "a,0,,1\n", "-o", "json")
    assert result.exit_code == 0 and result.stderr == ""


@pytest.mark.parametrize("option", ["--trace", "--cluster", "--config"])
def test_a_file_that_cannot_be_read_exits_2_naming_the_option(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, option: str
) -> None:
    config = tmp_path / "head.yaml"
    config.write_text("{}\n")
    name = {"--trace": "t.csv", "--cluster": "c.yaml", "--config": "head.yaml"}[option]

    def refuse(self: Path, *args: object, **kwargs: object) -> bytes:
        raise PermissionError(13, "Permission denied", str(self))

    for method in ("read_bytes", "read_text"):
        original = getattr(Path, method)
        monkeypatch.setattr(
            Path, method, lambda self, *a, _o=original, **k: refuse(self) if self.name == name else _o(self, *a, **k)
        )
    result = invoke(tmp_path, "a,0,10,1\n", "--config", str(config))
    assert result.exit_code == 2, result.output
    assert f"{option}: {tmp_path / name}: cannot read it (Permission denied)" in " ".join(result.output.split())


def test_small_costs_and_energy_keep_two_decimals_and_large_ones_none() -> None:
    assert [amount(v) for v in (0.0, 0.389, 99.4, 99.6, 154_265.6)] == ["0.00", "0.39", "99.40", "100", "154,266"]


def test_a_duration_that_shows_as_100_hours_is_shown_in_days() -> None:
    assert (hours(359_990), hours(359_900), hours(3_600)) == ("4.2d", "99.97h", "1.00h")


def test_prices_and_power_are_floats_in_json_whether_given_or_from_the_catalogue(tmp_path: Path) -> None:
    cluster = (
        "node_groups: [{name: h, count: 1, gpus_per_node: 1, gpu_type: H100},"  # the catalogue's price and power
        " {name: n, count: 1, gpus_per_node: 1, gpu_type: V100, price_per_gpu_hour: 1, watts_busy: 300}]\n"
    )
    result = invoke(tmp_path, "a,0,10,1\n", "-o", "json", cluster=cluster)
    groups = json.loads(result.stdout)["cluster"]["node_groups"]
    assert all(type(g[k]) is float for g in groups for k in ("price_per_gpu_hour", "watts_busy", "watts_idle"))
