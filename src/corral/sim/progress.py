"""One simulated job's progress across its runs: work left, service received, the run it is in."""

from __future__ import annotations

import math
from datetime import timedelta

from corral.model import FULL_GPU, Allocation
from corral.sched import Placement
from corral.sim.workload import EPOCH, SimJob


class JobRun:
    """One job's progress: work left (in traced seconds), service received, its current run."""

    __slots__ = (
        "attained",
        "busy",
        "expected",
        "first_start",
        "held",
        "item",
        "lost",
        "placement",
        "preempted",
        "requeued",
        "run_no",
        "speed",
        "started",
        "started_at",
        "stopped",
        "work_left",
    )

    def __init__(self, item: SimJob) -> None:
        self.item = item
        self.work_left = item.trace.duration_s
        self.attained = 0.0  # GPU-seconds of service over finished runs
        self.busy = 0.0
        self.lost = 0.0
        self.preempted = 0
        self.requeued = 0.0  # time queued again after preemptions (each from its stop to the next start)
        self.first_start: float | None = None
        self.placement: Placement | None = None
        self.started = 0.0
        self.stopped = 0.0  # when it was last preempted
        self.started_at = EPOCH  # ``started`` as the scheduler's datetime
        self.held: float = 0  # GPUs its current run holds (a fraction of one for a fractional job)
        self.speed = 1.0
        self.run_no = 0
        self.expected: float | None = None  # history's estimate when it last queued

    @property
    def gpus(self) -> float:
        return self.held if self.placement else 0

    def place(self, placement: Placement | None, now: float) -> None:
        """Start a run on ``placement`` at ``now``, or (None) end the current one."""
        self.placement = placement
        if placement is not None:
            self.started = now
            self.started_at = EPOCH + timedelta(seconds=now)
            self.held = sum(held_gpus(a) for a in placement.allocations)

    def saved_s(self, now: float, default_interval: float) -> float:
        """Seconds of this run kept by its last checkpoint (all of them when checkpoints are continuous)."""
        elapsed = now - self.started
        interval = self.item.trace.checkpoint_s if self.item.trace.checkpoint_s is not None else default_interval
        periods = elapsed / interval if interval > 0 else math.inf
        if not math.isfinite(periods):  # continuous, or so frequent that nothing is lost
            return elapsed
        return min(elapsed, math.floor(periods) * interval)  # never more than ran, whatever the rounding


def held_gpus(allocation: Allocation) -> float:
    """The GPUs an allocation holds: its whole GPUs (an ``int``), or its fraction of each GPU it shares."""
    if allocation.gpu_fraction >= FULL_GPU:
        return len(allocation.gpus)
    return len(allocation.gpus) * allocation.gpu_fraction
