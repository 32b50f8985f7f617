"""The energy meter: integrates the GPUs' power readings of every hold and stores the totals.

Readings live in memory (``SampleStore``); what they add up to is kept in one ``usage.energy``
event per task (its ``job_id`` column holds the task id; its ``data`` carries ``job``, ``joules``
and ``through``), rewritten each time the meter runs, so energy survives a restart of the head and
the store holds one row per GPU task, not one per reading.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from corral.head.runtime import HeadRuntime
from corral.head.samples import Reading
from corral.head.services.accounting.figures import JOULES_PER_KWH, Hold, PowerReading, integrate_power
from corral.head.services.accounting.holds import ENERGY_EVENT, energy_events, energy_figures, load_holds
from corral.head.store.tables import EventRow

# Holds that ended longer ago than this are not metered again: their readings are gone from memory.
LOOKBACK = timedelta(hours=1)


@dataclass(frozen=True)
class _Metered:
    hold: Hold
    through: datetime  # what the store said when we read it
    joules: float
    until: datetime


def hold_energy(rt: HeadRuntime, hold: Hold, start: datetime, end: datetime) -> float:
    """Joules the hold's share of its GPUs drew over [start, end], from the readings in memory."""
    if end <= start:
        return 0.0
    max_hold = rt.settings.node_timeout_s
    total = 0.0
    for index in hold.gpus:
        readings = _around(rt.samples.series(hold.node, index), start - timedelta(seconds=max_hold), end)
        total += integrate_power(readings, start, end, max_hold) * hold.fraction
    return total


def _around(series: Sequence[Reading], start: datetime, end: datetime) -> list[PowerReading]:
    lo = bisect.bisect_left(series, start, key=lambda r: r.at)
    hi = bisect.bisect_right(series, end, key=lambda r: r.at)
    return [PowerReading(r.at, r.sample.power_w) for r in series[lo:hi]]


def meter(rt: HeadRuntime) -> int:
    """Store the energy of every hold up to now (or its end); answers how many holds it metered."""
    now = rt.clock.now()
    with rt.read() as session:
        holds = load_holds(session, now - LOOKBACK, now)
    metered = []
    for hold in holds:
        through = hold.metered_through or hold.start
        until = min(hold.end_or(now), now)
        if until > through:
            metered.append(_Metered(hold, through, hold_energy(rt, hold, through, until), until))
    if not metered:
        return 0
    written = 0
    with rt.write() as session:
        rows = energy_events(session, {m.hold.task_id for m in metered})
        for item in metered:
            row = rows.get(item.hold.task_id)
            stored_j, stored_through = energy_figures(row.data) if row is not None else (0.0, None)
            if (stored_through or item.hold.start) != item.through:
                continue  # metered by someone else since we read it
            joules = stored_j + item.joules
            data = _data(item.hold, joules, item.until)
            message = f"task {item.hold.task_id} used {joules / JOULES_PER_KWH:.4f} kWh on {item.hold.node}"
            if row is None:
                hold = item.hold
                session.add(
                    EventRow(ts=now, kind=ENERGY_EVENT, job_id=hold.task_id, node=hold.node, message=message, data=data)
                )
            else:
                row.data, row.message = data, message
            written += 1
    return written


def _data(hold: Hold, joules: float, through: datetime) -> dict[str, object]:
    return {
        "task": hold.task_id,
        "job": hold.job_id,
        "gpus": list(hold.gpus),
        "joules": joules,
        "through": through.isoformat(),
    }
