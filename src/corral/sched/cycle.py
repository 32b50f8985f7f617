"""One scheduling cycle: ``schedule(snapshot, policy, now) -> Plan``."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from corral.model import Allocation, Job, Request
from corral.sched.backfill import blocked_reason, ends_by, find_reservation, guard_view, reserved_reason, when
from corral.sched.fairshare import share_tables
from corral.sched.feasibility import NodesAwaited, never_runs
from corral.sched.order import Groups, Queue, ordered_in_two, queue_key
from corral.sched.placement import find_placement
from corral.sched.plan import FASTER_GPU, IN_ORDER, QUOTA, Placement, Plan, Preemption, Reason, Reservation
from corral.sched.policy import Policy
from corral.sched.preempt import Preemptor
from corral.sched.queue import Objects
from corral.sched.quota import QuotaLedger
from corral.sched.quota_gate import QuotaGate
from corral.sched.reason_map import Reasons
from corral.sched.reasons import Line, explain
from corral.sched.snapshot import CapacityView, Snapshot
from corral.sched.speed import CHECKS_PER_CYCLE, faster_soon


def schedule(snapshot: Snapshot, policy: Policy, now: datetime) -> Plan:
    """Place pending jobs in the policy's order on what is free now.

    A job that does not fit may preempt lower-priority, preemptible running jobs (when the
    policy allows it and that lets it start now); it is then held, not placed, until its
    victims release their resources. With backfill, the highest-priority job still blocked
    gets a reservation at its earliest start, and later jobs start only if they do not delay
    it. Without backfill a blocked job is skipped and later jobs may still be placed, unless the
    policy keeps a strict order: then the first job that could run but does not start holds back
    every later one. The same inputs always give the same plan.
    """
    return _Cycle(snapshot, policy, now).run()


@dataclass
class _Cycle:
    snapshot: Snapshot
    policy: Policy
    now: datetime
    placements: list[Placement] = field(default_factory=list)
    preemptions: list[Preemption] = field(default_factory=list)
    line: Line = field(default_factory=Line)  # the jobs left waiting, in order
    taken: list[Allocation] = field(default_factory=list)  # placements and preemption holds, in order
    applied: list[Placement] = field(default_factory=list)  # placements and holds: all that changed the view
    special: dict[str, tuple[str, ...]] = field(default_factory=dict)  # job -> victims, or () when held back
    holders: dict[str, Job] = field(default_factory=dict)  # job -> the job as queued, for jobs holding victims
    reservation: Reservation | None = None
    guard: CapacityView | None = None
    reserve_tried: bool = False
    quota: QuotaLedger | None = None
    over_quota: dict[str, str] = field(default_factory=dict)  # job → why its team may not take more now
    waits_for_faster: dict[str, tuple[str, datetime]] = field(default_factory=dict)  # job → why, and when it starts
    speed_checks: int = 0
    quota_unchecked: set[str] = field(default_factory=set)  # waiting without a quota check: nothing fits them
    rest: Queue | None = None  # the queue after ``line``: waits as a whole, preempting nothing
    unfit: set[tuple[bool, Request]] = field(default_factory=set)  # (on the view, not the guard; request): no fit
    unfit_now: set[Request] = field(default_factory=set)  # the requests (True, request) in ``unfit`` holds
    no_victims: set[tuple[bool, Request, int, str]] = field(default_factory=set)  # (as ``unfit``, level, team)
    checked: tuple[int, int] | None = None  # (unfit requests, victim searches) when the rest was last checked
    gate: QuotaGate | None = None  # what the team quotas let each job do, with quotas
    fits: dict[tuple[int, Request], bool] = field(default_factory=dict)  # (view version, request) → fits the view
    placed_ends: list[tuple[datetime, Placement]] = field(default_factory=list)  # placed with a time limit: its end
    queued_requests: set[Request] = field(default_factory=set)  # the requests of the queue
    groups: Groups | None = None  # the groups of the queue's jobs
    queued_unfit: int = -1  # how many of ``queued_requests`` do not fit what is free now, once asked for
    blocker: Job | None = None  # under a strict order: the job that did not start, holding back the rest
    seen: int = 0  # under a strict order: how many of ``line.jobs`` were checked for being the blocker
    awaited: NodesAwaited | None = None  # with quotas: requests that wait for nodes to come back, whatever the quota

    def run(self) -> Plan:
        policy = self.policy
        view = self.snapshot.view(policy.gpu_ranker, policy.cpu_ranker)
        self.quota = QuotaLedger(self.snapshot) if self.snapshot.quotas else None
        self.gate = None if self.quota is None else QuotaGate(self.quota)
        self.awaited = None if self.gate is None else NodesAwaited(self.snapshot)
        preemptor = (
            Preemptor(self.snapshot, self.now, policy.level, self.quota)
            if policy.preemption and self.snapshot.running
            else None
        )
        # Equal requests come as one object, so that the sets and dicts below find them by identity.
        queue, split, groups = self._queue(view.gpu_types)
        self.queued_requests, self.groups = groups.requests(), groups
        # Jobs that would borrow come after the others; a job of the first part that would borrow on some of
        # the types it accepts is tried there on the others only, and, if that leaves it waiting, again on all
        # its types among the jobs that would borrow (``deferred``, in queue order).
        deferred: list[int] = []  # by place in ``queue``
        rest_at = self._pass(queue.items, split, view, preemptor, deferred)
        later = queue.part(split).merged(queue.picked(deferred)) if deferred else queue.part(split)
        if rest_at is not None:
            self.rest = Queue.joined(queue.part(rest_at, split), later)
        else:
            rest_at = self._pass(later.items, len(later), view, preemptor, None)
            if rest_at is not None:
                self.rest = later.part(rest_at)
        reasons = self._reasons(view, preemptor)
        self.snapshot.worked(view, self.applied)
        return Plan(
            placements=tuple(self.placements),
            reasons=reasons,
            preemptions=tuple(self.preemptions),
            reservations=() if self.reservation is None else (self.reservation,),
            exhausted_searches=() if preemptor is None else tuple(preemptor.exhausted),
            waiting=reasons.ids(),  # in the order of ``self.line``
        )

    def _pass(
        self,
        queue: Objects,
        stop: int,
        view: CapacityView,
        preemptor: Preemptor | None,
        deferred: list[int] | None,
    ) -> int | None:
        """Try ``queue[:stop]`` in order; where the rest of it waits as it is, the index it starts at.

        With ``deferred``, a job that would borrow on some of the GPU types it accepts (past its team's
        nominal quota, as the quota stands when it is tried) is placed, or preempts, only on the others:
        where it would go to a type it borrows, or finds no victims on the others, it is left out of
        ``line`` and its place added to ``deferred``, to be tried again on all its types."""
        # The views only shrink during a cycle, so a request that did not fit one never fits it later.
        unfit_now = self.unfit_now
        waiting, line_ids, line_numbers = self.line.jobs, self.line.ids.append, self.line.numbers.append
        own_types = None if deferred is None or self.gate is None else self.gate.own_types
        later = [] if deferred is None else deferred  # ``own_types`` is None without ``deferred``
        strict = self.policy.strict_order
        for at in range(stop):
            item = queue[at]
            queued, request = item[-4], item[-3]
            if strict and len(waiting) > self.seen:  # the first job that could run but did not start: the rest wait
                nodes, shapes = self.snapshot.nodes, self.snapshot.shapes  # the first that could ever run blocks
                self.blocker = next((j for j in waiting[self.seen :] if not never_runs(j.request, nodes, shapes)), None)
                self.seen = len(waiting)
                if self.blocker is not None:
                    return at
            if request in unfit_now and (preemptor is None or not preemptor.worth_trying(queued)):
                now_checked = (len(unfit_now), 0 if preemptor is None else preemptor.searches)
                if now_checked != self.checked:
                    self.checked = now_checked
                    if self._rest_all_wait(unfit_now, preemptor):
                        return at
                if strict:  # does not fit what is free, whatever its quota allows
                    self.quota_unchecked.add(queued.id)
                    self._waits(queued, request)
                else:  # waits as its group does
                    line_ids(item[-1])
                    line_numbers(item[-2])
                continue
            own = None if own_types is None else own_types(item[-2])
            if own is None:
                self._try(queued, request, view, preemptor, None)
            elif not own or not self._try(queued, request, view, preemptor, own):
                later.append(at)
        return None

    def _try(
        self,
        queued: Job,
        request: Request,
        view: CapacityView,
        preemptor: Preemptor | None,
        own: tuple[str, ...] | None,
    ) -> bool:
        """Place the job, hold it while victims stop, or leave it waiting, and say True. With ``own`` (the GPU
        types where its team does not borrow), it is placed, or preempts, only there (a job that lists types
        is not placed there when it prefers a type it borrows on): a job it leaves neither placed nor held is
        not left waiting, nothing is said of it, and False comes back."""
        policy, unfit, unfit_now = self.policy, self.unfit, self.unfit_now
        job = self._within_quota(queued, view)
        if job is None:
            room = queued if own is None else self._limited(queued, own, view)
            held = preemptor is not None and room is not None and self._make_room_in_team(room, view, preemptor)
            if held or own is not None:
                self.over_quota.pop(queued.id, None)
            if own is not None and not held:
                return False
            self._waits(queued, request)
            return True
        if own is not None and not queued.request.gpu_types:  # no type preferred: only where it does not borrow
            job = self._limited(job, own, view)
            if job is None:
                return False
        guarded = self.reservation is not None and not ends_by(job, self.now, self.reservation.start)
        target = self.guard if guarded and self.guard is not None else view
        key = (target is view, request if job is queued else job.request)
        placement = None if key in unfit else find_placement(target, job)
        if placement is not None and own is not None and placement.gpu_type not in own:
            return False  # it would go where its team borrows: after the jobs that do not
        if placement is not None and self._faster_soon(job, placement):
            self._waits(queued, request)
            return True
        if placement is not None:
            self._take(view, placement)
            self.placements.append(placement)
            if job.time_limit_s is not None and not self.reserve_tried:
                self.placed_ends.append((self.now + timedelta(seconds=job.time_limit_s), placement))
            if self.quota is not None:
                self.quota.take(job, placement.gpu_type)
            return True
        self._unfit(unfit, unfit_now, key)
        searched = job if own is None else self._limited(job, own, view)
        if searched is not None and preemptor is not None and preemptor.worth_trying(searched):
            team = searched.team if self.quota is not None else ""  # with quotas, its victims depend on it
            tried = (target is view, searched.request, policy.level(searched), team)
            found = None if tried in self.no_victims else preemptor.find(target, searched)
            if found is not None:
                self._hold(view, preemptor, searched, *found)
                self.holders[job.id] = queued
                self._waits(queued, request)
                return True
            self.no_victims.add(tried)
        if own is not None:
            return False
        if target is not view:
            if job.request not in unfit_now and self._fits_now(view, job, unfit, unfit_now):
                self.special[job.id] = ()
        elif policy.backfill and not self.reserve_tried:
            self._reserve(job, view)
        self._waits(queued, request)
        return True

    def _waits(self, queued: Job, request: Request) -> None:
        self.line.add(queued, request)

    def _within_quota(self, job: Job, view: CapacityView) -> Job | None:
        """The job limited to the GPU types its team's quota allows now; None (with a reason) if none."""
        if self.gate is None or job.request.gpus_per_node <= 0:
            return job
        found = self.gate.admit(job, view)
        if isinstance(found, str):
            if self.awaited is None or not self.awaited.waits(job.request):  # else it waits for nodes to return
                self.over_quota[job.id] = found
            return None
        return found

    def _limited(self, job: Job, own: tuple[str, ...], view: CapacityView) -> Job | None:
        assert self.gate is not None  # ``own`` comes from it
        return self.gate.limited(job, own, view)

    def _rest_all_wait(self, unfit_now: set[Request], preemptor: Preemptor | None) -> bool:
        """Whether every job still in the queue waits as it is: no request of the queue fits what is free,
        and no victim search is left. Then the rest of the queue goes to waiting as a whole."""
        if preemptor is not None and preemptor.may_search():
            return False
        if self.queued_unfit < 0:
            self.queued_unfit = len(self.queued_requests & unfit_now)
        return self.queued_unfit == len(self.queued_requests)

    def _fits_now(
        self, view: CapacityView, job: Job, unfit: set[tuple[bool, Request]], unfit_now: set[Request]
    ) -> bool:
        """Whether the job fits what is free now; kept per request until the view changes."""
        key = (view.version, job.request)
        fits = self.fits.get(key)
        if fits is None:
            fits = self.fits[key] = find_placement(view, job) is not None
            if not fits:
                self._unfit(unfit, unfit_now, (True, job.request))
        return fits

    def _unfit(self, unfit: set[tuple[bool, Request]], unfit_now: set[Request], key: tuple[bool, Request]) -> None:
        unfit.add(key)
        if key[0] and key[1] not in unfit_now:
            unfit_now.add(key[1])
            if self.queued_unfit >= 0 and key[1] in self.queued_requests:
                self.queued_unfit += 1

    def _queue(self, gpu_types: tuple[str, ...]) -> tuple[Queue, int, Groups]:
        """The pending jobs in the policy's order; with fair share, the team's and user's share come right
        after priority. With quotas, jobs that would borrow come after all others (``QuotaGate.borrowing``)."""
        policy, fair = self.policy, self.snapshot.fair_share
        tables = share_tables(self.snapshot, fair) if policy.fair_share and fair is not None else None
        borrows = self.gate.borrowing(gpu_types) if self.gate is not None else None
        # A policy's order is a function of the job alone, so with these inputs equal a job's key is the
        # same from cycle to cycle.
        shares = None if tables is None else tuple(tuple(sorted(table.items())) for table in tables)
        inputs = (policy.job_order, shares)
        return ordered_in_two(self.snapshot.pending, queue_key(policy.job_order, tables), inputs, borrows)

    def _make_room_in_team(self, job: Job, view: CapacityView, preemptor: Preemptor) -> bool:
        """A job over its team's quota may still stop lower-priority jobs of its own team to fit within it
        (and a job within it, that a level above keeps out, may reclaim from borrowers under that level: on
        the nodes it goes to, or, where it fits now and only quota keeps it out, on any node)."""
        quota = self.quota
        if quota is None or not preemptor.worth_trying(job):
            return False
        found = preemptor.find(view, job, own_team_only=True)
        if found is not None and (found[0].gpu_type is None or not quota.admits(job, found[0].gpu_type, found[1])):
            held, victims = found
        else:  # no victims where it would go, or too little quota freed: it goes where it fits now, and the
            placement = find_placement(view, job)  # quota comes back from borrowers on any node
            gpu_type = None if placement is None else placement.gpu_type
            if placement is None or gpu_type is None or quota.blocking_level(job, gpu_type) is None:
                return False
            chosen: list[str] = []
            for victim in preemptor.quota_victims(job, gpu_type):
                if quota.held_by([victim], gpu_type) > 0:
                    chosen.append(victim)
                    if quota.admits(job, gpu_type, chosen) is None:
                        break
            else:
                return False
            held, victims = placement, tuple(sorted(chosen))
        self._hold(view, preemptor, job, held, victims)
        self.holders[job.id] = job
        return True

    def _hold(
        self, view: CapacityView, preemptor: Preemptor, job: Job, held: Placement, victims: tuple[str, ...]
    ) -> None:
        """Keep ``held`` for the job while its victims stop; it is placed in a later cycle."""
        named = preemptor.preemptions(job, victims, held.gpu_type)  # as quota stands before the victims give back
        preemptor.commit(view, held, victims)
        if self.guard is not None:
            self.guard.apply(held)
        self._taken(held)
        self.preemptions.extend(named)
        self.special[job.id] = victims
        if self.quota is not None:
            self.quota.take(job, held.gpu_type)

    def _faster_soon(self, job: Job, placement: Placement) -> bool:
        """Hold the job back when a faster GPU type it prefers frees up soon enough to finish it sooner."""
        speeds, chosen, preferred = self.snapshot.gpu_speed, placement.gpu_type, job.request.gpu_types
        if not speeds or chosen is None or not preferred or chosen == preferred[0]:
            return False
        if self.speed_checks >= CHECKS_PER_CYCLE:
            return False
        self.speed_checks += 1
        found = faster_soon(job, chosen, speeds, self.snapshot, self.policy, self.now, self.taken)
        if found is None:
            return False
        faster, wait = found
        at = self.now + timedelta(seconds=wait)
        self.waits_for_faster[job.id] = (
            f"waiting for {faster} GPUs, expected to free up at {when(at, self.now)}:"
            f" the job finishes sooner there than on {chosen} now",
            at,
        )
        return True

    def _take(self, view: CapacityView, placement: Placement) -> None:
        view.apply(placement)
        if self.guard is not None:
            self.guard.apply(placement)
        self._taken(placement)

    def _taken(self, placement: Placement) -> None:
        self.taken.extend(placement.allocations)
        self.applied.append(placement)

    def _reserve(self, job: Job, view: CapacityView) -> None:
        """Reserve for the first blocked job that could ever fit; one attempt per cycle bounds the cost.
        ``view`` is what is free now: the snapshot's view less ``taken``."""
        if self.snapshot.shapes.never_fits(job.request) is not None:
            return
        self.reserve_tried = True
        stopped = [p.victim_job_id for p in self.preemptions]
        self.reservation = find_reservation(
            job, self.snapshot, self.policy, self.now, self.taken, stopped, view, self.placed_ends
        )
        if self.reservation is not None:
            self.guard = guard_view(self.snapshot, self.policy, self.taken, self.reservation, view)

    def _reasons(self, view: CapacityView, preemptor: Preemptor | None) -> Reasons:
        known = {job_id: (FASTER_GPU, message) for job_id, (message, _) in self.waits_for_faster.items()}
        known.update((job_id, (QUOTA, message)) for job_id, message in self.over_quota.items())
        quota = None if self.gate is None or self.awaited is None else self.awaited.unless(self.gate.reasons(view))
        line, unchecked = self.line, self.quota_unchecked
        behind = None
        if self.blocker is not None:
            behind = Reason(IN_ORDER, f"waiting behind job {self.blocker.id}: jobs start in submit order", True)
        groups, rest = self.groups, self.rest
        reasons = explain(line, view, self.snapshot, known, unchecked, quota, groups, rest, behind)
        for job_id, (_, at) in self.waits_for_faster.items():  # it starts when the faster GPUs free up
            if known[job_id][0] == FASTER_GPU and job_id in reasons:
                reasons.replace(job_id, reasons[job_id]._replace(expected_start=at))
        reservation = self.reservation
        if reservation is not None and reservation.job_id in reasons and reservation.job_id not in known:
            reasons.replace(reservation.job_id, reserved_reason(reasons[reservation.job_id], reservation, self.now))
        for job_id, victims in self.special.items():
            if job_id in known or job_id not in reasons or (reservation is not None and job_id == reservation.job_id):
                continue
            base = reasons[job_id]
            if victims and preemptor is not None:
                reasons.replace(job_id, preemptor.reason(base, self.holders[job_id], victims))
            elif reservation is not None:
                reasons.replace(job_id, blocked_reason(base, reservation, self.now))
        return reasons
