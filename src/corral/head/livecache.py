"""Each live task's allocation as the scheduler sees it, the same object from one cycle to the next.

The scheduler brings what it kept from the last snapshot up to date with the differences between the
two snapshots' sets of allocations. Objects made afresh every cycle would each be hashed, and compared
field by field with their equals of the last cycle; the same objects are found by identity."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Protocol

from corral.model import Allocation, LiveAllocation


class TaskAllocation(Protocol):
    """The columns of a task row that say what it holds."""

    job_id: str
    generation: int
    node: str
    gpus: list[int]
    gpu_fraction: float
    cpus: float
    memory_mb: int


class LiveAllocations:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: dict[tuple[str, int, str], LiveAllocation] = {}

    def of(self, tasks: Iterable[TaskAllocation]) -> tuple[LiveAllocation, ...]:
        """The tasks' allocations, in order: last call's object for a task holding the same as then."""
        with self._lock:
            last = self._last
            now: dict[tuple[str, int, str], LiveAllocation] = {}
            out: list[LiveAllocation] = []
            for t in tasks:
                key = (t.job_id, t.generation, t.node)
                gpus = tuple(t.gpus)
                found = last.get(key)
                if found is None or _held(found.allocation) != (gpus, t.gpu_fraction, t.cpus, t.memory_mb):
                    found = LiveAllocation(t.job_id, Allocation(t.node, gpus, t.gpu_fraction, t.cpus, t.memory_mb))
                now[key] = found
                out.append(found)
            self._last = now
            return tuple(out)


def _held(a: Allocation) -> tuple[tuple[int, ...], float, float, int]:
    return a.gpus, a.gpu_fraction, a.cpus, a.memory_mb
