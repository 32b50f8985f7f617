"""Wire schemas for accounting: GPU time, cost and energy per job, user, team, GPU type and period."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

UsageKey = Literal["user", "team", "gpu-type", "job"]


class UsageOut(BaseModel):
    """What some work used: GPU-seconds (a half GPU for an hour is 1800), cost and energy."""

    gpu_seconds: float = 0.0
    cost: float = Field(default=0.0, description="GPU-hours times the head's price for each GPU type")
    energy_kwh: float = Field(default=0.0, description="the GPUs' integrated power draw while the job held them")


class UsageRow(UsageOut):
    key: str = Field(description="the user, team, GPU type or job id this row adds up")
    gpu_hours: float = 0.0
    jobs: int = Field(default=0, description="jobs that used GPUs in the period")


class UsageReport(BaseModel):
    """`corral acct -o json`: usage in [since, until), grouped by one key, largest first."""

    by: UsageKey
    since: datetime | None
    until: datetime
    rows: list[UsageRow]
    total: UsageRow


class UsageBucket(BaseModel):
    start: datetime
    usage: dict[str, UsageOut] = Field(description="per key (team, user, GPU type or job)")


class UsageSeries(BaseModel):
    """Usage over time in buckets of ``step_s`` seconds, for charts."""

    by: UsageKey
    since: datetime
    until: datetime
    step_s: float
    keys: list[str]
    buckets: list[UsageBucket]


class GpuSeries(BaseModel):
    node: str
    index: int
    points: list[tuple[datetime, float, float]] = Field(description="(time, utilization %, power W), oldest first")


class JobGpusOut(BaseModel):
    """The latest readings of the GPUs a job holds now, for its page in the dashboard."""

    job_id: str
    gpus: list[GpuSeries]
