"""What a victim search may take from another team on a GPU type with quotas: no more than it borrows.

Each victim of another team is found, alone, to be of a team that borrows (past its nominal quota).
Several victims of one team may together take more than it borrows: once the first of them stop, the
team is within its quota again, and its own jobs, perhaps of a higher priority, take the place back in
the next cycle, only to be preempted again, cycle after cycle. So a victim set may stop jobs of a team
only while it still borrows: stopped one by one, the largest last, each leaves the team past its nominal
quota until its turn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set

from corral.model import EPSILON, RunningJob
from corral.sched.quota import QuotaLedger


class BorrowedOnly:
    """The rule above for one cycle's victim searches (``taken``: victims given to earlier jobs, whose GPUs
    already count as given back)."""

    def __init__(self, quota: QuotaLedger, jobs: Mapping[str, RunningJob], taken: Set[str]) -> None:
        self._quota, self._jobs, self._taken = quota, jobs, taken

    def depends_on(self, team: str, eligible: Sequence[str]) -> tuple[float, ...] | None:
        """What ``allows`` reads of usage for sets of these victims, for a job of ``team``: the usage of each
        other team two or more of them belong to (per GPU type, in the order first met); None where
        no other team has two of them there (any set is allowed then)."""
        seen: dict[tuple[str, str], bool] = {}  # group → met twice
        for v in eligible:
            group = self._group(v, team)
            if group is not None:
                seen[group] = group in seen
        if not any(seen.values()):
            return None
        quota = self._quota
        return tuple(quota.levels(gpu_type).usage[other] for (other, gpu_type), twice in seen.items() if twice)

    def allows(self, team: str, victims: Sequence[str]) -> bool:
        """Whether stopping ``victims`` for a job of ``team`` takes from each other team only what it borrows."""
        quota = self._quota
        sizes: dict[tuple[str, str], list[float]] = {}
        for v in victims:
            group = self._group(v, team)
            if group is not None:
                sizes.setdefault(group, []).append(quota.holding[v][2])
        for (other, gpu_type), gpus in sizes.items():
            levels = quota.levels(gpu_type)
            left = levels.usage[other] - sum(gpus) + max(gpus)  # its use before the last of them stops
            if len(gpus) > 1 and levels.over(other) and left <= levels.nominal[other] + EPSILON:
                return False
        return True

    def _group(self, victim_id: str, team: str) -> tuple[str, str] | None:
        """(team, GPU type) of a victim of another team on a type with quotas, not stopping already nor given
        to an earlier job; else None."""
        victim = self._jobs[victim_id]
        if victim.stopping or victim.team == team or victim_id in self._taken:
            return None
        held = self._quota.holding.get(victim_id)
        if held is None or held[1] not in self._quota.governed:
            return None
        return held[0], held[1]
