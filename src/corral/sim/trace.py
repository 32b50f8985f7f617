"""Trace readers: the common CSV schema of GPU-cluster job traces, into frozen records."""

from __future__ import annotations

import csv
import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

COLUMNS = ("job_id", "submit_time_s", "duration_s", "num_gpus", "gpu_type", "user", "vc", "status")
OPTIONAL_COLUMNS = ("checkpoint_interval_s", "time_limit_s")  # read when present: a job's own values
REQUIRED_COLUMNS = ("job_id", "submit_time_s", "duration_s", "num_gpus")

NEVER_RAN = "never ran (no duration)"
NO_GPUS = "CPU-only (0 GPUs)"


class TraceError(ValueError):
    """A trace file that does not follow the common schema; the message names the line."""


@dataclass(frozen=True, slots=True)
class TraceJob:
    """One traced job: when it was submitted, how long it ran, and what it asked for."""

    id: str
    submit_s: float
    duration_s: float
    gpus: int
    gpu_types: tuple[str, ...] = ()  # acceptable types; empty = any
    user: str = ""
    vc: str = ""
    checkpoint_s: float | None = None  # seconds between its checkpoints; None = the simulation's default
    time_limit_s: float | None = None  # the time limit it was submitted with, as the scheduler sees it; None = none


@dataclass(frozen=True)
class Trace:
    """The jobs to replay, in submit order, and how many rows were skipped, by reason."""

    jobs: tuple[TraceJob, ...]
    skipped: Mapping[str, int] = field(default_factory=dict)

    @property
    def skipped_total(self) -> int:
        return sum(self.skipped.values())


def parse_window(text: str) -> tuple[float, float]:
    """``START:END`` in seconds (either side may be empty) into a half-open interval."""
    start_text, sep, end_text = text.partition(":")
    if not sep:
        raise ValueError(f"expected START:END in seconds, such as 0:43200, got {text!r}")
    try:
        start = float(start_text) if start_text.strip() else -math.inf
        end = float(end_text) if end_text.strip() else math.inf
    except ValueError:
        raise ValueError(f"expected START:END in seconds, such as 0:43200, got {text!r}") from None
    if start >= end:
        raise ValueError(f"window start must be below its end, got {text!r}")
    return start, end


def read_trace(
    path: Path | str,
    *,
    limit: int | None = None,
    window: tuple[float, float] | None = None,
    scale_load: float = 1.0,
) -> Trace:
    """Read a trace CSV file; see ``load_trace`` for the options."""
    with Path(path).open(newline="") as stream:
        reader = csv.DictReader(stream)
        missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or ())]
        if missing:
            raise TraceError(f"{path}: missing column(s) {', '.join(missing)}; expected {', '.join(COLUMNS)}")
        return load_trace(reader, limit=limit, window=window, scale_load=scale_load, source=str(path))


def load_trace(
    rows: Iterable[Mapping[str, str | None]],
    *,
    limit: int | None = None,
    window: tuple[float, float] | None = None,
    scale_load: float = 1.0,
    source: str = "trace",
) -> Trace:
    """Rows of the common schema into a Trace.

    ``window`` keeps rows with START <= submit_time_s < END; ``limit`` then keeps the first
    N of those rows (skipped ones included); ``scale_load`` divides every submit time, so
    jobs arrive that many times faster. Rows that never ran or ask for no GPUs are skipped.
    """
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be 0 or more, got {limit}")
    if not scale_load > 0:
        raise ValueError(f"scale-load must be above 0, got {scale_load}")
    start, end = window if window is not None else (-math.inf, math.inf)
    jobs: list[TraceJob] = []
    skipped: Counter[str] = Counter()
    taken = 0
    for line, row in enumerate(rows, start=2):
        if limit is not None and taken >= limit:
            break
        submit = _number(row, "submit_time_s", line, source)
        if not start <= submit < end:
            continue
        taken += 1
        duration_text = (row.get("duration_s") or "").strip()
        gpus = _number(row, "num_gpus", line, source)
        if not duration_text:
            skipped[NEVER_RAN] += 1
            continue
        duration = _number(row, "duration_s", line, source)
        if gpus <= 0:
            skipped[NO_GPUS] += 1
            continue
        if not float(gpus).is_integer() or duration < 0:
            raise TraceError(f"{source}, line {line}: num_gpus must be a whole number and duration_s 0 or more")
        types = tuple(dict.fromkeys(t.strip() for t in (row.get("gpu_type") or "").split("|") if t.strip()))
        jobs.append(
            TraceJob(
                id=(row.get("job_id") or "").strip() or f"line-{line}",
                submit_s=submit / scale_load,
                duration_s=duration,
                gpus=int(gpus),
                gpu_types=types,
                user=(row.get("user") or "").strip(),
                vc=(row.get("vc") or "").strip(),
                checkpoint_s=_checkpoint(row, line, source),
                time_limit_s=_time_limit(row, line, source),
            )
        )
    jobs.sort(key=lambda j: j.submit_s)  # stable: ties keep file order
    return Trace(jobs=tuple(jobs), skipped=dict(sorted(skipped.items())))


def _checkpoint(row: Mapping[str, str | None], line: int, source: str) -> float | None:
    if not (row.get("checkpoint_interval_s") or "").strip():
        return None
    interval = _number(row, "checkpoint_interval_s", line, source)
    if interval < 0:
        raise TraceError(f"{source}, line {line}: checkpoint_interval_s must be 0 or more (0 = no work lost)")
    return interval


def _time_limit(row: Mapping[str, str | None], line: int, source: str) -> float | None:
    if not (row.get("time_limit_s") or "").strip():
        return None
    limit = _number(row, "time_limit_s", line, source)
    if not limit > 0:
        raise TraceError(f"{source}, line {line}: time_limit_s must be above 0 (empty = no time limit)")
    return limit


def _number(row: Mapping[str, str | None], column: str, line: int, source: str) -> float:
    text = (row.get(column) or "").strip()
    try:
        return float(text)
    except ValueError:
        raise TraceError(f"{source}, line {line}: {column} must be a number, got {text!r}") from None
