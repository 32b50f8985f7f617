"""Trace readers: the common CSV schema of GPU-cluster job traces, into frozen records."""

from __future__ import annotations

import csv
import difflib
import io
import math
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from corral.sim import trace_fields as fields
from corral.sim.trace_fields import MAX_SECONDS, TraceError, plain_float
from corral.spec.wording import shown

__all__ = [  # with what ``trace_fields`` holds that callers import from here
    "COLUMNS",
    "EXTRA_FIELDS",
    "KNOWN_COLUMNS",
    "MAX_SECONDS",
    "NEVER_RAN",
    "NO_GPUS",
    "OPTIONAL_COLUMNS",
    "REQUIRED_COLUMNS",
    "SHORT_FIELDS",
    "Trace",
    "TraceError",
    "TraceJob",
    "header_columns",
    "ignored_column",
    "load_trace",
    "parse_window",
    "plain_float",
    "read_trace",
]

COLUMNS = ("job_id", "submit_time_s", "duration_s", "num_gpus", "gpu_type", "user", "vc", "status")
OPTIONAL_COLUMNS = ("checkpoint_interval_s", "time_limit_s", "gpu_milli")  # read when present: a job's own values
REQUIRED_COLUMNS = ("job_id", "submit_time_s", "duration_s", "num_gpus")
KNOWN_COLUMNS = COLUMNS + OPTIONAL_COLUMNS
EXTRA_FIELDS = "\0extra"  # a row with fields past the header's columns: how many fields it has
SHORT_FIELDS = "\0short"  # a row with fewer fields than the header has columns: how many it has

NEVER_RAN = "never ran (no duration)"
NO_GPUS = "CPU-only (0 GPUs)"


@dataclass(frozen=True, slots=True)
class TraceJob:
    """One traced job: when it was submitted, how long it ran, and what it asked for."""

    id: str
    submit_s: float
    duration_s: float
    gpus: float  # whole GPUs (an int), or a fraction below 1 of one GPU, which it shares
    gpu_types: tuple[str, ...] = ()  # acceptable types; empty = any
    user: str = ""
    vc: str = ""
    checkpoint_s: float | None = None  # seconds between its checkpoints; None = the simulation's default
    time_limit_s: float | None = None  # the time limit it was submitted with, as the scheduler sees it; None = none


@dataclass(frozen=True)
class Trace:
    """The jobs to replay, in submit order, and how many rows were skipped, by reason; also how many
    rows were left out by the window, and their lowest and highest submit time, and the file's columns
    that are not read (each named as ``ignored_column`` says)."""

    jobs: tuple[TraceJob, ...]
    skipped: Mapping[str, int] = field(default_factory=dict)
    outside_window: int = 0
    outside_span: tuple[float, float] | None = None
    ignored_columns: tuple[str, ...] = ()

    @property
    def skipped_total(self) -> int:
        return sum(self.skipped.values())


def parse_window(text: str) -> tuple[float, float]:
    """``START:END`` in seconds (either side may be empty) into a half-open interval."""
    start_text, sep, end_text = text.partition(":")
    if not sep:
        raise ValueError(f"expected START:END in seconds, such as 0:43200, got {shown(text)}")
    try:
        start = plain_float(start_text) if start_text.strip() else -math.inf
        end = plain_float(end_text) if end_text.strip() else math.inf
    except ValueError:
        raise ValueError(f"expected START:END in seconds, such as 0:43200, got {shown(text)}") from None
    for side, value in (("start", start_text), ("end", end_text)):
        if value.strip() and not math.isfinite(float(value)):
            raise ValueError(f"the window's {side} must be a finite number of seconds or empty, got {shown(text)}")
    if start >= end:
        raise ValueError(f"window start must be below its end, got {shown(text)}")
    return start, end


def read_trace(
    path: Path | str,
    *,
    limit: int | None = None,
    window: tuple[float, float] | None = None,
    scale_load: float = 1.0,
) -> Trace:
    """Read a trace CSV file (UTF-8, a byte order mark allowed); see ``load_trace`` for the options.

    Header names and fields may have spaces around them (``job_id, submit_time_s``), a quoted field
    may follow such a space, blank lines are passed over, and every message names the line a row
    starts on in the file."""
    source = str(path)
    rows = _CsvRows(_text(Path(path)), source)
    try:
        rows.read_header()
        trace = _load(iter(rows), limit=limit, window=window, scale_load=scale_load, source=source)
        return replace(trace, ignored_columns=rows.ignored)
    except csv.Error as exc:
        raise TraceError(f"{source}, line {rows.line}: not a readable CSV row ({exc}){_csv_hint(exc)}") from None


