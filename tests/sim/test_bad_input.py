"""Bad traces and options exit 2 naming the line, column or option, before anything is simulated."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from corral.cli.main import cli
from corral.cli.simargs import MAX_CHECKPOINT_S
from corral.sim.trace import MAX_SECONDS

HEADER = "job_id,submit_time_s,duration_s,num_gpus,gpu_type,user,vc,status\n"
CLUSTER = "node_groups: [{name: n, count: 1, gpus_per_node: 4, gpu_type: V100}]\n"


@pytest.fixture
def cluster(tmp_path: Path) -> Path:
    path = tmp_path / "c1.yaml"
    path.write_text(CLUSTER)
    return path


def run(*args: str | Path) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["sim", *map(str, args)])
    return result.exit_code, " ".join(result.output.split())


def sim_rows(tmp_path: Path, cluster: Path, rows: str, *args: str) -> tuple[int, str]:
    trace = tmp_path / "trace.csv"
    trace.write_text(HEADER + rows)
    return run("--trace", trace, "--cluster", cluster, *args)


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "NaN", "Infinity"])
@pytest.mark.parametrize("column", ["submit_time_s", "duration_s", "num_gpus"])
def test_a_number_that_is_not_finite_names_the_line_and_column(
    tmp_path: Path, cluster: Path, column: str, value: str
) -> None:
    fields = {"submit_time_s": "0", "duration_s": "10", "num_gpus": "1"} | {column: value}
    bad = f"b,{fields['submit_time_s']},{fields['duration_s']},{fields['num_gpus']},,,,\n"
    code, out = sim_rows(tmp_path, cluster, "a,0,10,1,,,,\n" + bad + "c,5,10,1,,,,\n")
    assert code == 2, out
    assert f"line 3: {column} must be a finite number, got '{value}'" in out


@pytest.mark.parametrize("rows", ["a,0,10,-1,,,,\n", "a,0,,-2,,,,\n", "a,0,10,1.5,,,,\n"])
def test_num_gpus_must_be_a_whole_number_0_or_more(tmp_path: Path, cluster: Path, rows: str) -> None:
    code, out = sim_rows(tmp_path, cluster, rows)
    assert code == 2, out
    assert "line 2: num_gpus must be a whole number, 0 or more (0 = CPU-only)" in out


def test_a_negative_duration_names_duration_s(tmp_path: Path, cluster: Path) -> None:
    code, out = sim_rows(tmp_path, cluster, "a,0,-5,1,,,,\n")
    assert code == 2, out
    assert "line 2: duration_s must be 0 or more, got '-5'" in out


@pytest.mark.parametrize(
    ("rows", "text"),
    [
        ("a,0,10,1,,,,\nb,1,10,1,,,,\na,2,10,1,,,,\n", "line 4: job_id 'a' is already the job on line 2"),
        (",0,10,1,,,,\nline-2,1,10,1,,,,\n", "line 3: job_id 'line-2' is already the job on line 2"),
        ("a,0,,1,,,,\na,1,10,1,,,,\n", "line 3: job_id 'a' is already the job on line 2"),
    ],
)
def test_a_repeated_job_id_names_both_lines(tmp_path: Path, cluster: Path, rows: str, text: str) -> None:
    code, out = sim_rows(tmp_path, cluster, rows)
    assert code == 2, out
    assert text in out


def test_rows_without_a_job_id_are_named_after_their_line(tmp_path: Path, cluster: Path) -> None:
    code, out = sim_rows(tmp_path, cluster, ",0,10,1,,,,\n,1,10,1,,,,\n", "-o", "json")
    assert code == 0, out
    assert json.loads(out)["policies"]["default"]["jobs"] == 2


def test_a_trace_that_is_not_utf8_exits_2(tmp_path: Path, cluster: Path) -> None:
    trace = tmp_path / "latin1.csv"
    trace.write_bytes((HEADER + "a,0,10,1,,caf\xe9,,\n").encode("latin-1"))
    code, out = run("--trace", trace, "--cluster", cluster)
    assert code == 2, out
    assert "line 2: not UTF-8 text (byte 0xe9)" in out


def test_a_byte_order_mark_before_the_header_is_read(tmp_path: Path, cluster: Path) -> None:
    trace = tmp_path / "bom.csv"
    trace.write_bytes(("\ufeff" + HEADER + "a,0,10,1,,,,\n").encode("utf-8"))
    code, out = run("--trace", trace, "--cluster", cluster, "-o", "json")
    assert code == 0, out
    assert json.loads(out)["policies"]["default"]["jobs"] == 1


@pytest.mark.parametrize(
    ("column", "value"),
    [
        *(("submit_time_s", v) for v in ("1e12", "1e20", "99999999999999", "-1e12")),
        *(("duration_s", v) for v in ("1e12", "1e20", "99999999999999")),
    ],
)
def test_times_beyond_100_years_name_the_value_and_the_limit(
    tmp_path: Path, cluster: Path, column: str, value: str
) -> None:
    row = f"a,{value},10,1,,,,\n" if column == "submit_time_s" else f"a,0,{value},1,,,,\n"
    code, out = sim_rows(tmp_path, cluster, row)
    assert code == 2, out
    assert f"line 2: {column}" in out and value in out
    assert f"the limit of {MAX_SECONDS} s (100 years)" in out


def test_a_submit_time_scaled_beyond_the_limit_names_scale_load(tmp_path: Path, cluster: Path) -> None:
    code, out = sim_rows(tmp_path, cluster, "a,3000000000,10,1,,,,\n", "--scale-load", "0.5")
    assert code == 2, out
    assert "line 2: submit_time_s 3e+09 / --scale-load 0.5" in out and "100 years" in out


def test_jobs_that_would_run_past_the_clock_exit_2(tmp_path: Path, cluster: Path) -> None:
    # 60 jobs of 95 years, one after another on the only node: 5,700 years.
    rows = "".join(f"j{i},0,3000000000,4,,,,\n" for i in range(60))
    code, out = sim_rows(tmp_path, cluster, rows, "--policy", "fifo")
    assert code == 2, out
    assert "past its limit" in out and "5,000 years" in out


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--scale-load", "nan"),
        ("--scale-load", "inf"),
        ("--scale-load", "1e-10"),
        ("--scale-load", "0"),
        ("--checkpoint-interval", "nan"),
        ("--checkpoint-interval", "inf"),
        ("--checkpoint-interval", "-1"),
        ("--window", "nan:"),
        ("--window", ":inf"),
        ("--window", "-inf:100"),
        ("--window", "0:nan"),
        ("--window", "1_0:2_0"),
        ("--scale-load", "1_0"),
        ("--checkpoint-interval", "6_00"),
    ],
)
def test_options_out_of_range_exit_2_naming_the_option(tmp_path: Path, cluster: Path, option: str, value: str) -> None:
    for command in ([], ["plan", "--target-p95-wait", "1m"]):
        trace = tmp_path / "trace.csv"
        trace.write_text(HEADER + "a,0,10,1,,,,\n")
        result = CliRunner().invoke(
            cli, ["sim", *command, "--trace", str(trace), "--cluster", str(cluster), option, value]
        )
        out = " ".join(result.output.split())
        assert result.exit_code == 2, out
        assert option in out and value in out


def test_the_checkpoint_bound_is_the_traces() -> None:
    assert MAX_CHECKPOINT_S == MAX_SECONDS


@pytest.mark.parametrize("out_dir", ["/dev/null/x", "/proc/corral-sim-x"])
def test_an_out_folder_that_cannot_be_made_exits_2(tmp_path: Path, cluster: Path, out_dir: str) -> None:
    code, out = sim_rows(tmp_path, cluster, "a,0,10,1,,,,\n", "--out", out_dir, "-o", "json")
    assert code == 2, out
    assert '"policies"' not in out  # refused before any result
    assert f"--out: {out_dir}: cannot write there" in out


def test_out_replaces_the_report_files_of_an_earlier_run(tmp_path: Path, cluster: Path) -> None:
    out_dir = tmp_path / "out"
    code, out = sim_rows(
        tmp_path, cluster, "a,0,10,1,,,,\n", "--policy", "fifo", "--policy", "tiresias", "--out", str(out_dir)
    )
    assert code == 0, out
    (out_dir / "notes.txt").write_text("mine")
    (out_dir / "jobs-mine.csv").write_text("mine")
    code, out = sim_rows(tmp_path, cluster, "a,0,10,1,,,,\n", "--policy", "fifo", "--out", str(out_dir))
    assert code == 0, out
    names = {p.name for p in out_dir.iterdir()}
    assert "jobs-fifo.csv" in names and "jobs-tiresias.csv" not in names
    assert {"notes.txt", "jobs-mine.csv"} <= names


@pytest.mark.parametrize("row", ["a,0,10,1,,,,,extra\n", "a,0,10,1,,,,,,more\n"])
def test_a_row_with_more_fields_than_the_header_names_the_line(tmp_path: Path, cluster: Path, row: str) -> None:
    code, out = sim_rows(tmp_path, cluster, "ok,0,10,1,,,,\n" + row)
    assert code == 2, out
    assert "line 3" in out and "but the header names 8 columns" in out


def test_empty_trailing_fields_past_the_header_are_read(tmp_path: Path, cluster: Path) -> None:
    code, out = sim_rows(tmp_path, cluster, "a,0,10,1,,,,,,\n", "-o", "json")
    assert code == 0, out
    assert json.loads(out)["policies"]["default"]["jobs"] == 1


@pytest.mark.parametrize("types", ["|", "V100|", "|V100", "V100||P100"])
def test_an_empty_gpu_type_name_names_the_line(tmp_path: Path, cluster: Path, types: str) -> None:
    code, out = sim_rows(tmp_path, cluster, f"a,0,10,1,{types},,,\n")
    assert code == 2, out
    assert "line 2: gpu_type has an empty type name" in out


@pytest.mark.parametrize(
    ("option", "text", "where"),
    [
        ("--cluster", "node_groups: [{count: NUMBER, gpus_per_node: 4, gpu_type: V100}]\n", "line 1, column 23"),
        (
            "--cluster",
            "node_groups:\n- {count: 1, gpus_per_node: 4, gpu_type: V100}\ngpu_speed: {V100: NUMBER}\n",
            "line 3, column 19",
        ),
        ("--config", "teams:\n  a:\n    quotas:\n      V100: {nominal: NUMBER}\n", "line 4, column 23"),
    ],
)
def test_a_yaml_whole_number_of_thousands_of_digits_names_its_line(
    tmp_path: Path, cluster: Path, option: str, text: str, where: str
) -> None:
    path = tmp_path / "big.yaml"
    path.write_text(text.replace("NUMBER", "1" * 5000))
    files = {"--cluster": cluster} | {option: path}
    trace = tmp_path / "trace.csv"
    trace.write_text(HEADER + "a,0,10,1,,,,\n")
    code, out = run(
        "--trace", trace, "--cluster", files["--cluster"], *(["--config", path] if option == "--config" else [])
    )
    assert code == 2, out
    assert f"{option}: {path} is not valid YAML at {where}: a whole number of 5,000 digits" in out


@pytest.mark.parametrize("value", ["abc", "1_0", "\u0663", "1.5"])
def test_max_gpus_reports_a_bad_value_as_limit_does(tmp_path: Path, cluster: Path, value: str) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text(HEADER + "a,0,10,1,,,,\n")
    said = {}
    for option in ("--limit", "--max-gpus"):
        args = ["sim", "plan", "--target-p95-wait", "1m", "--trace", str(trace), "--cluster", str(cluster)]
        result = CliRunner().invoke(cli, [*args, option, value])
        assert result.exit_code == 2, result.output
        said[option] = " ".join(result.output.split()).replace(option, "OPTION")
    assert said["--max-gpus"] == said["--limit"]
    assert f"{value!r} is not a whole number written with the digits 0-9" in said["--max-gpus"]


@pytest.mark.parametrize(("row", "fields"), [("b,0,10\n", 3), ("b\n", 1)])
def test_a_row_with_fewer_fields_than_the_header_says_so(tmp_path: Path, cluster: Path, row: str, fields: int) -> None:
    code, out = sim_rows(tmp_path, cluster, "a,0,10,1,,,,\n" + row)
    assert code == 2, out
    assert f"line 3: {fields} field{'s' if fields > 1 else ''}, but the header names 8 columns: no field for" in out
    assert "num_gpus" in out and "must be a number" not in out


def test_a_short_row_with_every_needed_field_is_read(tmp_path: Path, cluster: Path) -> None:
    code, out = sim_rows(tmp_path, cluster, "a,0,10,1\nb,0,10,2,V100\n", "-o", "json")
    assert code == 0, out
    assert json.loads(out)["policies"]["default"]["jobs"] == 2


def test_a_byte_order_mark_at_a_later_line_is_dropped_as_a_leading_one(tmp_path: Path, cluster: Path) -> None:
    trace = tmp_path / "two.csv"
    trace.write_bytes(("\ufeff" + HEADER + "a,0,10,1,,,,\n\ufeffb,0,10,1,,,,\n").encode("utf-8"))
    out_dir = tmp_path / "out"
    code, out = run("--trace", trace, "--cluster", cluster, "--out", out_dir)
    assert code == 0, out
    ids = [line.split(",")[0] for line in (out_dir / "jobs-default.csv").read_text().splitlines()[1:]]
    assert ids == ["a", "b"]
