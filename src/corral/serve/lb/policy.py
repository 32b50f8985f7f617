"""Least outstanding requests with power-of-two choices.

Two replicas are drawn at random and the one with fewer requests in flight gets the request:
nearly as good as scanning every replica for the least loaded one, without herding every
gateway onto the same replica. The random draws come from a generator the caller hands in,
so a seeded generator replays the same choices.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol


class Rng(Protocol):
    def randrange(self, stop: int, /) -> int:
        """A number in [0, stop)."""
        ...


@dataclass(frozen=True)
class RequestView:
    service: str
    path: str = "/"
    # Replicas this request must not go to (one that just refused its connection).
    exclude: frozenset[str] = field(default_factory=frozenset)


@dataclass(frozen=True)
class ReplicaView:
    id: str
    outstanding: int


def choose_replica(request: RequestView, replicas: Sequence[ReplicaView], rng: Rng) -> str | None:
    """The replica to send ``request`` to, or None when no replica may take it."""
    candidates = [r for r in replicas if r.id not in request.exclude]
    if not candidates:
        return None
    if len(candidates) == 1:
        return candidates[0].id
    first = rng.randrange(len(candidates))
    second = rng.randrange(len(candidates) - 1)
    if second >= first:
        second += 1  # two distinct replicas, each pair equally likely
    a, b = candidates[first], candidates[second]
    return b.id if b.outstanding < a.outstanding else a.id