def _csv_hint(exc: csv.Error) -> str:
    if "end of data" in str(exc):
        return "; a quoted field is never closed"
    if "expected after" in str(exc):
        return "; a quoted field ends at its closing quote: nothing, not even a space, may follow it before the comma"
    return ""


def _text(path: Path) -> str:
    """The file as text: UTF-8 (a byte order mark dropped), without NUL characters."""
    data = path.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        bad = data[exc.start : exc.start + 1].hex()
        raise TraceError(f"{path}, line {line}: not UTF-8 text (byte 0x{bad}); save the file as UTF-8") from None
    text = text.replace("\n\ufeff", "\n")  # a mark at a line's start, as files put end to end leave: dropped too
    nul = text.find("\0")
    if nul >= 0:
        line = text.count("\n", 0, nul) + 1
        raise TraceError(
            f"{path}, line {line}: a NUL character, which a CSV file does not hold (is it UTF-16, or not text?);"
            " save the file as UTF-8 CSV"
        )
    return text


class _CsvRows:
    """A trace file's rows, each as a mapping of column to field with the line it starts on; rows of
    blank fields only (blank lines, or a spreadsheet's lines of commas) are passed over."""

    def __init__(self, text: str, source: str) -> None:
        self._reader = csv.reader(io.StringIO(text, newline=""), skipinitialspace=True, strict=True)
        self.source = source
        self.line = 1  # where the row being read starts
        self.columns: tuple[str, ...] = ()
        self.ignored: tuple[str, ...] = ()  # the header's columns that are not read

    def _next(self) -> list[str] | None:
        while True:
            self.line = self._reader.line_num + 1
            fields = next(self._reader, None)
            if fields is None or any(f.strip() for f in fields):
                return fields

    def read_header(self) -> None:
        fields = self._next()
        if fields is None:
            raise TraceError(
                f"{self.source}: the file is empty; its first line must be the header, naming the columns"
                f" {', '.join(COLUMNS)}"
            )
        self.columns, self.ignored = header_columns(fields, f"{self.source}, line {self.line}")

    def __iter__(self) -> Iterator[tuple[int, dict[str, str | None]]]:
        width = len(self.columns)
        while (fields := self._next()) is not None:
            row: dict[str, str | None] = dict(zip(self.columns, fields, strict=False))
            row.update(dict.fromkeys(self.columns[len(fields) :]))
            if any(extra.strip() for extra in fields[width:]):
                row[EXTRA_FIELDS] = str(len(fields))
            elif len(fields) < width:
                row[SHORT_FIELDS] = str(len(fields))
            yield self.line, row


