"""What jobs like this one took before: GPU-seconds of finished jobs, per user and per team.

The caller (the simulator from its virtual clock, the head from its records) feeds every
finished job here and copies ``expected`` into ``Job.expected_gpu_s`` for the scheduler.
Only finished jobs count, so a policy using it never reads a running job's future.
"""

from __future__ import annotations

from bisect import insort
from collections import deque

RECENT = 256
"""Finished jobs remembered per user and per team: the most recent ones."""

MIN_SAMPLES = 1
"""Finished jobs a user needs before their own history is used instead of their team's."""


class FinishedJobs:
    """The GPU-seconds of recently finished jobs, per user and per team, kept sorted."""

    def __init__(self, recent: int = RECENT) -> None:
        self.recent = recent
        self._order: dict[str, deque[float]] = {}
        self._sorted: dict[str, list[float]] = {}

    def add(self, user: str, team: str, gpu_s: float) -> None:
        """Record one finished job's GPU-seconds (GPUs × seconds it held them)."""
        for key in (f"user:{user}" if user else "", f"team:{team}" if team else ""):
            if key:
                self._add(key, gpu_s)

    def expected(self, user: str, team: str) -> float | None:
        """The median GPU-seconds of the user's finished jobs, else the team's; None without any."""
        for key in (f"user:{user}" if user else "", f"team:{team}" if team else ""):
            values = self._sorted.get(key, [])
            if key and len(values) >= MIN_SAMPLES:
                return values[len(values) // 2]
        return None

    def _add(self, key: str, gpu_s: float) -> None:
        order = self._order.setdefault(key, deque())
        values = self._sorted.setdefault(key, [])
        if len(order) == self.recent:
            values.remove(order.popleft())
        order.append(gpu_s)
        insort(values, gpu_s)
