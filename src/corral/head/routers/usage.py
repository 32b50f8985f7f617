"""/v1/usage: GPU time, cost and energy per job, user, team or GPU type; over time for charts."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Query

from corral.api.usage import UsageKey, UsageReport, UsageSeries
from corral.head.routers.deps import Runtime, User
from corral.head.services import accounting
from corral.head.services.common import Infeasible

router = APIRouter(prefix="/v1/usage", tags=["usage"])
PERIOD = "ISO-8601 time; a time without a zone is UTC"


@router.get("", response_model=UsageReport)
def usage(
    rt: Runtime,
    who: User,
    by: Annotated[UsageKey, Query(description="group rows by user, team, gpu-type or job")] = "user",
    since: Annotated[datetime | None, Query(description=f"start of the period ({PERIOD}); default: all time")] = None,
    until: Annotated[datetime | None, Query(description=f"end of the period ({PERIOD}); default: now")] = None,
) -> UsageReport:
    """Usage in the period; users see their own jobs' usage, admins everyone's."""
    return accounting.usage_report(rt, who, by, _utc("since", since), _utc("until", until))


@router.get("/series", response_model=UsageSeries)
def series(
    rt: Runtime,
    who: User,
    since: Annotated[datetime, Query(description=f"start of the first bucket ({PERIOD})")],
    until: Annotated[datetime | None, Query(description=f"end of the last bucket ({PERIOD}); default: now")] = None,
    step: Annotated[float, Query(gt=0, description="seconds per bucket")] = 3600.0,
    by: Annotated[UsageKey, Query(description="one series per user, team, gpu-type or job")] = "team",
) -> UsageSeries:
    """Usage per bucket of time, for charts."""
    start = _utc("since", since)
    assert start is not None
    try:
        return accounting.usage_series(rt, who, by, start, _utc("until", until), step)
    except OverflowError:
        raise Infeasible("until", "the period must end before the year 9999", "query") from None


def _utc(name: str, value: datetime | None) -> datetime | None:
    if value is None:
        return None
    try:
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    except OverflowError:
        raise Infeasible(name, "a time out of range", "query") from None
