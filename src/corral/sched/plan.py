"""What one scheduling cycle decides: placements, and a reason for every job left waiting."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import NamedTuple

from corral.model import Allocation

NO_NODES = "NO_NODES"
"""No node is READY, so nothing can be placed."""

RESOURCES = "RESOURCES"
"""The job fits the cluster but not what is free now."""

NEVER_FITS = "NEVER_FITS"
"""The job cannot fit the registered nodes even when they are all empty."""

RESERVED = "RESERVED"
"""The highest-priority blocked job: resources are reserved for it at its earliest start."""

PREEMPTING = "PREEMPTING"
"""Lower-priority jobs are being stopped so that this job can start."""

BACKFILL_BLOCKED = "BACKFILL_BLOCKED"
"""The job fits now but starting it would delay a reserved higher-priority job."""

QUOTA = "QUOTA"
"""The job's team may not take more GPUs of the types it accepts now (nominal quota and borrowing limits)."""

FASTER_GPU = "FASTER_GPU"
"""The job fits now on a slower GPU type but finishes sooner by waiting for a faster one it prefers."""

IN_ORDER = "IN_ORDER"
"""The job waits behind an earlier one: the policy starts jobs strictly in queue order (``fifo``)."""

DEPENDENCY = "DEPENDENCY"
"""The job waits for other jobs: its dependencies, or room in its array (decided before the scheduler runs)."""


class Reason(NamedTuple):
    """Why a job is still waiting: a stable ``code`` and a message a user can act on.

    A named tuple rather than a dataclass: a cycle may leave 100,000 jobs waiting. Jobs waiting for
    the same thing share one ``Reason``; a job's place in the queue comes from ``Plan.position``."""

    code: str
    message: str
    queued: bool = False  # the job has a place in the queue (it could fit the cluster, and waits its turn)
    expected_start: datetime | None = None  # a reserved job's reservation, or when the faster GPUs it waits for free up

    def describe(self, position: tuple[int, int] | None = None) -> str:
        """The message with the queue position (place, queue length), as users read it."""
        if position is not None:
            return f"{self.message}; queue position {position[0]} of {position[1]}"
        return self.message


@dataclass(frozen=True)
class Placement:
    """Where one job runs: one allocation per node of its gang, all of one GPU type."""

    job_id: str
    gpu_type: str | None  # None for CPU-only jobs
    allocations: tuple[Allocation, ...]


@dataclass(frozen=True)
class Reservation:
    """Resources held back for a blocked job from ``start`` (its earliest possible start)."""

    job_id: str
    start: datetime
    gpu_type: str | None
    allocations: tuple[Allocation, ...]


@dataclass(frozen=True)
class Preemption:
    """Stop ``victim_job_id`` so that ``for_job_id`` can start; the victim goes back to pending."""

    victim_job_id: str
    for_job_id: str
    reason: str
    reclaim: bool = False  # the victim's team borrowed the quota the preempting job's team now claims back


@dataclass(frozen=True)
class Plan:
    """The outcome of one cycle; ``reasons`` has an entry for every pending job not placed.

    A job that preempts is not placed in the same plan: it starts in a later cycle, once
    its victims have released their resources.
    """

    placements: tuple[Placement, ...] = ()
    reasons: Mapping[str, Reason] = field(default_factory=dict)
    preemptions: tuple[Preemption, ...] = ()
    reservations: tuple[Reservation, ...] = ()
    exhausted_searches: tuple[str, ...] = ()
    """Jobs whose victim search went through every node hosting a running job of the snapshot without
    reaching a node where it could stop early (no later node could do better): with more running jobs in
    the snapshot, their search could end differently. A caller passing every running job (the head) can
    ignore it; one passing only some possible victims (the simulator) must run the cycle again with more."""
    waiting: tuple[str, ...] = ()
    """The jobs left waiting, in queue order (each has a reason)."""

    def position(self, job_id: str) -> tuple[int, int] | None:
        """A waiting job's place in the queue (1-based) and the queue's length; None for a job whose reason
        has no place in it (it can never fit the cluster, or waits for something other than resources)."""
        reason = self.reasons.get(job_id)
        if reason is None or not reason.queued:
            return None
        at = self._places.get(job_id)
        return None if at is None else (at + 1, len(self.waiting))

    @cached_property
    def _places(self) -> dict[str, int]:
        return {job_id: at for at, job_id in enumerate(self.waiting)}
