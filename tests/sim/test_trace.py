"""Trace reading: every shared trace loads; window, limit and scale-load; skipped rows are counted."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from corral.sim import NEVER_RAN, NO_GPUS, TraceError, load_trace, parse_window, read_trace

TRACES = Path(__file__).resolve().parents[3] / "shared" / "traces"
needs_traces = pytest.mark.skipif(not TRACES.is_dir(), reason=f"trace directory {TRACES} is not present")
TRACE_FILES = sorted(TRACES.glob("*.csv")) if TRACES.is_dir() else []


def row(job_id: str, submit: int, duration: str = "100", gpus: str = "1", gpu_type: str = "") -> dict[str, str]:
    return {
        "job_id": job_id,
        "submit_time_s": str(submit),
        "duration_s": duration,
        "num_gpus": gpus,
        "gpu_type": gpu_type,
        "user": "",
        "vc": "vc1",
        "status": "",
    }


ROWS = [row("a", 0), row("b", 10, duration=""), row("c", 20, gpus="0"), row("d", 30, gpus="4"), row("e", 40)]


@needs_traces
@pytest.mark.parametrize("path", TRACE_FILES, ids=lambda p: p.name)
def test_every_shared_trace_loads(path: Path) -> None:
    trace = read_trace(path, limit=2000)
    assert len(trace.jobs) + trace.skipped_total == 2000
    assert trace.jobs
    assert all(j.gpus >= 1 and j.duration_s >= 0 for j in trace.jobs)
    assert [j.submit_s for j in trace.jobs] == sorted(j.submit_s for j in trace.jobs)


@needs_traces
def test_alibaba_skips_pods_that_never_ran_and_cpu_only_pods() -> None:
    trace = read_trace(TRACES / "alibaba_openb_2023_gpuspec33.csv")
    assert trace.skipped == {NO_GPUS: 1052, NEVER_RAN: 897}
    assert len(trace.jobs) + trace.skipped_total == 8152
    assert any(j.gpu_types == ("V100M16", "V100M32") for j in trace.jobs)


@needs_traces
def test_philly_window_has_the_documented_job_count() -> None:
    trace = read_trace(TRACES / "philly_pollux_2017-10-02_7d.csv", window=(0, 43200))
    assert len(trace.jobs) == 1167
    assert trace.skipped_total == 0


def test_rows_without_duration_or_gpus_are_skipped_and_counted() -> None:
    trace = load_trace(ROWS)
    assert [j.id for j in trace.jobs] == ["a", "d", "e"]
    assert trace.skipped == {NEVER_RAN: 1, NO_GPUS: 1}
    assert trace.skipped_total == 2
    assert trace.jobs[1].gpus == 4
    assert trace.jobs[0].vc == "vc1"


def test_window_is_half_open() -> None:
    trace = load_trace(ROWS, window=(10, 40))
    assert [j.id for j in trace.jobs] == ["d"]
    assert trace.skipped_total == 2


def test_limit_counts_rows_in_the_window_skipped_ones_included() -> None:
    trace = load_trace(ROWS, limit=3)
    assert [j.id for j in trace.jobs] == ["a"]
    assert trace.skipped_total == 2
    assert load_trace(ROWS, window=(30, math.inf), limit=1).jobs[0].id == "d"
    assert load_trace(ROWS, limit=0).jobs == ()


def test_scale_load_makes_jobs_arrive_faster() -> None:
    trace = load_trace(ROWS, scale_load=10)
    assert [j.submit_s for j in trace.jobs] == [0.0, 3.0, 4.0]
    assert [j.duration_s for j in trace.jobs] == [100.0, 100.0, 100.0]


def test_gpu_type_alternatives_are_split_and_deduplicated() -> None:
    trace = load_trace([row("a", 0, gpu_type="V100M16|V100M32|V100M32")])
    assert trace.jobs[0].gpu_types == ("V100M16", "V100M32")


def test_bad_numbers_name_the_line_and_column() -> None:
    with pytest.raises(TraceError, match=r"line 3: num_gpus must be a number"):
        load_trace([row("a", 0), row("b", 1, gpus="many")])


def test_python_number_syntax_is_not_a_number() -> None:
    with pytest.raises(TraceError, match=r"line 2: duration_s must be a number, got '1_000'"):
        load_trace([row("a", 0, duration="1_000")])


@pytest.mark.parametrize("digits", ["\u0665", "\uff15"])  # Arabic-Indic and full-width 5: float() takes both
def test_digits_of_other_scripts_are_not_a_number(digits: str) -> None:
    with pytest.raises(TraceError, match=r"line 2: duration_s must be a number"):
        load_trace([row("a", 0, duration=digits)])


def test_a_column_given_twice_in_the_header_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("job_id,submit_time_s,duration_s,num_gpus,num_gpus\na,0,100,1,2\n")
    with pytest.raises(TraceError, match=r"line 1: column num_gpus is given twice in the header"):
        read_trace(path)


def test_missing_columns_are_named(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("job_id,submit_time_s\na,0\n")
    with pytest.raises(TraceError, match=r"missing column.*duration_s, num_gpus"):
        read_trace(path)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0:43200", (0.0, 43200.0)), (":100", (-math.inf, 100.0)), ("5:", (5.0, math.inf))],
)
def test_parse_window(text: str, expected: tuple[float, float]) -> None:
    assert parse_window(text) == expected


@pytest.mark.parametrize("text", ["100", "a:b", "10:5"])
def test_parse_window_rejects_bad_text(text: str) -> None:
    with pytest.raises(ValueError, match=r"window|START:END"):
        parse_window(text)


def test_options_are_checked() -> None:
    with pytest.raises(ValueError, match="scale-load"):
        load_trace(ROWS, scale_load=0)
    with pytest.raises(ValueError, match="limit"):
        load_trace(ROWS, limit=-1)
