"""Teams' GPU quotas and fair-share standing, as the scheduler reads them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class TeamQuota:
    """A team's share of one GPU type, in GPUs.

    ``nominal`` is guaranteed. Beyond it the team may borrow up to ``borrowing_limit`` GPUs
    (None: as many as are idle) from what other teams do not use; of its own unused nominal,
    others may borrow up to ``lending_limit`` (None: all of it).
    """

    nominal: float
    borrowing_limit: float | None = None
    lending_limit: float | None = None


@dataclass(frozen=True)
class FairShare:
    """Decayed past usage, in GPU-seconds per GPU type, by team and by user; ``weights`` by team (default 1)."""

    teams: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    users: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    weights: Mapping[str, float] = field(default_factory=dict)


Quotas = Mapping[str, Mapping[str, TeamQuota]]
"""Team → GPU type → quota. A GPU type no team has a quota for is not governed by quotas."""
