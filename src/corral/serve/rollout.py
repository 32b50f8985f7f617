"""Which replicas to start, drain and stop so that a service runs ``desired`` replicas of its revision.

A rolling update adds one replica of the new revision beyond the desired count (a surge of one),
waits until it is ready, then drains one old replica. A draining replica takes no new requests;
it is stopped once it has drained for ``drain_s`` (time for every gateway to hear that it left)
and holds no request any more, or once it has drained for ``drain_max_s`` whatever it holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum


class Phase(Enum):
    ACTIVE = "active"  # wanted: pending, starting or serving
    DRAINING = "draining"  # leaving the pool; stopped once its requests are over
    ENDED = "ended"  # its job ended (failed, cancelled, ...): nothing runs


@dataclass(frozen=True)
class ReplicaState:
    id: str
    revision: int
    phase: Phase
    ready: bool
    age_s: float = 0.0  # seconds since it was created (younger replicas are dropped first)
    draining_for_s: float = 0.0
    inflight: int = 0  # requests the gateways have sent it and not yet seen answered


@dataclass(frozen=True)
class Rollout:
    start: int  # new replicas of the current revision to create
    drain: tuple[str, ...]  # take out of the pool now
    stop: tuple[str, ...]  # drained: stop their jobs
    forget: tuple[str, ...]  # ended: drop them from the service

    @property
    def empty(self) -> bool:
        return not (self.start or self.drain or self.stop or self.forget)


def plan_rollout(
    desired: int, revision: int, replicas: Sequence[ReplicaState], drain_s: float, drain_max_s: float
) -> Rollout:
    forget = tuple(r.id for r in replicas if r.phase is Phase.ENDED)
    stop = tuple(r.id for r in replicas if r.phase is Phase.DRAINING and _drained(r, drain_s, drain_max_s))
    active = [r for r in replicas if r.phase is Phase.ACTIVE]
    current = [r for r in active if r.revision == revision]
    old = [r for r in active if r.revision != revision]
    old_serving = sorted((r for r in old if r.ready), key=lambda r: -r.age_s)  # oldest first
    drain = [r.id for r in old if not r.ready]  # serves nothing: leaves at once
    ready_now = sum(1 for r in current if r.ready)
    if desired == 0:
        drain += [r.id for r in old_serving]
        old_serving = []
    surplus = ready_now + len(old_serving) - desired
    if surplus > 0:
        leaving = old_serving[:surplus]
        drain += [r.id for r in leaving]
        old_serving = old_serving[len(leaving) :]
    missing = desired - len(current)
    start = max(0, missing)
    if old_serving:  # mid-update: at most one replica beyond the desired count
        start = max(0, min(missing, desired + 1 - len(current) - len(old_serving)))
    if missing < 0:
        drain += [r.id for r in _fewest_losses(current)[:-missing]]
    return Rollout(start=start, drain=tuple(drain), stop=stop, forget=forget)


def _drained(replica: ReplicaState, drain_s: float, drain_max_s: float) -> bool:
    if replica.draining_for_s >= drain_max_s:
        return True
    return replica.draining_for_s >= drain_s and replica.inflight <= 0


def _fewest_losses(replicas: Sequence[ReplicaState]) -> list[ReplicaState]:
    """The order to drop surplus replicas in: not ready before ready, then the youngest first."""
    return sorted(replicas, key=lambda r: (r.ready, r.age_s))
