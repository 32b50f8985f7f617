"""What a simulation produces: one record per job, the timeline, and one result per policy."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple


@dataclass(frozen=True, slots=True)
class JobRecord:
    """What happened to one job in a simulation; ``start_s`` is its first start, ``nodes`` its last run's."""

    id: str
    submit_s: float
    start_s: float
    finish_s: float
    gpus: float  # GPUs its last run held: whole GPUs (an int), or its fraction of one shared GPU
    gpu_type: str
    nodes: tuple[str, ...]
    busy_gpu_s: float = 0.0  # GPU-seconds held over all its runs, lost work included
    preemptions: int = 0
    lost_gpu_s: float = 0.0  # GPU-seconds of work lost to preemption (since the last checkpoint)
    team: str = ""
    run_s: float = 0.0  # run time alone on the GPU type it finished on: traced duration / that type's speed
    requeued_s: float = 0.0  # time queued again after its preemptions, until it started again

    @property
    def jct_s(self) -> float:
        return self.finish_s - self.submit_s

    @property
    def wait_s(self) -> float:
        """Time it spent queued: until its first start, and after each preemption until it started again."""
        return self.start_s - self.submit_s + self.requeued_s

    @property
    def gpu_seconds(self) -> float:
        return self.busy_gpu_s


@dataclass(frozen=True, slots=True)
class Unfinished:
    """A job still waiting when nothing more could happen, so it never finished (``start_s``: a first
    start, when it ran before it was preempted)."""

    id: str
    submit_s: float
    gpus: float  # GPUs it asked for (a fraction below 1 shares one GPU)
    start_s: float | None = None
    preemptions: int = 0
    lost_gpu_s: float = 0.0
    team: str = ""


class Sample(NamedTuple):
    """The cluster just after everything that happened at one moment."""

    time_s: float
    busy_gpus: float  # a fractional job counts its fraction
    pending_jobs: int


@dataclass(frozen=True)
class SimResult:
    """One policy's run over a workload."""

    policy: str
    records: tuple[JobRecord, ...]  # in finish order
    total_gpus: int
    cycles: int
    preemptions: int = 0
    unfinished: int = 0
    unfinished_jobs: tuple[Unfinished, ...] = ()  # in submit order
    lost_gpu_s: float = 0.0
    busy_gpu_s_by_group: Mapping[str, float] = field(default_factory=dict)  # node group (label ``group``) -> GPU-s
    timeline: tuple[Sample, ...] = ()  # one sample per moment, when asked for
