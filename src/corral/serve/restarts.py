"""Back-off for replacing replicas that exit: a command that exits at once is not started again
and again without pause.

Each serve round in which replicas of a service exited (their job ended while they were still
wanted) counts one failure; the next replica starts ``1 s · 2^(failures - 1)`` later, at most
``MAX_S``. Once a replica of the service has stayed ready for ``HEALTHY_S``, the failures are
forgotten. The state is a value handed in and returned, stored with the service.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

BASE_S = 1.0
MAX_S = 60.0
HEALTHY_S = 60.0


@dataclass(frozen=True)
class ReplicaExit:
    """A replica whose job ended while the service still wanted it."""

    replica: str
    state: str  # the job's final state: SUCCEEDED, FAILED, CANCELLED, ...
    exit_code: int | None
    ran_s: float | None  # from its start to its end; None if it never started

    def describe(self) -> str:
        if self.ran_s is None:
            return f"replica {self.replica} ended ({self.state}) before it started"
        ran = f"{self.ran_s:.1f} s" if self.ran_s < 10 else f"{self.ran_s:.0f} s"
        if self.exit_code is None:
            return f"replica {self.replica} ended ({self.state}) after {ran}"
        return f"replica {self.replica} exited with code {self.exit_code} after {ran}"


@dataclass(frozen=True)
class Backoff:
    failures: int = 0  # rounds in a row in which replicas exited
    not_before: float = 0.0  # no replica starts before this time (seconds since the epoch)
    last_exit: str = ""  # the latest exit, in words
    ready_since: float | None = None  # since when a replica has been ready, while failures > 0

    def waiting(self, now: float) -> bool:
        return now < self.not_before

    def reason(self, now: float) -> str | None:
        """Why the service is short of replicas, for `corral services`; None once it is healthy."""
        if self.failures == 0:
            return None
        text = self.last_exit
        if self.failures > 1:
            text += f" ({self.failures} exits in a row)"
        if self.waiting(now):
            text += f"; replacing it in {math.ceil(self.not_before - now - 1e-9)} s"
        return text

    def to_json(self) -> dict[str, Any]:
        return {
            "failures": self.failures,
            "not_before": self.not_before,
            "last_exit": self.last_exit,
            "ready_since": self.ready_since,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Backoff:
        since = data.get("ready_since")
        return cls(
            failures=int(data.get("failures", 0)),
            not_before=float(data.get("not_before", 0.0)),
            last_exit=str(data.get("last_exit", "")),
            ready_since=None if since is None else float(since),
        )


def delay_s(failures: int) -> float:
    """How long to wait before the next replica after ``failures`` rounds of exits."""
    if failures <= 0:
        return 0.0
    return min(MAX_S, BASE_S * 2.0 ** min(failures - 1, 32))


def next_backoff(state: Backoff, exits: Sequence[ReplicaExit], ready: bool, now: float) -> Backoff:
    """The back-off after a round that saw ``exits`` and whether any replica is ready now."""
    if exits:
        failures = state.failures + 1
        return Backoff(failures=failures, not_before=now + delay_s(failures), last_exit=exits[-1].describe())
    if state.failures == 0:
        return state
    if not ready:
        return replace(state, ready_since=None)
    since = now if state.ready_since is None else state.ready_since
    if now - since >= HEALTHY_S:
        return Backoff()
    return replace(state, ready_since=since)
