"""The autoscaler: how many replicas a service should run for the load it has seen.

The wanted count is the load over the window divided by what one replica should carry (requests
in flight, or requests per second), rounded up and kept within [min, max]. A change waits until
the wanted count has stayed above (``up_delay_s``) or below (``down_delay_s``) the current count
that long; the time it started is the policy state, handed in and returned, never kept here.
A service at zero replicas with any request waiting wakes at once.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

DEFAULT_TARGET_INFLIGHT = 2.0


@dataclass(frozen=True)
class LoadSample:
    at: float  # seconds (any fixed origin)
    inflight: float  # requests in flight or waiting at the gateway
    rps: float  # requests that arrived per second since the previous sample


@dataclass(frozen=True)
class AutoscalePolicy:
    min_replicas: int
    max_replicas: int
    target_inflight: float | None = None
    target_rps: float | None = None
    up_delay_s: float = 3.0
    down_delay_s: float = 60.0


@dataclass(frozen=True)
class AutoscaleState:
    """A change the load asks for and since when: ``direction`` +1 (up), -1 (down) or 0."""

    direction: int = 0
    since: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"direction": self.direction, "since": self.since}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AutoscaleState:
        return cls(direction=int(data.get("direction", 0)), since=float(data.get("since", 0.0)))


def wanted_replicas(window: Sequence[LoadSample], policy: AutoscalePolicy) -> int:
    """Replicas the window's load calls for, within [min, max]."""
    if not window:
        return policy.min_replicas
    if policy.target_rps is not None:
        load, target = sum(s.rps for s in window) / len(window), policy.target_rps
    else:
        load = sum(s.inflight for s in window) / len(window)
        target = policy.target_inflight or DEFAULT_TARGET_INFLIGHT
    wanted = math.ceil(load / target - 1e-9)
    if window[-1].inflight > 0:
        wanted = max(wanted, 1)  # a waiting request needs a replica, however light the load
    return max(policy.min_replicas, min(policy.max_replicas, wanted))


def decide_replicas(
    window: Sequence[LoadSample], replicas: int, policy: AutoscalePolicy, state: AutoscaleState, now: float
) -> tuple[int, AutoscaleState]:
    """The replica count to run now, and the state to hand back next time."""
    bounded = max(policy.min_replicas, min(policy.max_replicas, replicas))
    if bounded != replicas:
        return bounded, AutoscaleState()  # the bounds changed (a new spec or `service scale`): follow them
    wanted = wanted_replicas(window, policy)
    if wanted == replicas:
        return replicas, AutoscaleState()
    if replicas == 0:
        return wanted, AutoscaleState()  # a cold start: the first request is already waiting
    direction = 1 if wanted > replicas else -1
    since = state.since if state.direction == direction else now
    delay = policy.up_delay_s if direction > 0 else policy.down_delay_s
    if now - since >= delay:
        return wanted, AutoscaleState()
    return replicas, AutoscaleState(direction=direction, since=since)
