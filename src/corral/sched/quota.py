"""Team quotas with borrowing, per GPU type, for one cycle: who may take how many more GPUs.

A team always gets its ``nominal`` GPUs. Beyond that it borrows from the pool of idle quota:
GPUs no team has a quota for, plus what each team does not use of its nominal, up to its
``lending_limit``. A team borrows at most its ``borrowing_limit``. When an owner needs its
nominal back, jobs of borrowing teams may be preempted (reclaim); a team within its quota is
never preempted so that another team can borrow.

GPU types no team has a quota for are not governed: any team may use them freely.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from corral.model import EPSILON, Allocation, Job, NodeState, RunningJob, TeamQuota
from corral.sched import describe
from corral.sched.snapshot import Snapshot

_NONE = TeamQuota(nominal=0.0, borrowing_limit=None, lending_limit=0.0)


class QuotaLedger:
    """GPUs used per (team, GPU type), kept current as the cycle places and preempts."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.quotas = snapshot.quotas
        self.governed = {gpu_type for team in self.quotas.values() for gpu_type in team}
        self.capacity: dict[str, float] = defaultdict(float)
        type_at: dict[tuple[str, int], str] = {}
        for node in snapshot.nodes:
            for gpu in node.gpus:
                type_at[(node.name, gpu.index)] = gpu.type
                if node.state == NodeState.READY:
                    self.capacity[gpu.type] += 1.0
        teams = {r.id: r.team for r in snapshot.running}
        self.used: dict[tuple[str, str], float] = defaultdict(float)
        self.holding: dict[str, tuple[str, str, float]] = {}  # running job → (team, GPU type, GPUs)
        self._lendable: dict[str, float] = {}  # per GPU type, computed on first use, then kept current
        self._borrowed: dict[str, float] = {}
        for job_id, allocations in snapshot.allocations_of().items():
            held = _holding(allocations, type_at)
            if held is not None and job_id in teams:
                self.holding[job_id] = (teams[job_id], held[0], held[1])
                self.used[(teams[job_id], held[0])] += held[1]

    def quota(self, team: str, gpu_type: str) -> TeamQuota:
        return self.quotas.get(team, {}).get(gpu_type, _NONE)

    def admits(self, job: Job, gpu_type: str, freed: float = 0.0) -> str | None:
        """None when the job's team may take the job's GPUs of this type now (after giving back
        ``freed`` GPUs of its own); else why not."""
        if gpu_type not in self.governed:
            return None
        team, gpus = job.team, _gpus(job)
        quota, used = self.quota(team, gpu_type), max(0.0, self.used[(job.team, gpu_type)] - freed)
        over = used + gpus - quota.nominal
        if over <= EPSILON:
            return None
        held = (
            f"team {team or '(none)'} uses {describe.number(used)} of its {describe.number(quota.nominal)} {gpu_type}"
        )
        if quota.borrowing_limit is not None and over > quota.borrowing_limit + EPSILON:
            limit = describe.number(quota.borrowing_limit)
            return f"{held}; {describe.number(gpus)} more would borrow beyond its borrowing limit of {limit}"
        new_borrowing = gpus - max(0.0, quota.nominal - used)
        pool = self.pool(gpu_type, borrower=team)
        if new_borrowing > pool + EPSILON:
            return f"{held}; no idle {gpu_type} quota can be lent now ({describe.number(pool)} left)"
        return None

    def pool(self, gpu_type: str, borrower: str | None = None) -> float:
        """Idle quota ``borrower`` may still borrow: unowned GPUs plus other teams' lendable unused
        nominal, less what is already lent."""
        if gpu_type not in self._lendable:
            self._total(gpu_type)
        own = self._lends(borrower, gpu_type) if borrower is not None else 0.0
        return self._lendable[gpu_type] - own - self._borrowed[gpu_type]

    def _total(self, gpu_type: str) -> None:
        teams = {team for team, t in self.used if t == gpu_type} | {
            team for team, quotas in self.quotas.items() if gpu_type in quotas
        }
        owned = sum(self.quota(team, gpu_type).nominal for team in teams)
        self._lendable[gpu_type] = max(0.0, self.capacity[gpu_type] - owned) + sum(
            self._lends(team, gpu_type) for team in teams
        )
        self._borrowed[gpu_type] = sum(self._borrows(team, gpu_type) for team in teams)

    def _lends(self, team: str, gpu_type: str) -> float:
        quota = self.quota(team, gpu_type)
        limit = quota.nominal if quota.lending_limit is None else quota.lending_limit
        return min(limit, max(0.0, quota.nominal - self.used[(team, gpu_type)]))

    def _borrows(self, team: str, gpu_type: str) -> float:
        return max(0.0, self.used[(team, gpu_type)] - self.quota(team, gpu_type).nominal)

    def _add(self, team: str, gpu_type: str, gpus: float) -> None:
        """Change a team's use, keeping the pool's totals current."""
        if gpu_type in self._lendable:
            self._lendable[gpu_type] -= self._lends(team, gpu_type)
            self._borrowed[gpu_type] -= self._borrows(team, gpu_type)
        self.used[(team, gpu_type)] += gpus
        if gpu_type in self._lendable:
            self._lendable[gpu_type] += self._lends(team, gpu_type)
            self._borrowed[gpu_type] += self._borrows(team, gpu_type)

    def within_nominal(self, job: Job, gpu_type: str | None) -> bool:
        """Whether the job fits its team's nominal quota (always, for a type without quotas)."""
        if gpu_type is None or gpu_type not in self.governed:
            return True
        return self.used[(job.team, gpu_type)] + _gpus(job) <= self.quota(job.team, gpu_type).nominal + EPSILON

    def borrowing(self, running_job_id: str) -> bool:
        """Whether the running job's team uses more of its GPU type than its nominal quota."""
        held = self.holding.get(running_job_id)
        if held is None or held[1] not in self.governed:
            return False
        team, gpu_type, _ = held
        return self.used[(team, gpu_type)] > self.quota(team, gpu_type).nominal + EPSILON

    def any_borrowing(self) -> bool:
        return any(self.borrowing(job_id) for job_id in self.holding)

    def held_by(self, running_job_ids: Sequence[str], gpu_type: str) -> float:
        """GPUs of ``gpu_type`` these running jobs hold."""
        return sum(h[2] for j in running_job_ids if (h := self.holding.get(j)) is not None and h[1] == gpu_type)

    def take(self, job: Job, gpu_type: str | None) -> None:
        if gpu_type is not None:
            self._add(job.team, gpu_type, _gpus(job))

    def give_back(self, running: RunningJob) -> None:
        """A victim's GPUs are on their way back."""
        held = self.holding.pop(running.id, None)
        if held is not None:
            self._add(held[0], held[1], -held[2])


def _gpus(job: Job) -> float:
    return job.request.gpus_per_node * job.request.nodes


def _holding(allocations: Sequence[Allocation], type_at: dict[tuple[str, int], str]) -> tuple[str, float] | None:
    """(GPU type, GPUs) a running job holds; None for a CPU-only job."""
    gpus = sum(len(a.gpus) * a.gpu_fraction for a in allocations)
    types = [type_at[(a.node, i)] for a in allocations for i in a.gpus if (a.node, i) in type_at]
    return (types[0], gpus) if types and gpus > 0 else None
