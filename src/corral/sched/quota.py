"""Team quotas with borrowing, per GPU type, for one cycle: who may take how many more GPUs.

Quotas follow the team tree (``Snapshot.team_parents``; see ``quota_tree``). A team always gets
its ``nominal`` GPUs, which count its child teams' use too. Beyond that it borrows idle quota,
first within its parent (its siblings' lendable unused nominal and the parent's own unassigned
nominal), then further up, as far as each level's ``borrowing_limit`` allows; a subtree lends at
most its ``lending_limit``. With every team directly under the organisation, a team borrows from
GPUs no team has a quota for plus what each team does not use of its nominal, up to its
``lending_limit``. When an owner needs its nominal back, jobs of borrowing teams may be preempted
(reclaim), those borrowing from furthest away first; a team within its quota is never preempted so
that another team can borrow.

GPU types no team has a quota for are not governed: any team may use them freely.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

from corral.model import EPSILON, Job, RunningJob, TeamQuota
from corral.sched import carry, describe, holdings
from corral.sched.quota_tree import TeamTree, TypeQuotas
from corral.sched.snapshot import Snapshot

_NONE = TeamQuota(nominal=0.0, borrowing_limit=None, lending_limit=0.0)


class QuotaLedger:
    """GPUs used per (team, GPU type), kept current as the cycle places and preempts."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.quotas = snapshot.quotas
        self.tree = TeamTree(snapshot.team_parents)
        self.governed = {gpu_type for team in self.quotas.values() for gpu_type in team}
        layout = carry.gpu_layout(snapshot.nodes)
        capacity = layout[1]
        self.capacity: dict[str, float] = defaultdict(float, capacity)
        held = holdings.team_holdings(snapshot)
        self.used: dict[tuple[str, str], float] = defaultdict(float, held.used)  # by the team's own jobs
        self.holding: dict[str, tuple[str, str, float]] = dict(held.holding)  # running job → (team, GPU type, GPUs)
        self._members = held.members  # ``holding`` by team and GPU type, until usage first changes
        self._levels: dict[str, TypeQuotas] = {}  # per GPU type, built on first use, then kept current
        self.changes = 0  # how many times usage changed: answers kept from before stay true while it is the same

    def quota(self, team: str, gpu_type: str) -> TeamQuota:
        return self.quotas.get(team, {}).get(gpu_type, _NONE)

    def levels(self, gpu_type: str) -> TypeQuotas:
        """The tree's quotas and usage for one GPU type."""
        found = self._levels.get(gpu_type)
        if found is None:
            own = {team: gpus for (team, t), gpus in self.used.items() if t == gpu_type}
            found = TypeQuotas(self.tree, self.quotas, gpu_type, self.capacity[gpu_type], own)
            self._levels[gpu_type] = found
        return found

    def admits(self, job: Job, gpu_type: str, victims: Sequence[str] = ()) -> str | None:
        """None when the job's team may take the job's GPUs of this type now (once ``victims``, running
        jobs, give theirs back); else why not, naming the level that blocks."""
        if gpu_type not in self.governed:
            return None
        if not victims:  # most calls: no what-if to set up
            return self._admits(self.levels(gpu_type), job, gpu_type)
        with self._given_back(gpu_type, victims) as (levels, _):
            return self._admits(levels, job, gpu_type)

    @contextmanager
    def _given_back(
        self, gpu_type: str, victims: Sequence[str]
    ) -> Iterator[tuple[TypeQuotas, list[tuple[str, tuple[str, str, float]]]]]:
        """The type's usage as it would be once the victims give their GPUs of the type back (restored on
        leaving), with each such victim and what it holds."""
        levels = self.levels(gpu_type)
        held = [(v, h) for v in victims if (h := self.holding.get(v)) is not None and h[1] == gpu_type]
        saved = levels.save() if held else None
        for _, (team, _, gpus) in held:
            levels.add(team, -gpus)
        try:
            yield levels, held
        finally:
            if saved is not None:
                levels.restore(saved)

    def allows(self, job: Job, gpu_type: str) -> bool:
        """Whether ``admits`` says None, without putting into words why not."""
        if gpu_type not in self.governed:
            return True
        levels, team, gpus = self.levels(gpu_type), job.team, _gpus(job)
        return levels.block(team, gpus, to_organisation=not levels.within(team, gpus)) is None

    def _admits(self, levels: TypeQuotas, job: Job, gpu_type: str) -> str | None:
        team, gpus = job.team, _gpus(job)
        block = levels.block(team, gpus, to_organisation=not levels.within(team, gpus))
        if block is None:
            return None
        used, nominal = describe.number(max(0.0, levels.usage[team])), describe.number(levels.nominal[team])
        held = f"team {team or '(none)'} uses {used} of its {nominal} {gpu_type}"
        more = describe.number(gpus)
        if block.level == team:
            limit = describe.number(block.amount)
            most = levels.nominal[team] + block.amount
            if gpus > most + EPSILON:  # not a matter of waiting: the job alone asks more than the team may hold
                return (
                    f"{held}; the job asks {more}, more than the team may ever hold ({describe.number(most)}: its"
                    f" quota of {nominal} and borrowing limit of {limit}): ask for fewer GPUs or a larger quota"
                )
            return f"{held}; {more} more would borrow beyond its borrowing limit of {limit}"
        if block.level is not None:
            limit = describe.number(block.amount)
            return f"{held}; {more} more would borrow beyond team {block.level}'s borrowing limit of {limit}"
        return f"{held}; {_short(levels, job, gpu_type, block.amount)}"

    def blocking_level(self, job: Job, gpu_type: str | None) -> str | None:
        """For a job within its team's nominal, the level whose borrowing limit still keeps it out:
        borrowers under that level hold the team's quota. None otherwise."""
        if gpu_type is None or gpu_type not in self.governed or self.tree.flat:
            return None
        levels, team, gpus = self.levels(gpu_type), job.team, _gpus(job)
        if not levels.within(team, gpus):
            return None
        block = levels.block(team, gpus, to_organisation=False)
        return None if block is None else block.level

    def pool(self, gpu_type: str, borrower: str | None = None) -> float:
        """Idle quota ``borrower`` may still borrow (borrowing limits aside): unowned GPUs plus other
        teams' lendable unused nominal, less what is already lent; without a borrower, all of it."""
        levels = self.levels(gpu_type)
        return levels.left() if borrower is None else levels.borrowable(borrower)

    def within_nominal(self, job: Job, gpu_type: str | None) -> bool:
        """Whether the job fits its team's nominal quota (always, for a type without quotas)."""
        if gpu_type is None or gpu_type not in self.governed:
            return True
        return self.levels(gpu_type).within(job.team, _gpus(job))

    def retaken(
        self, job: Job, gpu_type: str | None, victims: Sequence[str], levels_of: Mapping[str, int], level: int
    ) -> bool:
        """Whether stopping these running jobs for the job (at preemption ``level``; ``levels_of`` gives the
        victims') would be undone: once they give back, one of them, queued again, would borrow nothing
        and be tried before the job, and take its GPUs back, cycle after cycle. Such a victim
        is tried first when the job would still borrow (jobs that would borrow go last), or when its level
        is as high or higher (reclaim may stop any level)."""
        if gpu_type is None or gpu_type not in self.governed:
            return False
        with self._given_back(gpu_type, victims) as (levels, held):
            borrows = not levels.within(job.team, _gpus(job))
            back = [v for v, (t, _, gpus) in held if levels.lends_nothing_to(t, gpus)]  # queued with the owners
            return any(borrows or levels_of[v] >= level for v in back)

    def borrowing(self, running_job_id: str) -> bool:
        """Whether the running job's team borrows its GPU type: the team (with its child teams) uses more
        than its nominal, or the team's own jobs use more than its unassigned quota (its child teams' idle
        nominal, theirs to take back)."""
        held = self.holding.get(running_job_id)
        return held is not None and self.borrows(held[0], held[1])

    def borrows(self, team: str, gpu_type: str) -> bool:
        """``borrowing`` of any running job of the team that holds GPUs of the type."""
        if gpu_type not in self.governed:
            return False
        levels = self.levels(gpu_type)
        return levels.over(team) or levels.own_over(team)

    def governs(self, running_job_id: str) -> bool:
        """Whether the running job holds GPUs of a type teams have quotas for."""
        held = self.holding.get(running_job_id)
        return held is not None and held[1] in self.governed

    def borrowing_jobs(self) -> frozenset[str]:
        """The running jobs ``borrowing`` is true of, as usage stands now."""
        if self.changes == 0:  # the jobs as the snapshot holds them, by team and GPU type
            members = self._members
            return frozenset().union(*(jobs for (team, t), jobs in members.items() if self.borrows(team, t)))
        borrowing: dict[tuple[str, str], bool] = {}
        out = []
        for job_id, (team, gpu_type, _) in self.holding.items():
            key = (team, gpu_type)
            found = borrowing.get(key)
            if found is None:
                found = borrowing[key] = self.borrowing(job_id)
            if found:
                out.append(job_id)
        return frozenset(out)

    def reclaim_distance(self, running_job_id: str, team: str) -> int | None:
        """How near the running job's team is to ``team`` (the depth where their branches meet: 0 at
        the organisation) when the job may be reclaimed for ``team``: its branch below that level
        uses more than its nominal, or, for a job of one of ``team``'s ancestors, that ancestor's own
        jobs use more than its unassigned quota. None when it may not."""
        held = self.holding.get(running_job_id)
        if held is None or held[1] not in self.governed:
            return None
        depth, branch = self.tree.meeting(team, held[0])
        levels = self.levels(held[1])
        if held[0] != team and self.tree.under(team, held[0]):  # an ancestor's own job, on its child teams' quota
            return depth if levels.own_over(held[0]) else None
        return depth if levels.over(held[0]) and levels.over(branch) else None

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

    def _add(self, team: str, gpu_type: str, gpus: float) -> None:
        self.changes += 1
        self.used[(team, gpu_type)] += gpus
        if gpu_type in self._levels:
            self._levels[gpu_type].add(team, gpus)


def _gpus(job: Job) -> float:
    return job.request.gpus_per_node * job.request.nodes


def _short(levels: TypeQuotas, job: Job, gpu_type: str, lent: float) -> str:
    """``only 2 idle H100 can be lent now; the job needs 4``: what the pool can lend against what the job
    must borrow (its GPUs less its team's unused nominal, which ``lent`` leaves out too)."""
    gpus = _gpus(job)
    borrow = gpus - max(0.0, levels.nominal[job.team] - levels.usage[job.team])
    can = f"only {describe.number(lent)}" if lent > EPSILON else "no"
    needs = f"needs {describe.number(gpus)}"
    if borrow < gpus - EPSILON:
        needs = f"needs to borrow {describe.number(borrow)} of its {describe.number(gpus)}"
    return f"{can} idle {gpu_type} can be lent now; the job {needs}"
