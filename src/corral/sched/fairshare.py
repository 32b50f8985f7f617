"""Fair share: within a priority, teams (then users within a team) that used less go first.

A team's share is its dominant resource share: over GPU types, the largest fraction of the
cluster's GPUs of that type its decayed usage amounts to, divided by the team's weight
(default 1). Usage decays with a half-life (the caller integrates it; see ``docs/scheduling.md``).
Users are ranked the same way within their team, without weights.
"""

from __future__ import annotations

from collections.abc import Mapping

from corral.model import FairShare
from corral.sched import carry
from corral.sched.snapshot import Snapshot


def dominant_share(usage: Mapping[str, float], capacity: Mapping[str, float]) -> float:
    """The largest share of any GPU type's capacity that ``usage`` (GPU-seconds by type) takes."""
    return max((seconds / capacity[t] for t, seconds in usage.items() if capacity.get(t)), default=0.0)


def share_tables(snapshot: Snapshot, fair: FairShare) -> tuple[dict[str, float], dict[str, float]]:
    """Each team's weighted dominant share and each user's dominant share."""
    capacity = carry.gpu_layout(snapshot.nodes)[1]
    teams = {
        team: round(dominant_share(usage, capacity) / fair.weights.get(team, 1.0), 9)
        for team, usage in fair.teams.items()
    }
    users = {user: round(dominant_share(usage, capacity), 9) for user, usage in fair.users.items()}
    return teams, users
