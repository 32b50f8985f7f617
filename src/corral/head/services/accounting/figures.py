"""The arithmetic of accounting, without I/O: GPU holds clipped to periods, power integrated over time."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from corral.api.usage import UsageOut
from corral.head.services.accounting.prices import PriceBook

JOULES_PER_KWH = 3_600_000.0


@dataclass(frozen=True)
class PowerReading:
    at: datetime
    watts: float


@dataclass(frozen=True)
class Hold:
    """One task's hold on GPUs of one node: from when it started until its processes were gone."""

    task_id: str
    job_id: str
    user: str
    team: str
    node: str
    gpus: tuple[int, ...]
    gpu_types: tuple[str, ...]  # one per GPU, same order
    fraction: float
    start: datetime
    end: datetime | None  # None: still holding
    metered_j: float = 0.0  # energy persisted for [start, metered_through]
    metered_through: datetime | None = None

    def end_or(self, now: datetime) -> datetime:
        return self.end if self.end is not None else now


def overlap_s(start: datetime, end: datetime, since: datetime | None, until: datetime) -> float:
    lo = start if since is None or start > since else since
    hi = end if end < until else until
    return max(0.0, (hi - lo).total_seconds())


def held_gpu_s(gpus: int, fraction: float, start: datetime, end: datetime) -> float:
    """GPU-seconds a task used from ``start`` to ``end``: its GPUs × the share it held of each × the seconds."""
    return gpus * fraction * max(0.0, (end - start).total_seconds())


def prorated(amount: float, start: datetime, end: datetime, since: datetime | None, until: datetime) -> float:
    """The share of ``amount``, spread evenly over [start, end], that falls in [since, until]."""
    span = (end - start).total_seconds()
    if span <= 0:
        return 0.0
    return amount * overlap_s(start, end, since, until) / span


def integrate_power(readings: Sequence[PowerReading], start: datetime, end: datetime, max_hold_s: float) -> float:
    """Joules over [start, end]: each reading holds until the next one, for at most ``max_hold_s``.

    A step function integrates exactly piece by piece, so metering [a, b] then [b, c] gives the
    same energy as [a, c]. A silent agent is not extrapolated beyond ``max_hold_s``.
    """
    total = 0.0
    for i, reading in enumerate(readings):
        following = readings[i + 1].at if i + 1 < len(readings) else end
        seg_end = min(following, end, reading.at + timedelta(seconds=max_hold_s))
        lo = max(reading.at, start)
        if seg_end > lo:
            total += reading.watts * (seg_end - lo).total_seconds()
    return total


def hold_usage(
    hold: Hold,
    since: datetime | None,
    until: datetime,
    now: datetime,
    prices: PriceBook,
    live_j: float = 0.0,
) -> dict[str, UsageOut]:
    """The hold's usage in [since, until], per GPU type, each stretch at the prices then in force.
    ``live_j``: energy after ``metered_through`` that is still only in memory (counted up to now)."""
    end = min(hold.end_or(now), until)
    seconds = overlap_s(hold.start, end, since, until) * hold.fraction
    lo = hold.start if since is None or hold.start > since else since
    through = hold.metered_through or hold.start
    energy_j = prorated(hold.metered_j, hold.start, through, since, until)
    energy_j += prorated(live_j, through, max(through, hold.end_or(now)), since, until)
    out: dict[str, UsageOut] = {}
    count = len(hold.gpus) or 1
    for gpu_type in hold.gpu_types:
        part = out.setdefault(gpu_type, UsageOut())
        part.gpu_seconds += seconds
        part.cost += prices.cost(gpu_type, lo, end, hold.fraction)
        part.energy_kwh += energy_j / count / JOULES_PER_KWH
    return out


def add(into: UsageOut, other: UsageOut) -> None:
    into.gpu_seconds += other.gpu_seconds
    into.cost += other.cost
    into.energy_kwh += other.energy_kwh


def rounded(usage: UsageOut) -> UsageOut:
    """Figures as shown: GPU-seconds to the millisecond, cost to 1e-6, energy to the watt-hour's 1/1000."""
    return UsageOut(
        gpu_seconds=round(usage.gpu_seconds, 3), cost=round(usage.cost, 6), energy_kwh=round(usage.energy_kwh, 6)
    )
