"""One trace row's fields, each read and checked: GPUs, GPU types, job id, times; errors name the line."""

from __future__ import annotations

import math
from collections.abc import Mapping

from corral.spec.resources import MIN_GPU_FRACTION
from corral.spec.wording import shown

MAX_SECONDS = 100 * 365 * 86_400
"""The largest time a trace may give (submit time after ``--scale-load``, duration, checkpoint interval,
time limit): 100 years, 3,153,600,000 s, which keeps the simulated clock within what dates can hold."""

MILLI = 1000
"""``gpu_milli`` of a whole GPU."""

GPUS_VALID = (
    f"a whole number, 0 or more (0 = CPU-only), or a fraction of one GPU from {MIN_GPU_FRACTION} to below 1"
    " (such as 0.5 or 0.25: fractions share a GPU)"
)
"""What ``num_gpus`` may be: what a job submitted to the head may ask for (``corral.spec.ResourcesSpec.gpus``)."""


class TraceError(ValueError):
    """A trace file that does not follow the common schema; the message names the line."""


Row = Mapping[str, str | None]


def gpus(row: Row, line: int, source: str) -> float:
    """GPUs the job asks for: a whole number (an ``int``), or a fraction of one GPU below 1 that shares it,
    given by ``num_gpus`` or, when the row has one, by ``gpu_milli`` below 1000 (thousandths of one GPU)."""
    value = number(row, "num_gpus", line, source)
    whole = value.is_integer()
    if value < 0 or (value >= 1 and not whole) or 0 < value < MIN_GPU_FRACTION:
        text = (row.get("num_gpus") or "").strip()
        raise TraceError(f"{source}, line {line}: num_gpus must be {GPUS_VALID}, got {shown(text)}")
    if (row.get("gpu_milli") or "").strip():
        return _milli(row, value, line, source)
    return int(value) if whole else value


def _milli(row: Row, num_gpus: float, line: int, source: str) -> float:
    """``num_gpus`` as ``gpu_milli`` qualifies it: 1000 (or any value for a CPU-only row) leaves it as it is;
    from 10 to 999 with ``num_gpus`` 1, the job asks for that many thousandths of one GPU."""
    milli = number(row, "gpu_milli", line, source)
    text = (row.get("gpu_milli") or "").strip()
    least = round(MIN_GPU_FRACTION * MILLI)
    if not (milli.is_integer() and 0 <= milli <= MILLI):
        raise TraceError(
            f"{source}, line {line}: gpu_milli must be a whole number from 0 to {MILLI} (thousandths of one GPU;"
            f" empty = whole GPUs), got {shown(text)}"
        )
    if num_gpus == 0 or milli == MILLI:
        return int(num_gpus) if num_gpus.is_integer() else num_gpus
    if num_gpus != 1:
        given = (row.get("num_gpus") or "").strip()
        raise TraceError(
            f"{source}, line {line}: gpu_milli {text} (below {MILLI}) shares one GPU, so num_gpus must be 1,"
            f" got {shown(given)}"
        )
    if milli < least:
        raise TraceError(
            f"{source}, line {line}: gpu_milli must be from {least} to {MILLI} on a row with GPUs ({MILLI} = whole"
            f" GPUs; empty = num_gpus alone), got {shown(text)}"
        )
    return milli / MILLI


def gpu_types(row: Row, line: int, source: str) -> tuple[str, ...]:
    """Acceptable GPU types, ``|``-separated; empty means any type, but an empty name among others is an error."""
    text = (row.get("gpu_type") or "").strip()
    if not text:
        return ()
    names = [name.strip() for name in text.split("|")]
    if not all(names):
        raise TraceError(
            f"{source}, line {line}: gpu_type has an empty type name in {shown(text)}; separate names with |, as in"
            " V100|P100, or leave gpu_type empty for any type"
        )
    return tuple(dict.fromkeys(names))


def job_id(row: Row, line: int, seen: dict[str, int], source: str) -> str:
    """The row's job_id, or ``line-N`` when it has none; a repeat names the line it repeats."""
    given = (row.get("job_id") or "").strip()
    name = given or f"line-{line}"
    where = f"{source}, line {line}"
    if given and given in seen:
        raise TraceError(
            f"{where}: job_id {shown(given)} is already the job on line {seen[given]}; every job_id must be unique"
        )
    if not given and name in seen:
        raise TraceError(
            f"{where}: job_id is empty, and its name {shown(name)} is already the job on line {seen[name]}"
        )
    seen[name] = line
    return name


def checkpoint(row: Row, line: int, source: str) -> float | None:
    if not (row.get("checkpoint_interval_s") or "").strip():
        return None
    return seconds(row, "checkpoint_interval_s", line, source)


def time_limit(row: Row, line: int, source: str) -> float | None:
    if not (row.get("time_limit_s") or "").strip():
        return None
    limit = seconds(row, "time_limit_s", line, source)
    if not limit > 0:
        text = (row.get("time_limit_s") or "").strip()
        raise TraceError(
            f"{source}, line {line}: time_limit_s must be above 0 (empty = no time limit), got {shown(text)}"
        )
    return limit


def seconds(row: Row, column: str, line: int, source: str, *, signed: bool = False) -> float:
    """A time in seconds: 0 or more unless ``signed``, and at most ``MAX_SECONDS`` either way."""
    value = number(row, column, line, source)
    text = (row.get(column) or "").strip()
    if value < 0 and not signed:
        above = " (empty = no time limit)" if column == "time_limit_s" else ""
        wanted = "above 0" if column == "time_limit_s" else "0 or more"
        raise TraceError(f"{source}, line {line}: {column} must be {wanted}{above}, got {shown(text)}")
    if abs(value) > MAX_SECONDS:
        raise TraceError(
            f"{source}, line {line}: {column} {shown(text)} is beyond the limit of {MAX_SECONDS} s (100 years)"
        )
    return value


def plain_float(text: str) -> float:
    """A number as people and CSV writers write it: ``float()`` less Python's own ``1_000`` and the digits of
    other scripts (``٥``, ``５``), which ``float()`` takes too."""
    if "_" in text or not text.isascii():
        raise ValueError(f"could not convert string to float: {text!r}")
    return float(text)


def number(row: Row, column: str, line: int, source: str) -> float:
    text = (row.get(column) or "").strip()
    try:
        value = plain_float(text)
    except ValueError:
        raise TraceError(f"{source}, line {line}: {column} must be a number, got {shown(text)}") from None
    if not math.isfinite(value):
        raise TraceError(f"{source}, line {line}: {column} must be a finite number, got {shown(text)}")
    return value
