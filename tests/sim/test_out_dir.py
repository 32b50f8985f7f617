"""--out never writes into an unnamed folder, and never removes or overwrites a file given as input."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from corral.cli.main import cli
from corral.sim.report import same_file

TRACE = "job_id,submit_time_s,duration_s,num_gpus,gpu_type,user,vc,status\na,0,10,1,,,,\n"
CLUSTER = "node_groups: [{name: n, count: 1, gpus_per_node: 4, gpu_type: V100}]\n"
CONFIG = "gpu_speed: {V100: 1.0}\n"


def run(*args: str | Path) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["sim", *map(str, args)])
    return result.exit_code, " ".join(result.output.split())


def inputs(folder: Path, trace: str, cluster: str, config: str) -> tuple[Path, Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = (folder / trace, folder / cluster, folder / config)
    for path, text in zip(paths, (TRACE, CLUSTER, CONFIG), strict=True):
        path.write_text(text)
    return paths


def test_an_empty_out_exits_2_and_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trace, cluster, _ = inputs(tmp_path, "jobs-fifo.csv", "cl.yaml", "unused.yaml")
    monkeypatch.chdir(tmp_path)
    code, out = run("--trace", trace.name, "--cluster", cluster.name, "--out", "", "-o", "json")
    assert code == 2, out
    assert "--out: the folder name is empty" in out
    assert '"policies"' not in out
    assert trace.read_text() == TRACE
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cl.yaml", "jobs-fifo.csv", "unused.yaml"]


def test_the_current_folder_named_as_dot_still_works(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trace, cluster, _ = inputs(tmp_path, "trace.csv", "cl.yaml", "unused.yaml")
    monkeypatch.chdir(tmp_path)
    code, out = run("--trace", trace.name, "--cluster", cluster.name, "--out", ".", "-o", "json")
    assert code == 0, out
    assert (tmp_path / "summary.json").is_file()


def test_stale_job_files_that_are_inputs_are_kept(tmp_path: Path) -> None:
    out_dir = tmp_path / "out"
    trace, cluster, config = inputs(out_dir, "jobs-fifo.csv", "jobs-tiresias.csv", "jobs-priority.csv")
    (out_dir / "jobs-srpt-oracle.csv").write_text("an earlier run's\n")
    files = ("--trace", trace, "--cluster", cluster, "--config", config)
    code, out = run(*files, "--policy", "default", "--out", out_dir, "-o", "json")
    assert code == 0, out
    assert (trace.read_text(), cluster.read_text(), config.read_text()) == (TRACE, CLUSTER, CONFIG)
    assert not (out_dir / "jobs-srpt-oracle.csv").exists()  # not an input: cleaned up as before
    assert (out_dir / "jobs-default.csv").is_file()


def test_inputs_are_compared_once_paths_are_resolved(tmp_path: Path) -> None:
    out_dir = tmp_path / "out"
    trace, cluster, _ = inputs(out_dir, "jobs-fifo.csv", "cl.yaml", "unused.yaml")
    alias = tmp_path / "alias"
    alias.symlink_to(out_dir, target_is_directory=True)
    code, out = run("--trace", alias / trace.name, "--cluster", cluster, "--out", out_dir, "-o", "json")
    assert code == 0, out
    assert trace.read_text() == TRACE
    roundabout = tmp_path / "." / "out" / ".." / "out"
    code, out = run("--trace", trace, "--cluster", cluster, "--out", roundabout, "-o", "json")
    assert code == 0, out
    assert trace.read_text() == TRACE


@pytest.mark.parametrize(
    ("names", "option", "written"),
    [
        (("jobs-fifo.csv", "cl.yaml", "c.yaml"), "--trace", "jobs-fifo.csv"),
        (("t.csv", "summary.json", "c.yaml"), "--cluster", "summary.json"),
        (("t.csv", "cl.yaml", "report.html"), "--config", "report.html"),
    ],
)
def test_out_refuses_to_overwrite_an_input(
    tmp_path: Path, names: tuple[str, str, str], option: str, written: str
) -> None:
    trace, cluster, config = inputs(tmp_path, *names)
    files = ("--trace", trace, "--cluster", cluster, "--config", config)
    code, out = run(*files, "--policy", "fifo", "--out", tmp_path, "-o", "json")
    assert code == 2, out
    assert '"policies"' not in out  # refused before anything was simulated
    assert f"--out: {tmp_path}: the report's {written} would overwrite" in out
    assert f"the {option} file" in out
    assert (trace.read_text(), cluster.read_text(), config.read_text()) == (TRACE, CLUSTER, CONFIG)


def test_same_file(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("x")
    (tmp_path / "b").hardlink_to(tmp_path / "a")
    assert same_file(tmp_path / "a", tmp_path / "sub" / ".." / "a")
    assert same_file(tmp_path / "a", tmp_path / "b")
    assert not same_file(tmp_path / "a", tmp_path / "missing")


@pytest.mark.parametrize("name", ["summary.json", "jobs-fifo.csv", "report.html", "utilization.png"])
def test_a_folder_where_the_report_writes_a_file_is_refused_before_simulating(tmp_path: Path, name: str) -> None:
    trace, cluster, _ = inputs(tmp_path, "t.csv", "cl.yaml", "unused.yaml")
    out_dir = tmp_path / "out"
    (out_dir / name).mkdir(parents=True)
    code, out = run("--trace", trace, "--cluster", cluster, "--policy", "fifo", "--out", out_dir, "-o", "json")
    assert code == 2, out
    assert '"policies"' not in out
    assert f"--out: {out_dir}: {out_dir / name} is a folder" in out
    assert sorted(p.name for p in out_dir.iterdir()) == [name]  # nothing half written


def test_a_folder_named_as_a_stale_job_file_is_left_alone(tmp_path: Path) -> None:
    trace, cluster, _ = inputs(tmp_path, "t.csv", "cl.yaml", "unused.yaml")
    out_dir = tmp_path / "out"
    (out_dir / "jobs-tiresias.csv").mkdir(parents=True)
    code, out = run("--trace", trace, "--cluster", cluster, "--policy", "fifo", "--out", out_dir, "-o", "json")
    assert code == 0, out
    assert (out_dir / "jobs-tiresias.csv").is_dir()
    assert (out_dir / "jobs-fifo.csv").is_file() and (out_dir / "report.html").is_file()
