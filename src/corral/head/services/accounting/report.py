"""Usage reports: GPU time, cost and energy per job, user, team or GPU type, over a period or in buckets."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from corral.api.usage import UsageBucket, UsageKey, UsageOut, UsageReport, UsageRow, UsageSeries
from corral.head.runtime import HeadRuntime
from corral.head.security import Principal
from corral.head.services.accounting.figures import Hold, add, hold_usage, rounded
from corral.head.services.accounting.holds import load_holds
from corral.head.services.accounting.meter import hold_energy
from corral.head.services.accounting.prices import PriceBook, load_prices
from corral.head.services.common import Infeasible

MAX_BUCKETS = 2000
MAX_STEP_S = 100 * 366 * 86400  # a bucket of a century is as long as one may be


def _usage_of(
    rt: HeadRuntime, hold: Hold, since: datetime | None, until: datetime, now: datetime, prices: PriceBook
) -> dict[str, UsageOut]:
    live_j = hold_energy(rt, hold, hold.metered_through or hold.start, min(hold.end_or(now), now))
    return hold_usage(hold, since, until, now, prices, live_j)


def _key(hold: Hold, by: UsageKey, gpu_type: str) -> str:
    return {"user": hold.user, "team": hold.team, "gpu-type": gpu_type, "job": hold.job_id}[by]


def job_usage(session: Session, rt: HeadRuntime, job_id: str) -> UsageOut:
    """Everything a job used, every attempt, up to now if it still runs."""
    now = rt.clock.now()
    total = UsageOut()
    prices = load_prices(session, rt.settings.gpu_prices)
    for hold in load_holds(session, None, now, job_ids=[job_id]):
        for part in _usage_of(rt, hold, None, now, now, prices).values():
            add(total, part)
    return rounded(total)


def usage_report(
    rt: HeadRuntime, who: Principal, by: UsageKey, since: datetime | None, until: datetime | None
) -> UsageReport:
    now = rt.clock.now()
    until = until or now
    _check_period(since, until)
    with rt.read() as session:
        holds = load_holds(session, since, until, user=None if who.is_admin else who.user)
        prices = load_prices(session, rt.settings.gpu_prices)
    sums: dict[str, UsageOut] = defaultdict(UsageOut)
    jobs: dict[str, set[str]] = defaultdict(set)
    for hold in holds:
        for gpu_type, part in _usage_of(rt, hold, since, until, now, prices).items():
            key = _key(hold, by, gpu_type)
            add(sums[key], part)
            if part.gpu_seconds > 0:
                jobs[key].add(hold.job_id)
    # A key whose jobs held no GPU in the period (a running job, a period after now) gets no row.
    rows = [_row(key, usage, len(jobs[key])) for key, usage in sums.items() if jobs[key]]
    rows.sort(key=lambda r: (-r.gpu_seconds, r.key))
    total = UsageOut()
    for usage in sums.values():
        add(total, usage)
    every_job = set().union(*jobs.values()) if jobs else set()
    return UsageReport(by=by, since=since, until=until, rows=rows, total=_row("total", total, len(every_job)))


def _row(key: str, usage: UsageOut, jobs: int) -> UsageRow:
    shown = rounded(usage)
    return UsageRow(key=key, jobs=jobs, gpu_hours=round(usage.gpu_seconds / 3600.0, 6), **shown.model_dump())


def usage_series(
    rt: HeadRuntime, who: Principal, by: UsageKey, since: datetime, until: datetime | None, step_s: float
) -> UsageSeries:
    """Usage in consecutive buckets of ``step_s`` from ``since``: one entry per key that used GPUs."""
    now = rt.clock.now()
    until = until or now
    _check_period(since, until)
    if not 0 < step_s <= MAX_STEP_S or (until - since).total_seconds() / step_s > MAX_BUCKETS:
        raise Infeasible(
            "step",
            f"must be a number of seconds above 0, at most {MAX_STEP_S:,} (100 years), that gives at most"
            f" {MAX_BUCKETS} buckets over the period",
            "query",
        )
    with rt.read() as session:
        holds = load_holds(session, since, until, user=None if who.is_admin else who.user)
        prices = load_prices(session, rt.settings.gpu_prices)
    step = timedelta(seconds=step_s)
    starts = []
    at = since
    while at < until:
        starts.append(at)
        at += step
    buckets = [UsageBucket(start=s, usage={}) for s in starts]
    keys: set[str] = set()
    for hold in holds:
        live_j = hold_energy(rt, hold, hold.metered_through or hold.start, min(hold.end_or(now), now))
        first = max(0, int((hold.start - since) / step))
        for bucket in buckets[first:]:
            if bucket.start >= min(hold.end_or(now), until):
                break
            end = min(bucket.start + step, until)
            for gpu_type, part in hold_usage(hold, bucket.start, end, now, prices, live_j).items():
                key = _key(hold, by, gpu_type)
                add(bucket.usage.setdefault(key, UsageOut()), part)
                keys.add(key)
    for bucket in buckets:
        bucket.usage = {key: rounded(usage) for key, usage in bucket.usage.items()}
    return UsageSeries(by=by, since=since, until=until, step_s=step_s, keys=sorted(keys), buckets=buckets)


def _check_period(since: datetime | None, until: datetime) -> None:
    if since is not None and since >= until:
        raise Infeasible("since", f"must be before until ({until.isoformat()})", "query")
