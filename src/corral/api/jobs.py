"""Wire schemas for jobs: what the head answers and what clients send."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from corral.api.usage import UsageOut
from corral.spec import JobSpec


class AllocationOut(BaseModel):
    node: str
    gpus: list[int]
    gpu_fraction: float = Field(
        default=1.0, description="the share of each listed GPU: 1 for whole GPUs, below 1 when shared, 0 for none"
    )


class TaskOut(BaseModel):
    node_rank: int
    node: str
    state: str
    generation: int
    exit_code: int | None = None
    detail: str = ""


class JobOut(BaseModel):
    """A job object, as `corral show -o json` prints it."""

    id: str
    name: str
    state: str
    user: str
    team: str
    priority: int
    nodes: int
    gpus_per_node: int | float
    gpu_types: list[str]
    submitted_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    exit_code: int | None = None
    restarts: int = 0
    reason: str = ""
    allocation: list[AllocationOut] = Field(default_factory=list)
    command: str | list[str]
    launcher: str
    cpus: float | None = None
    memory_mb: int | None = None
    time_limit_s: float | None = None
    max_restarts: int = 0
    env: dict[str, str] = Field(default_factory=dict)
    workdir: str | None = None
    image: str | None = Field(default=None, description="the container image its ranks run in; null: none")
    volumes: list[str] = Field(default_factory=list, description="HOST:CONTAINER[:ro|rw] mounts into the container")
    checkpoint_dir: str = ""
    tasks: list[TaskOut] = Field(default_factory=list)
    preemptible: bool = False
    grace_period_s: float | None = None
    preemptions: int = 0
    last_checkpoint_at: datetime | None = None
    expected_start: datetime | None = Field(
        default=None,
        description="for a pending job with a backfill reservation, or held back for a faster GPU type: when it is"
        " expected to start",
    )
    usage: UsageOut | None = Field(
        default=None, description="GPU-seconds, cost and energy of every attempt so far (one job's view only)"
    )
    array_id: str | None = Field(default=None, description="for an array element: the array's id (its first job)")
    array_index: int | None = Field(default=None, description="for an array element: its index")
    after_ok: list[str] = Field(default_factory=list, description="jobs that must succeed before this one starts")
    after_any: list[str] = Field(default_factory=list, description="jobs that must end before this one starts")


class CancelOut(JobOut):
    """A job object as `corral cancel` answers it: ``already_ended`` where the job had ended before
    (it was left as it is), false where this cancel ended it."""

    already_ended: bool = False


class SubmitBatch(BaseModel):
    """Several jobs in one request, accepted or refused together."""

    jobs: list[JobSpec] = Field(min_length=1, max_length=10_000)


class SubmitBatchOut(BaseModel):
    ids: list[str]


class JobIds(BaseModel):
    ids: list[str]
    whole_arrays: bool = Field(
        default=False, description="each id stands for its whole array: every element of it (a job in no array, itself)"
    )


class CheckpointDone(BaseModel):
    """A job reports a checkpoint it saved."""

    at: datetime | None = Field(default=None, description="when it was saved (default: now)")


class NodeGroupOut(BaseModel):
    """Nodes that got the same verdict for a job: the check that rejected them (or ``fits``), and why."""

    filter: str = Field(description="state, gpu_type, capacity, free or fits")
    message: str
    nodes: list[str]


class WhyOut(BaseModel):
    """``corral why``: a job's reason, and every node's verdict grouped."""

    job_id: str
    state: str
    reason: str
    nodes_needed: int
    groups: list[NodeGroupOut]