def header_columns(fields: Sequence[str], where: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The header's column names, spaces around them dropped (and empty names after the last one, as a
    trailing comma leaves), and the columns not read: unknown names (a converter's extra columns; each
    named as ``ignored_column`` says) and columns without a name (a spreadsheet's or pandas' index). A
    repeated or missing column is a ``TraceError``, which names the unknown columns too."""
    names = [name.strip() for name in fields]
    while names and not names[-1]:
        names.pop()
    twice = sorted({name for name in names if name and names.count(name) > 1})
    if twice:
        verb = "is" if len(twice) == 1 else "are"
        raise TraceError(f"{where}: {_columns_word(twice)} {', '.join(twice)} {verb} given twice in the header")
    ignored = tuple(
        ignored_column(name) if name else f"column {at} (no name)"
        for at, name in enumerate(names, start=1)
        if name not in KNOWN_COLUMNS
    )
    missing = [c for c in REQUIRED_COLUMNS if c not in names]
    if missing:
        unknown = [text for text in ignored if not text.endswith("(no name)")]
        problems = [f"missing {_columns_word(missing)} {', '.join(missing)}"]
        if unknown:
            problems.append(f"unknown {_columns_word(unknown)} {', '.join(unknown)}")
        raise TraceError(
            f"{where}: {'; '.join(problems)}. The columns are {', '.join(REQUIRED_COLUMNS)} (required) and"
            f" {', '.join(c for c in KNOWN_COLUMNS if c not in REQUIRED_COLUMNS)} (optional), separated by commas"
        )
    return tuple(names), ignored


def _columns_word(names: Sequence[str]) -> str:
    return "column" if len(names) == 1 else "columns"


def ignored_column(name: str) -> str:
    """An unknown column's name, with the known one it looks like, or a word on separators when it holds several."""
    text = repr(name)
    if any(sep in name for sep in ";\t|"):
        return text + " (it looks like several names: separate them with commas)"
    close = difflib.get_close_matches(name.lower(), KNOWN_COLUMNS, n=1)
    return text + (f" (did you mean {close[0]}?)" if close else "")


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
    Numbers must be finite and times within ``MAX_SECONDS``; a job_id may appear once (a row without
    one is called ``line-N``). Anything else raises ``TraceError`` naming the line and column.
    """
    return _load(enumerate(rows, start=2), limit=limit, window=window, scale_load=scale_load, source=source)


def _load(
    rows: Iterable[tuple[int, Mapping[str, str | None]]],
    *,
    limit: int | None,
    window: tuple[float, float] | None,
    scale_load: float,
    source: str,
) -> Trace:
    """``load_trace`` on rows that come with their line."""
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be 0 or more, got {limit}")
    if not (scale_load > 0 and math.isfinite(scale_load)):
        raise ValueError(f"scale-load must be a finite number above 0, got {scale_load}")
    start, end = window if window is not None else (-math.inf, math.inf)
    jobs: list[TraceJob] = []
    skipped: Counter[str] = Counter()
    seen: dict[str, int] = {}  # job name -> its line
    outside, low, high = 0, math.inf, -math.inf  # rows outside the window, and their submit times' range
    for line, row in rows:
        if limit is not None and len(seen) >= limit:
            break
        try:
            submit = fields.seconds(row, "submit_time_s", line, source, signed=True)
            if not start <= submit < end:
                outside, low, high = outside + 1, min(low, submit), max(high, submit)
                continue
            _check_width(row, line, source)
            job = _job(row, line, submit, scale_load, fields.job_id(row, line, seen, source), source)
        except TraceError as exc:
            raise _short_row(row, line, source, exc) from None
        if isinstance(job, str):
            skipped[job] += 1
        else:
            jobs.append(job)
    jobs.sort(key=lambda j: j.submit_s)  # stable: ties keep file order
    span = (low, high) if outside else None
    return Trace(jobs=tuple(jobs), skipped=dict(sorted(skipped.items())), outside_window=outside, outside_span=span)


def _job(
    row: Mapping[str, str | None], line: int, submit: float, scale_load: float, job_id: str, source: str
) -> TraceJob | str:
    """The row's job, or why it is skipped."""
    gpus = fields.gpus(row, line, source)
    if not (row.get("duration_s") or "").strip():
        return NEVER_RAN
    duration = fields.seconds(row, "duration_s", line, source)
    if gpus == 0:
        return NO_GPUS
    if abs(submit / scale_load) > MAX_SECONDS:
        raise TraceError(
            f"{source}, line {line}: submit_time_s {submit:g} / --scale-load {scale_load:g} ="
            f" {submit / scale_load:g} s, beyond the limit of {MAX_SECONDS} s (100 years)"
        )
    return TraceJob(
        id=job_id,
        submit_s=submit / scale_load,
        duration_s=duration,
        gpus=gpus,
        gpu_types=fields.gpu_types(row, line, source),
        user=(row.get("user") or "").strip(),
        vc=(row.get("vc") or "").strip(),
        checkpoint_s=fields.checkpoint(row, line, source),
        time_limit_s=fields.time_limit(row, line, source),
    )


def _short_row(row: Mapping[str, str | None], line: int, source: str, exc: TraceError) -> TraceError:
    """A row's error, said as the row's being short where that is why: a column past its last field."""
    given = row.get(SHORT_FIELDS)
    if given is None:
        return exc
    columns = [column for column in row if column != SHORT_FIELDS]
    missing = [column for column in columns[int(given) :] if row.get(column) is None]
    if not any(f"line {line}: {column} " in str(exc) for column in missing):
        return exc
    return TraceError(
        f"{source}, line {line}: {given} {'field' if given == '1' else 'fields'}, but the header names"
        f" {len(columns)} columns: no field for {', '.join(missing)}"
    )


def _check_width(row: Mapping[str, str | None], line: int, source: str) -> None:
    """A row with more fields than the header has columns (empty trailing ones aside) is an error, not data to drop."""
    given = row.get(EXTRA_FIELDS)
    if given:
        columns = len(row) - 1
        raise TraceError(
            f"{source}, line {line}: {given} fields, but the header names {columns}"
            f" {'column' if columns == 1 else 'columns'} (a field with a comma in it needs quotes)"
        )
