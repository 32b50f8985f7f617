"""`corral acct`: GPU time, cost and energy per user, team, GPU type or job over a period."""

from __future__ import annotations

import csv
import re
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import click

from corral.cli.context import api
from corral.cli.render import emit_json, figure, table
from corral.client.errors import InvalidRequest

KEYS = ("user", "team", "gpu-type", "job")
CSV_FIELDS = ("key", "jobs", "gpu_seconds", "gpu_hours", "cost", "energy_kwh")
WHEN_HELP = "a duration such as 7d, 12h, 30m or 1h30m (that long ago), or a UTC date/time such as 2025-01-31T08:00"
_AGO_RE = re.compile(r"^([0-9]+(?:\.[0-9]+)?)([smhdw])$")
_UNITS_RE = re.compile(r"^(?:[0-9]+(?:\.[0-9]+)?[smhdw])+$")  # several units, as in 1h30m or 1w2d
_PART_RE = re.compile(r"([0-9]+(?:\.[0-9]+)?)([smhdw])")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_UNIT_NAMES = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_when(option: str, value: str | None, now: datetime) -> str | None:
    """An ISO time for the head, from ``7d`` (ago) or a date/time; a clear error otherwise."""
    if value is None:
        return None
    text = value.strip().lower()
    match = _AGO_RE.match(text)
    if match or _UNITS_RE.match(text):
        try:
            seconds = float(match.group(1)) * _UNIT_S[match.group(2)] if match else _compound_s(option, value)
            return (now - timedelta(seconds=seconds)).isoformat()
        except (OverflowError, ValueError):  # before year 1
            raise InvalidRequest(f"{option}: {value!r} reaches back before the year 1; give a shorter time") from None
    try:
        when = datetime.fromisoformat(value.strip())
    except ValueError:
        raise InvalidRequest(f"{option}: expected {WHEN_HELP}, got {value!r}") from None
    try:
        return (when.astimezone(UTC) if when.tzinfo else when.replace(tzinfo=UTC)).isoformat()
    except OverflowError:  # a zone's offset takes it past year 1 or 9999
        raise InvalidRequest(f"{option}: {value!r} is not between 0001-01-01 and 9999-12-31 in UTC") from None


def _compound_s(option: str, value: str) -> float:
    """``1h30m``, ``1w2d``: units from the largest down, each once, a part after the first below the unit
    above it (days below 7, hours below 24, minutes and seconds below 60), as a time limit reads them;
    as long a time as one unit alone may give (``4000d1h`` as ``4000d``)."""
    seconds, previous = 0.0, ""
    for number, unit in _PART_RE.findall(value.strip().lower()):
        size = _UNIT_S[unit]
        if previous and size >= _UNIT_S[previous]:
            order = "units must go from the largest down, each once (as in 1h30m or 1w2d)"
            raise InvalidRequest(f"{option}: {order}, got {value!r}")
        if previous and float(number) * size >= _UNIT_S[previous]:
            below = f"{_UNIT_NAMES[unit]} must be below {_UNIT_S[previous] // size} after {_UNIT_NAMES[previous]}"
            raise InvalidRequest(f"{option}: {below}, got {value!r}")
        seconds, previous = seconds + float(number) * size, unit
    return seconds


def check_period(since: str | None, until: str | None, given: tuple[str | None, str | None], now: datetime) -> None:
    """A period that ends before it starts is refused here, naming both ends as given and as read."""
    if since is None:
        return
    start, end = datetime.fromisoformat(since), datetime.fromisoformat(until) if until else now
    if start < end:
        return
    ends = f"--until {given[1]!r} ({until})" if until else f"--until (now, {now.isoformat()})"
    raise InvalidRequest(f"--since {given[0]!r} ({since}) must be before {ends}")


@click.command()
@click.option("--by", type=click.Choice(KEYS), default="user", show_default=True, help="what each row adds up")
@click.option("--since", help=f"start of the period: {WHEN_HELP} (default: all time)")
@click.option("--until", help="end of the period, in the same forms (default: now)")
@click.option(
    "-o",
    "--output",
    type=click.Choice(["table", "json", "csv"]),
    default="table",
    show_default=True,
    help="table for people; json (the whole report) or csv (one row per key, plain decimals) for scripts",
)
def acct(by: str, since: str | None, until: str | None, output: str) -> None:
    """Usage over a period: GPU-hours, cost and energy per user, team, GPU type or job.

    Every attempt of a job counts (requeued and preempted ones too); a running job counts up to
    now. Cost uses the head's --gpu-prices; energy is the GPUs' integrated power draw. Users see
    their own jobs; admins see everyone's.
    """
    now = datetime.now(UTC)
    start, end = parse_when("--since", since, now), parse_when("--until", until, now)
    check_period(start, end, (since, until), now)
    report = api().usage(by=by, since=start, until=end)
    if output == "json":
        emit_json(report)
    elif output == "csv":
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(CSV_FIELDS)
        for row in report["rows"]:
            writer.writerow([_cell(row[f]) for f in CSV_FIELDS])
    else:
        _table(report)


def _cell(value: Any) -> Any:
    """A figure as a plain decimal (``0.000028``, never ``2.8e-05``); the key and the job count as they are."""
    from corral.sched.describe import plain_decimal  # the scheduler's package: only when needed

    return plain_decimal(value) if isinstance(value, float) else value


def _table(report: dict[str, Any]) -> None:
    period = f"{report.get('since') or 'the beginning'} → {report['until']}"
    rows = [*report["rows"], report["total"]]
    table(
        f"usage by {report['by']}, {period}",
        [report["by"].upper().replace("-", " "), "JOBS", "GPU-HOURS", "COST", "ENERGY (kWh)"],
        [[r["key"], r["jobs"], figure(r["gpu_hours"]), figure(r["cost"]), figure(r["energy_kwh"], 3)] for r in rows],
    )
