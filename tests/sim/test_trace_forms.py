"""Trace files as people and spreadsheets write them: spaces, quotes, CRLF, blank lines; and header mistakes
that exit 2 naming the column, with the valid ones listed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from corral.cli.main import cli
from corral.sim import TraceError, read_trace

HEADER = "job_id,submit_time_s,duration_s,num_gpus,gpu_type,user,vc,status\n"
VALID = "job_id, submit_time_s, duration_s, num_gpus (required) and gpu_type, user, vc, status, checkpoint_interval_s"


def write(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "trace.csv"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, newline="")
    return path


def refused(tmp_path: Path, text: str | bytes) -> str:
    with pytest.raises(TraceError) as caught:
        read_trace(write(tmp_path, text))
    return str(caught.value)


@pytest.mark.parametrize(
    "header",
    [
        "job_id, submit_time_s, duration_s, num_gpus, gpu_type, user, vc, status\n",
        "  job_id ,submit_time_s  ,\tduration_s,num_gpus , gpu_type,user,vc,status  \n",
        '"job_id", "submit_time_s", "duration_s", "num_gpus", "gpu_type", "user", "vc", "status"\n',
    ],
)
def test_spaces_around_header_names_are_dropped_as_in_rows(tmp_path: Path, header: str) -> None:
    trace = read_trace(write(tmp_path, header + "a, 0, 10, 2, V100, u, team, ok\n"))
    (job,) = trace.jobs
    assert (job.id, job.submit_s, job.duration_s, job.gpus, job.gpu_types, job.vc) == ("a", 0, 10, 2, ("V100",), "team")


def test_a_quoted_field_after_a_space_is_read_whole(tmp_path: Path) -> None:
    trace = read_trace(write(tmp_path, HEADER + 'a, "0", "10", "1", "V100|T4", , "x, y", \n'))
    (job,) = trace.jobs
    assert (job.submit_s, job.gpu_types, job.vc) == (0, ("V100", "T4"), "x, y")


def test_crlf_blank_lines_and_lines_of_commas_are_read(tmp_path: Path) -> None:
    text = "\r\n" + HEADER.replace("\n", "\r\n") + "a,0,10,1,,,,\r\n\r\n,,,,,,,\r\nb,5,10,1,,,,\r\n\r\n\r\n"
    trace = read_trace(write(tmp_path, text))
    assert [j.id for j in trace.jobs] == ["a", "b"] and trace.skipped_total == 0


@pytest.mark.parametrize(
    ("rows", "line"),
    [
        ("a,0,10,1,,,,\n\n\nb,x,10,1,,,,\n", 5),  # after blank lines
        ('"a\nb",0,10,1,,,,\nc,x,10,1,,,,\n', 4),  # after a field over two lines
    ],
)
def test_a_message_names_the_line_the_row_is_on_in_the_file(tmp_path: Path, rows: str, line: int) -> None:
    assert f"line {line}: submit_time_s must be a number, got 'x'" in refused(tmp_path, HEADER + rows)


def test_a_repeated_job_id_after_blank_lines_names_both_lines(tmp_path: Path) -> None:
    message = refused(tmp_path, HEADER + "\na,0,10,1,,,,\n\na,1,10,1,,,,\n")
    assert "line 5: job_id 'a' is already the job on line 3" in message


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("job_id,submit_time_s,duration_s,num_gpu\n", "unknown column 'num_gpu' (did you mean num_gpus?)"),
        ("job_id,submit_time_s,duration_s, NUM_GPUS \n", "unknown column 'NUM_GPUS' (did you mean num_gpus?)"),
        ("job_id;submit_time_s;duration_s;num_gpus\n", "(it looks like several names: separate them with commas)"),
    ],
)
def test_a_missing_column_names_the_unknown_ones_it_may_be(tmp_path: Path, header: str, expected: str) -> None:
    message = refused(tmp_path, header + "a,0,10,1\n")
    assert "line 1: missing column" in message and expected in message
    assert VALID in message


@pytest.mark.parametrize(
    ("header", "ignored"),
    [
        ("job_id,submit_time_s,duration_s,num_gpus,gpu_typ\n", ("'gpu_typ' (did you mean gpu_type?)",)),
        ("job_id,submit_time_s,duration_s,num_gpus,notes,x\n", ("'notes'", "'x'")),
        (",job_id,submit_time_s,duration_s,num_gpus,x\n", ("column 1 (no name)", "'x'")),  # pandas' index
    ],
)
def test_columns_not_read_are_named_and_their_fields_left_alone(
    tmp_path: Path, header: str, ignored: tuple[str, ...]
) -> None:
    fields = "7,a,0,10,1,T4\n" if header.startswith(",") else "a,0,10,1,T4,\n"
    trace = read_trace(write(tmp_path, header + fields))
    assert [(j.id, j.duration_s, j.gpus, j.gpu_types) for j in trace.jobs] == [("a", 10.0, 1, ())]
    assert trace.ignored_columns == ignored


def test_a_missing_column_is_named_with_the_valid_ones(tmp_path: Path) -> None:
    message = refused(tmp_path, "job_id, submit_time_s\na,0\n")
    assert "line 1: missing columns duration_s, num_gpus" in message and VALID in message


def test_a_column_without_a_name_is_not_read_and_a_trailing_comma_is_no_column(tmp_path: Path) -> None:
    trace = read_trace(write(tmp_path, "job_id,submit_time_s,,duration_s,num_gpus\na,0,9,10,1\n"))
    assert [(j.id, j.duration_s) for j in trace.jobs] == [("a", 10.0)]
    assert trace.ignored_columns == ("column 3 (no name)",)
    trace = read_trace(write(tmp_path, "job_id,submit_time_s,duration_s,num_gpus, ,\na,0,10,1,,\n"))
    assert [j.id for j in trace.jobs] == ["a"] and trace.ignored_columns == ()


def test_a_field_under_a_trailing_unnamed_column_is_not_dropped(tmp_path: Path) -> None:
    message = refused(tmp_path, "job_id,submit_time_s,duration_s,num_gpus,\na,0,10,1,V100\n")
    assert "line 2: 5 fields, but the header names 4 columns" in message


def test_a_header_after_blank_lines_is_found_and_named_by_its_line(tmp_path: Path) -> None:
    assert [j.id for j in read_trace(write(tmp_path, "\n\n" + HEADER + "a,0,10,1,,,,\n")).jobs] == ["a"]
    assert "line 3: column job_id is given twice" in refused(tmp_path, "\n\njob_id,job_id\n")


def test_an_empty_file_says_a_header_is_needed(tmp_path: Path) -> None:
    message = refused(tmp_path, "\n\n")
    assert "the file is empty; its first line must be the header, naming the columns job_id," in message


def test_a_quote_never_closed_names_the_line_it_opens_on(tmp_path: Path) -> None:
    message = refused(tmp_path, HEADER + 'a,0,10,1,,,,\n"b,0,10,1,,,,\nc,0,10,1,,,,\n')
    assert "line 3: not a readable CSV row" in message and "a quoted field is never closed" in message


def test_text_after_a_closing_quote_is_refused_naming_the_line(tmp_path: Path) -> None:
    message = refused(tmp_path, HEADER + 'a,0,10,1,,,,\n"b" ,0,10,1,,,,\n')
    assert "line 3: not a readable CSV row" in message and "nothing, not even a space, may follow it" in message


def test_a_nul_character_is_refused_naming_the_line(tmp_path: Path) -> None:
    assert "line 2: a NUL character" in refused(tmp_path, (HEADER + "\0a,0,10,1,,,,\n").encode())
    utf16 = (HEADER + "a,0,10,1,,,,\n").encode("utf-16-le")  # no byte order mark: decodes as UTF-8
    assert "line 1: a NUL character" in refused(tmp_path, utf16)


def simulated(tmp_path: Path, trace: Path):
    """``corral sim -o json`` of the trace on one node with one V100."""
    cluster = tmp_path / "c.yaml"
    cluster.write_text("node_groups: [{count: 1, gpus_per_node: 1, gpu_type: V100}]\n")
    result = CliRunner().invoke(cli, ["sim", "--trace", str(trace), "--cluster", str(cluster), "-o", "json"])
    assert result.exit_code == 0, result.output
    return result


def test_header_spaces_through_the_command(tmp_path: Path) -> None:
    result = simulated(tmp_path, write(tmp_path, "job_id, submit_time_s, duration_s, num_gpus\na, 0, 10, 1\n"))
    assert json.loads(result.stdout)["policies"]["default"]["jobs"] == 1


def test_a_misspelled_column_is_named_on_stderr_and_its_fields_not_read(tmp_path: Path) -> None:
    result = simulated(tmp_path, write(tmp_path, "job_id,submit_time_s,duration_s,num_gpus,gpu_typ\na,0,10,1,T4\n"))
    assert "column 'gpu_typ' (did you mean gpu_type?) not read" in result.stderr
    assert json.loads(result.stdout)["policies"]["default"]["jobs"] == 1  # T4 was not read: it ran on the V100


def test_a_column_without_a_name_is_named_once_on_stderr(tmp_path: Path) -> None:
    result = simulated(tmp_path, write(tmp_path, ",job_id,submit_time_s,duration_s,num_gpus\n0,a,0,10,1\n"))
    assert "trace.csv: column 1 (no name) not read;" in result.stderr
    assert "column column" not in result.stderr
    result = simulated(tmp_path, write(tmp_path, ",job_id,submit_time_s,duration_s,num_gpus,x\n0,a,0,10,1,\n"))
    assert "trace.csv: columns 1 (no name), 'x' not read;" in result.stderr


@pytest.mark.parametrize("column", ["submit_time_s", "duration_s", "num_gpus", "job_id"])
def test_a_long_bad_field_is_named_by_its_start_and_length(tmp_path: Path, column: str) -> None:
    """A field the size of a file (a quote left open, a column pasted in) is not repeated in full."""
    fields = {"job_id": "a", "submit_time_s": "0", "duration_s": "10", "num_gpus": "1"}
    fields[column] = "x" * 5_000
    rows = f"{fields['job_id']},{fields['submit_time_s']},{fields['duration_s']},{fields['num_gpus']},,,,\n"
    if column == "job_id":
        rows += rows  # the same long id twice
    message = refused(tmp_path, HEADER + rows)
    assert f"'{'x' * 60}'… (5,000 characters)" in message
    assert len(message) < 400
