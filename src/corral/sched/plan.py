"""What one scheduling cycle decides: placements, and a reason for every job left waiting."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from corral.model import Allocation

NO_NODES = "NO_NODES"
"""No node is READY, so nothing can be placed."""

RESOURCES = "RESOURCES"
"""The job fits the cluster but not what is free now."""

NEVER_FITS = "NEVER_FITS"
"""The job cannot fit the registered nodes even when they are all empty."""


@dataclass(frozen=True)
class Reason:
    """Why a job is still waiting: a stable ``code`` and a message a user can act on."""

    code: str
    message: str
    position: int = 0  # place in the queue, 1-based; 0 when the job is not queued for resources
    queue_length: int = 0

    def describe(self) -> str:
        """The message with the queue position, as users read it."""
        if self.position:
            return f"{self.message}; queue position {self.position} of {self.queue_length}"
        return self.message


@dataclass(frozen=True)
class Placement:
    """Where one job runs: one allocation per node of its gang, all of one GPU type."""

    job_id: str
    gpu_type: str | None  # None for CPU-only jobs
    allocations: tuple[Allocation, ...]


@dataclass(frozen=True)
class Plan:
    """The outcome of one cycle; ``reasons`` has an entry for every pending job not placed."""

    placements: tuple[Placement, ...] = ()
    reasons: Mapping[str, Reason] = field(default_factory=dict)
