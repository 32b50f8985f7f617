"""Victim search: which lower-priority, preemptible running jobs to stop so a blocked job starts now.

A victim set is only chosen when removing it (a what-if on the ``CapacityView``: release,
place, take back) lets the job be placed now. Among the sets found, the one that loses
the fewest GPU-seconds of work since each victim's last checkpoint wins, then the one with
fewest jobs. Jobs already stopping are free victims: their resources come back soon at no
cost, and they are not preempted again.

Bound: only nodes hosting an eligible victim are searched. On one node, every subset of its victims
is tried when it has at most ``EXHAUSTIVE`` of them (so a one-node job gets the cheapest set exactly);
otherwise victims are added cheapest first and then pruned. A gang takes the ``nodes`` cheapest nodes
of one GPU type (victims shared between nodes are counted once but not exploited). The search is
skipped for a job whose priority has no eligible victim below it. Nodes are scanned by their cheapest
victim's cost, then name, and the scan stops once no later node can beat the options found; a search
that reaches the end of the nodes is named in the plan (``Plan.exhausted_searches``): a caller that
passed only the victims on the first nodes of that order knows its answer may need the others. On the
way, a node whose victims cannot empty enough GPUs, or would lose more than the options found by a
lower bound (``LossBounds``), is passed over unsearched, and a node's sets are tried up to that cost only.
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Callable, Sequence
from datetime import datetime
from itertools import islice

from corral.model import Job, Request, RunningJob
from corral.sched import describe
from corral.sched.node_capacity import NodeCapacity
from corral.sched.placement import candidates, find_placement
from corral.sched.plan import PREEMPTING, Placement, Preemption, Reason
from corral.sched.policy import by_priority
from corral.sched.quota import QuotaLedger
from corral.sched.reclaim_limit import BorrowedOnly
from corral.sched.snapshot import CapacityView, Snapshot
from corral.sched.victim_scan import Beat, Cost, LossBounds, NodeAnswers, VictimSets
from corral.sched.victim_tables import VictimTables

_NEAREST = 1 << 30  # the reach of a search open to any victim: after every narrower reach
SEARCHES_PER_CYCLE = 64  # victim searches per cycle; jobs blocked after that wait for the next cycle

_Option = tuple[Cost, str, tuple[str, ...]]  # (cost, node, victims on it)


class Preemptor:
    """Finds victims for blocked jobs during one cycle; a victim is given to one job only."""

    def __init__(
        self,
        snapshot: Snapshot,
        now: datetime,
        level: Callable[[Job | RunningJob], int] | None = None,
        quota: QuotaLedger | None = None,
    ) -> None:
        self.level: Callable[[Job | RunningJob], int] = level or by_priority
        self.quota = quota
        self.held = held_by = snapshot.allocations_of()
        borrowers = frozenset[str]() if quota is None else quota.borrowing_jobs()
        tables = VictimTables.of(snapshot, held_by, now, self.level, borrowers)
        self.jobs, self.cost, self.on_node = tables.jobs, tables.cost, tables.on_node
        self._levels, self._borrowing, self._by_team = tables.levels, tables.borrowing, tables.by_team
        self._by_type: dict[str, dict[str | None, dict[str, None]]] = {}  # ``_victims_by_type``, once asked
        self._scan = tables.scan
        self.searches = 0
        self.exhausted: dict[str, None] = {}  # jobs whose search scanned every node it was given (in order)
        self._sets = VictimSets(self.cost)
        self._given: dict[str, str] = {}  # victim → the job it was first given to
        self._answers = NodeAnswers(held_by, self._sets)
        self._bounds = LossBounds(self.on_node, self.cost, held_by)
        self.taken: set[str] = set()
        self._borrowed_only = None if quota is None else BorrowedOnly(quota, self.jobs, self.taken)
        self._any_stopping, self._lowest, self._reclaimable = tables.any_stopping, tables.lowest, tables.reclaimable
        self._own_team: str | None = None
        self._scope: str | None = None  # with ``_own_team``: borrowers under this level may be reclaimed too
        self._reach: int | None = None  # reclaim only from borrowers whose branch meets the job's this high up

    def worth_trying(self, job: Job) -> bool:
        """Cheap test: could any victim serve this job at all (and is the cycle's search budget left)?"""
        if self.searches >= SEARCHES_PER_CYCLE:
            return False
        return self._any_stopping or self._reclaimable or (self._lowest is not None and self._lowest < self.level(job))

    def may_search(self) -> bool:
        """Whether any job could still get a victim search this cycle (``worth_trying`` for some level)."""
        return self.searches < SEARCHES_PER_CYCLE and (
            self._any_stopping or self._reclaimable or self._lowest is not None
        )

    def quota_victims(self, job: Job, gpu_type: str) -> list[str]:
        """For a job within its team's nominal that a level above keeps out (``QuotaLedger.blocking_level``):
        the running jobs it may reclaim from, on any node, cheapest first; counts as one search."""
        assert self.quota is not None
        self.searches += 1
        self._own_team, self._scope = job.team, self.quota.blocking_level(job, gpu_type)
        try:
            level = self.level(job)
            found = [v for v in self.jobs if self._eligible(v, job.team, level, True)]
        finally:
            self._own_team = self._scope = None
        return sorted(found, key=lambda v: (self.cost[v], v))

    def eligible(self, job: Job, victim_id: str, gpu_type: str | None = None) -> bool:
        """Whether the victim may be stopped for the job (placed on ``gpu_type``).

        Without quotas: a lower level and preemptible. With quotas, a job within its team's
        nominal quota may also reclaim GPUs from any job of a borrowing team (whose branch of
        the team tree, below where it meets the job's, uses more than its nominal), and a job
        that would borrow never preempts a job of another team that is within its own quota."""
        within = self.quota is None or self.quota.within_nominal(job, gpu_type)
        return self._eligible(victim_id, job.team, self.level(job), within)

    def _eligible(self, victim_id: str, team: str, level: int, within_nominal: bool) -> bool:
        victim = self.jobs[victim_id]
        if victim_id in self.taken:
            return False
        if self._own_team is not None and victim.team != self._own_team:
            return self._scope is not None and within_nominal and self._reclaims(victim_id, team)
        if self._reach is not None:  # only borrowers this far away, for now
            return victim.stopping or (victim.team != team and within_nominal and self._reclaims(victim_id, team))
        if victim.stopping:
            return True
        if victim.team != team and self.quota is not None:
            if within_nominal and self._reclaims(victim_id, team):
                return True  # reclaim
            if not self._borrowing[victim_id] and self.quota.governs(victim_id):
                return False  # a team within its quota is never preempted for another team
        return victim.preemptible and self._levels[victim_id] < level

    def _eligible_among(self, victims: list[str], team: str, level: int, within_nominal: bool) -> list[str]:
        """The victims ``_eligible`` admits, in order: inline where no team or reach limits the search."""
        if self._own_team is not None or self._reach is not None:
            return [v for v in victims if self._eligible(v, team, level, within_nominal)]
        jobs, taken, levels, borrowing, quota = self.jobs, self.taken, self._levels, self._borrowing, self.quota
        out = []
        for v in victims:
            if v in taken:
                continue
            victim = jobs[v]
            if not victim.stopping and victim.team != team and quota is not None:
                if within_nominal and borrowing[v] and self._reclaims(v, team):
                    out.append(v)
                    continue
                if not borrowing[v] and quota.governs(v):
                    continue
            if victim.stopping or (victim.preemptible and levels[v] < level):
                out.append(v)
        return out

    def _reclaims(self, victim_id: str, team: str) -> bool:
        """Whether a job of ``team`` within its nominal may reclaim the victim's GPUs (within scope and reach)."""
        if not self._borrowing[victim_id]:
            return False
        quota = self.quota
        if quota is None or quota.tree.flat:
            return True
        distance = quota.reclaim_distance(victim_id, team)
        if distance is None or (self._reach is not None and distance > self._reach):
            return False
        return self._scope is None or quota.tree.under(self.jobs[victim_id].team, self._scope)

    def find(
        self, view: CapacityView, job: Job, own_team_only: bool = False
    ) -> tuple[Placement, tuple[str, ...]] | None:
        """The placement and cheapest victim set that let the job start now, or None; ``view`` is unchanged.

        ``own_team_only`` limits victims to jobs of the job's own team (a team at its quota
        makes room by stopping its own lower-priority work) and, for a job within its nominal
        that a level above keeps out (``QuotaLedger.blocking_level``), to borrowers under it."""
        self._own_team = job.team if own_team_only else None
        self.searches += 1
        try:
            alone = own_team_only or job.request.gpus_per_node <= 0
            found = self._find(view, job) if alone else self._find_after_given(view, job)
            quota, level = self.quota, self.level(job)
            if found and quota is not None and quota.retaken(job, found[0].gpu_type, found[1], self._levels, level):
                return None  # its victims, queued again before it, would take their GPUs back
            return found
        finally:
            self._own_team = self._scope = None

    def _find_after_given(self, view: CapacityView, job: Job) -> tuple[Placement, tuple[str, ...]] | None:
        """``_find`` on what is free once the victims given to earlier jobs this cycle stop (the view holds
        those jobs on top of their victims, which still run there): what those jobs leave over counts as
        free, so a job waits for it rather than preempting more, and the job also waits for the given
        victims on its nodes."""
        given = list(self._given)
        # In one change (each node re-indexed once), on nodes with a type the job accepts (what is freed elsewhere
        # changes neither where it fits nor its victims there).
        types, on = frozenset(job.request.gpu_types or view.gpu_types), view.nodes.get
        held = [a for v in given for a in self.held[v] if (n := on(a.node)) and not types.isdisjoint(n.gpu_types)]
        if held:
            view.release(held)
        try:
            placement = find_placement(view, job) if given else None
            if placement is not None:
                return placement, self._given_on(placement, given)  # preempts no more
            found = self._find(view, job)
            if found is None or not given:
                return found
            return found[0], tuple(sorted({*found[1], *self._given_on(found[0], given)}))
        finally:
            if held:
                view.take(held)

    def _given_on(self, placement: Placement, given: Sequence[str]) -> tuple[str, ...]:
        placed_on = {a.node for a in placement.allocations}
        return tuple(sorted(v for v in given if any(a.node in placed_on for a in self.held[v])))

    def _find(self, view: CapacityView, job: Job) -> tuple[Placement, tuple[str, ...]] | None:
        request = job.request
        types: Sequence[str | None] = (
            [t for t in (request.gpu_types or view.gpu_types) if t in view.gpu_types]
            if request.gpus_per_node > 0
            else [None]
        )
        best: tuple[int, Cost, int, Placement, tuple[str, ...]] | None = None
        for rank, gpu_type in enumerate(types):
            for reach in self._reaches(job, gpu_type):
                self._reach = reach
                try:
                    victims = self._victims_for_type(view, job, gpu_type)
                finally:
                    self._reach = None
                placement = None if victims is None else self._what_if(view, job, victims)
                if victims is None or placement is None:
                    continue
                option = (_NEAREST if reach is None else reach, self._sets.total(victims), rank, placement, victims)
                if best is None or option[:3] < best[:3]:
                    best = option
                break
        return None if best is None else (best[3], best[4])

    def _reaches(self, job: Job, gpu_type: str | None) -> tuple[int | None, ...]:
        """The reaches to search in turn: a job within its nominal reclaims first from borrowers
        whose branch meets its team's highest up the tree (another branch of the organisation
        before a sibling), then from any victim (None)."""
        quota = self.quota
        if quota is None or quota.tree.flat or self._own_team is not None or not quota.within_nominal(job, gpu_type):
            return (None,)
        depths = {
            depth
            for v, r in self.jobs.items()
            if v not in self.taken
            and r.team != job.team
            and self._borrowing[v]
            and (depth := quota.reclaim_distance(v, job.team)) is not None
        }
        return (*sorted(depths)[:-1], None)

    def commit(self, view: CapacityView, placement: Placement, victims: Sequence[str]) -> None:
        """Hold the placement on the view (on top of the victims, which still run) and use up the victims."""
        view.apply(placement)
        new = [v for v in victims if v not in self._given]  # the others were given to an earlier job
        self.taken.update(victims)
        self._given.update((v, placement.job_id) for v in new)
        quota = self.quota
        if quota is not None:
            for v in victims:
                held = quota.holding.get(v)
                quota.give_back(self.jobs[v])
                groups = None if held is None else self._by_type.get(held[0])
                if groups is not None and held is not None:  # it holds nothing now: it borrows nothing
                    del groups[held[1]][v]
                    groups.setdefault(None, {})[v] = None
            for team in {t for v in victims for t in quota.tree.chain(self.jobs[v].team)}:
                # ``quota.borrowing`` of each of the team's victims: one answer per GPU type they hold
                for gpu_type, members in self._victims_by_type(team).items():
                    borrows = gpu_type is not None and quota.borrows(team, gpu_type)
                    self._borrowing.update(dict.fromkeys(members, borrows))

    def _victims_by_type(self, team: str) -> dict[str | None, dict[str, None]]:
        """The team's victims by the GPU type each holds (None: holds none, or gave it back this cycle)."""
        groups = self._by_type.get(team)
        if groups is None:
            assert self.quota is not None
            holding, groups = self.quota.holding, {}
            for r in self._by_team.get(team, ()):
                held = holding.get(r)
                groups.setdefault(None if held is None else held[1], {})[r] = None
            self._by_type[team] = groups
        return groups

    def preemptions(self, job: Job, victims: Sequence[str], gpu_type: str | None = None) -> tuple[Preemption, ...]:
        """What stopping each victim (not already stopping) for the job is called; ``gpu_type``: where the job goes."""
        out = []
        quota = self.quota
        within = quota is not None and quota.within_nominal(job, gpu_type)
        for v in victims:
            victim = self.jobs[v]
            if victim.stopping or v in self.taken:  # already stopping, or preempted for an earlier job
                continue
            lower = victim.preemptible and self._levels[v] < self.level(job)
            if not lower or (within and victim.team != job.team and quota is not None and quota.governs(v)):  # reclaim
                why = f"reclaiming team {job.team}'s quota from team {victim.team}"
                out.append(Preemption(v, job.id, f"preempted by job {job.id} ({why})", reclaim=True))
            else:
                out.append(Preemption(v, job.id, f"preempted by job {job.id} ({self._why(job, victim)})"))
        return tuple(out)

    def _why(self, job: Job, victim: RunningJob) -> str:
        if job.priority != victim.priority:
            return f"priority {job.priority} > {victim.priority}"
        levels = f"level {self.level(job)} > {self.level(victim)}"
        return f"same priority, ranked above it by the scheduling policy: {levels}"

    def reason(self, base: Reason, job: Job, victims: Sequence[str]) -> Reason:
        new = [v for v in victims if not self.jobs[v].stopping and self._given.get(v) == job.id]
        going = [v for v in victims if v not in new]
        parts = []
        if new:
            lost = sum(self.cost[v][0] for v in new) / 3600
            parts.append(f"preempting {describe.and_list(new)} ({describe.number(round(lost, 2))} GPU-hours lost)")
        if going:
            parts.append(f"waiting for {describe.and_list(going)} to stop")
        then = ", then starts" if going else " to start"  # not "waiting for J to stop to start"
        return Reason(PREEMPTING, f"{' and '.join(parts)}{then}", base.queued)

    def _what_if(self, view: CapacityView, job: Job, victims: Sequence[str]) -> Placement | None:
        held = [a for v in victims for a in self.held[v]]
        if held:
            view.release(held)
        try:
            return find_placement(view, job)
        finally:
            if held:
                view.take(held)

    def _victims_for_type(self, view: CapacityView, job: Job, gpu_type: str | None) -> tuple[str, ...] | None:
        """The cheapest nodes' victims for one share each. Nodes are scanned by the cost of their cheapest
        victim (a lower bound of any option there), then name, and the scan stops once no later node can
        beat the options found, on cost or, at equal cost, on name: exact (whatever else runs on the nodes),
        and short when cheap options exist."""
        request = job.request
        options: list[_Option] = []
        ranked: list[tuple[Cost, str]] = []  # the options' (cost, node), best first
        if request.nodes > 1:  # nodes that already fit cost nothing
            for choice in islice(candidates(view, request, gpu_type), request.nodes):
                options.append(((0.0, 0), choice.node.name, ()))
                insort(ranked, ((0.0, 0), choice.node.name))
        free = {name for _, name, _ in options}
        level, slots = self.level(job), request.gpu_slots_per_node
        within = self.quota is None or self.quota.within_nominal(job, gpu_type)
        if self._own_team is not None and self.quota is not None:
            self._scope = self.quota.blocking_level(job, gpu_type)
        nodes, need, last, bounds, team = view.nodes, request.nodes, -1, self._bounds, job.team
        on_node, eligible_among = self.on_node, self._eligible_among
        whole = gpu_type if request.gpus_per_node > 0 and not request.fractional else None  # as ``gpus_short``
        beat = ranked[need - 1] if len(ranked) >= need else None  # the option to beat, once ``need`` are found
        scan = self._scan.every(view, gpu_type) if within else self._scan.below(view, gpu_type, level)
        for bound, name, of_type, at in scan:
            if beat is not None and (bound, name) > beat:
                break  # an option here costs at least ``bound``: it loses to the options found, as do later ones
            last = at
            if of_type < slots or name in free or (node := nodes.get(name)) is None:
                continue
            short = 0 if whole is None else slots if node.free_gpus == 0 else slots - len(node.empty_gpus(whole))
            if short > 1 and beat is not None and bounds.beyond_short(name, short, beat[0]):
                continue
            eligible = eligible_among(on_node[name], team, level, within)
            if not eligible or bounds.too_few(name, short, eligible):
                continue
            found = self._cheapest_on_node_kept(node, request, gpu_type, eligible, team, beat)
            if found is not None:
                total = self._sets.total(found)
                options.append((total, name, found))
                insort(ranked, (total, name))
                beat = ranked[need - 1] if len(ranked) >= need else None
        else:
            # Reaching the end of the nodes passed over some (``below``) only: the scan stopped short
            # when the last of those left could not beat the options found (the order rises by cost).
            every = self._scan.every(view, gpu_type)
            if not (last + 1 < len(every) and beat is not None and every[-1][:2] > beat):
                self.exhausted[job.id] = None
        if len(options) < request.nodes:
            return None
        chosen = sorted(options)[: request.nodes]
        victims = tuple(sorted({v for _, _, victims in chosen for v in victims}))
        limit = self._borrowed_only
        return victims if request.nodes == 1 or limit is None or limit.allows(job.team, victims) else None

    def _cheapest_on_node_kept(
        self, node: NodeCapacity, request: Request, gpu_type: str | None, eligible: list[str], team: str, beat: Beat
    ) -> tuple[str, ...] | None:
        # Which victim sets take back from other teams only what they borrow; None where any set does. With
        # it, the answer depends on the job's team and on the usage of the teams it reads.
        limit = self._borrowed_only
        usage = None if limit is None else limit.depends_on(team, eligible)
        if limit is None or usage is None:
            return self._answers.cheapest(node, request, gpu_type, eligible, None, beat)
        allowed: Callable[[tuple[str, ...]], bool] = lambda victims: limit.allows(team, victims)  # noqa: E731
        return self._answers.cheapest(node, request, gpu_type, eligible, allowed, beat, (team, *usage))
