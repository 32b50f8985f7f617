"""Discrete-event replay on a virtual clock: one ``schedule()`` per moment something happens.

Events are arrivals, finishes and, for policies with service thresholds, a running job
crossing one. The engine calls ``corral.sched.schedule`` unchanged and applies each Plan in
memory: placements start jobs; preempted jobs stop at once, lose the work since their last
checkpoint and queue again; the job that preempted starts in the next cycle, at the same
moment. By default each cycle's Snapshot holds only what can matter to it (see
``corral.sim.state``); ``prune=False`` passes every node, allocation, pending job and (under
a preemptive policy) running job, as the head does, and gives the same placements.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from corral.model import Job, Node, Quotas, RunningJob
from corral.sched import Placement, Plan, Policy, schedule
from corral.sched.history import FinishedJobs
from corral.sim.progress import JobRun, held_gpus
from corral.sim.result import JobRecord, Sample, SimResult, Unfinished
from corral.sim.state import ClusterState
from corral.sim.victims import plan_cycle
from corral.sim.workload import EPOCH, Workload

ROUNDS_PER_MOMENT = 10_000
"""Cycles at one moment after which a policy that keeps preempting is reported as looping."""

MARK_LEAD_S = 1.0
"""Before each moment's cycle, a running job due to cross a service threshold within this many seconds is
indexed by its level now: the scheduler counts a threshold as crossed a little early (``corral.sched.las``),
and the crossing time computed from a GPU count that does not divide exactly (3 GPUs, or a fraction of one)
may fall a rounding error after the moment the job's view shows it crossed."""

CLOCK_LIMIT_S = 5_000 * 365 * 86_400
"""The simulated clock stops here (5,000 years after the trace's origin), well before dates overflow."""


class SimulationError(ValueError):
    """A workload the simulator cannot replay: its simulated time would run past ``CLOCK_LIMIT_S``."""


class PreemptionLoopError(RuntimeError):
    """The scheduler kept preempting at one moment for ``ROUNDS_PER_MOMENT`` cycles: its plans stop and
    start the same jobs again and again, so the simulated clock cannot move on."""


def simulate(
    workload: Workload,
    nodes: Sequence[Node],
    policy: Policy,
    speed: Mapping[str, float] | None = None,
    *,
    prune: bool = True,
    checkpoint_s: float = 0.0,
    timeline: bool = False,
    on_finish: Callable[[], None] | None = None,
    scheduler_speed: Mapping[str, float] | None = None,
    quotas: Quotas | None = None,
    team_parents: Mapping[str, str] | None = None,
    cross_rack_slowdown: float = 1.0,
) -> SimResult:
    """Replay the workload: a job runs for its traced duration divided by its GPU type's speed.

    Under a preemptive policy every traced job is preemptible; a preempted job keeps the work
    up to its last checkpoint: every ``checkpoint_s`` seconds of a run (per job when the trace
    says), or all of it when ``checkpoint_s`` is 0. ``timeline`` records busy GPUs and pending
    jobs after every moment (for plots); ``on_finish`` is called each time a job finishes.
    Every cycle's Snapshot carries ``scheduler_speed`` as its ``gpu_speed`` (default: ``speed``),
    so a job may wait for a faster GPU type it prefers, as on the head; and ``quotas`` and
    ``team_parents`` (teams are the trace's ``vc``), so teams borrow and reclaim as on the head.
    A gang placed on nodes of more than one rack (their ``rack`` labels) runs ``cross_rack_slowdown``
    times longer for as long as it runs there.
    """
    sched_speed = dict(speed or {}) if scheduler_speed is None else dict(scheduler_speed)
    state = ClusterState(nodes, policy, prune, sched_speed, quotas, team_parents)
    speeds = dict(speed or {})
    return _Engine(workload, nodes, policy, speeds, state, checkpoint_s, timeline, on_finish, cross_rack_slowdown).run()


class _Engine:
    def __init__(
        self,
        workload: Workload,
        nodes: Sequence[Node],
        policy: Policy,
        speed: dict[str, float],
        state: ClusterState,
        checkpoint_s: float,
        timeline: bool = False,
        on_finish: Callable[[], None] | None = None,
        cross_rack_slowdown: float = 1.0,
    ) -> None:
        self.workload = workload
        self.policy = policy
        self.speed = speed
        self.checkpoint_s = checkpoint_s
        self.state = state
        self.total_gpus = sum(len(node.gpus) for node in nodes)
        self.runs = {j.job.id: JobRun(j) for j in workload.jobs}
        self.finishes: list[tuple[float, int, str, int]] = []  # (when, seq, job id, run number)
        self.marks: list[tuple[float, int, str, int]] = []  # a running job crosses a service threshold
        self.records: list[JobRecord] = []
        self.cycles = 0
        self.preemptions = 0
        self.history = FinishedJobs()
        self.group = {n.name: n.labels.get("group", "") for n in nodes}
        self.cross_rack_slowdown = cross_rack_slowdown
        # Each node's rack, read only when a gang across racks runs slower.
        self.rack = {n.name: n.labels.get("rack", "") for n in nodes} if cross_rack_slowdown != 1.0 else {}
        self.busy_by_group: dict[str, float] = {}
        self.busy_gpus: float = 0  # fractional jobs count their fractions
        self.samples: list[Sample] | None = [] if timeline else None
        self.on_finish = on_finish
        self.views: dict[str, tuple[int, float, RunningJob]] = {}  # job → (run, start, view) at ``views_at``
        self.views_at = -math.inf

    def run(self) -> SimResult:
        arrivals = self.workload.jobs
        i, n = 0, len(arrivals)
        while True:
            now = min(
                arrivals[i].trace.submit_s if i < n else math.inf,
                self._next(self.finishes),
                self._next(self.marks),
            )
            if now == math.inf:
                break
            if now > CLOCK_LIMIT_S:
                raise SimulationError(
                    f"the simulated clock reached {now:.4g} s, past its limit of {CLOCK_LIMIT_S} s (5,000 years):"
                    " the trace's jobs take longer than that on this cluster"
                )
            while self._next(self.finishes) <= now:
                self._finish(heapq.heappop(self.finishes)[2], now)
            while self._next(self.marks) <= now:
                self._cross(heapq.heappop(self.marks)[2], now)
            if self.marks and self.marks[0][0] <= now + MARK_LEAD_S:
                self._relevel_soon(now)
            while i < n and arrivals[i].trace.submit_s <= now:
                self.state.add(self._pending(self.runs[arrivals[i].job.id]))
                i += 1
            self._plan(now)
            if self.samples is not None:
                self.samples.append(Sample(now, self.busy_gpus, self.state.pending_count))
        unfinished = self._unfinished()
        return SimResult(
            policy=self.policy.name,
            records=tuple(self.records),
            total_gpus=self.total_gpus,
            cycles=self.cycles,
            preemptions=self.preemptions,
            unfinished=len(unfinished),
            unfinished_jobs=unfinished,
            lost_gpu_s=sum(r.lost_gpu_s for r in self.records) + sum(u.lost_gpu_s for u in unfinished),
            busy_gpu_s_by_group=dict(sorted(self.busy_by_group.items())),
            timeline=tuple(self.samples or ()),
        )

    def _unfinished(self) -> tuple[Unfinished, ...]:
        """The jobs still queued when no event is left: the scheduler never placed them again."""
        finished = {r.id for r in self.records}
        return tuple(
            Unfinished(
                id=job_id,
                submit_s=run.item.trace.submit_s,
                gpus=run.item.trace.gpus,
                start_s=run.first_start,
                preemptions=run.preempted,
                lost_gpu_s=run.lost,
                team=run.item.job.team,
            )
            for job_id, run in self.runs.items()
            if job_id not in finished
        )

    def _next(self, events: list[tuple[float, int, str, int]]) -> float:
        """The earliest event still current (a preempted run's events are dropped)."""
        while events and events[0][3] != self.runs[events[0][2]].run_no:
            heapq.heappop(events)
        return events[0][0] if events else math.inf

    def _plan(self, now: float) -> None:
        at = EPOCH + timedelta(seconds=now)
        victims: dict[str, str] = {}  # victim -> the job it was stopped for, in the last rounds
        for round_no in range(ROUNDS_PER_MOMENT):
            plan = self._lean_plan(at)
            if plan is None:
                plan = plan_cycle(self.state, self.policy, lambda ids: self._running(ids, now), at)
                if plan is None:
                    return
                self.cycles += 1
            self._apply(plan, now)
            if not plan.preemptions:
                return
            if round_no >= ROUNDS_PER_MOMENT - 10:
                victims.update((p.victim_job_id, p.for_job_id) for p in plan.preemptions)
        stops = ", ".join(f"{victim} for {job}" for victim, job in sorted(victims.items())[:5])
        raise PreemptionLoopError(
            f"policy {self.policy.name!r} keeps preempting at t={now:g} s: after {ROUNDS_PER_MOMENT:,} cycles at"
            f" that moment its plans still stop running jobs ({stops}) and start them again, so the simulation"
            " cannot go on"
        )

    def _lean_plan(self, at: datetime) -> Plan | None:
        """The plan of a cycle without running jobs, when it is the plan the full cycle would make.

        The scheduler only looks for victims for a job that does not fit what is free, so when
        every job able to preempt someone is placed without, running jobs change nothing.
        """
        lowest = self.state.lowest_running()
        if lowest is None:
            return None
        able = self.state.count_above(lowest)
        if not able:
            return None
        snapshot = self.state.lean()
        if snapshot is None or able > len(snapshot.pending):
            return None
        plan = schedule(snapshot, self.policy, at)
        level, queued = self.policy.level, self.state.keys
        if sum(1 for p in plan.placements if level(queued[p.job_id][2]) > lowest) < able:
            return None
        self.cycles += 1
        return plan

    def _apply(self, plan: Plan, now: float) -> None:
        for placement in plan.placements:
            self._start(placement, now)
        for preemption in plan.preemptions:
            self._stop(preemption.victim_job_id, now)

    def _start(self, placement: Placement, now: float) -> None:
        run = self.runs[placement.job_id]
        job = self.state.keys[placement.job_id][2]
        run.place(placement, now)
        run.speed = self.speed.get(placement.gpu_type or "", 1.0)
        if self.rack and len({self.rack[a.node] for a in placement.allocations}) > 1:
            run.speed /= self.cross_rack_slowdown
        if run.first_start is None:
            run.first_start = now
        else:  # queued again since it was preempted
            run.requeued += now - run.stopped
        self.busy_gpus = _exact(self.busy_gpus + run.gpus)
        self.state.start(job, placement, self._running((job.id,), now)[0])
        heapq.heappush(self.finishes, (now + run.work_left / run.speed, job.seq, job.id, run.run_no))
        self._mark(run, now)

    def _stop(self, job_id: str, now: float) -> None:
        """Preempt: keep the work up to the last checkpoint, and queue the job again."""
        run = self.runs[job_id]
        assert run.placement is not None
        elapsed, gpus = now - run.started, run.gpus
        saved = run.saved_s(now, self.checkpoint_s)
        run.work_left = max(0.0, run.work_left - saved * run.speed)
        run.attained += elapsed * gpus
        run.busy += elapsed * gpus
        run.lost += (elapsed - saved) * gpus
        run.preempted += 1
        run.stopped = now
        run.run_no += 1
        self.preemptions += 1
        self._release(run.placement, elapsed)
        run.place(None, now)
        self.state.add(self._pending(run))

    def _finish(self, job_id: str, now: float) -> None:
        run = self.runs[job_id]
        placement = run.placement
        assert placement is not None and run.first_start is not None
        run.busy += (now - run.started) * run.gpus
        self._release(placement, now - run.started)
        self.history.add(run.item.job.user, run.item.job.team, run.busy)
        self.records.append(
            JobRecord(
                id=job_id,
                submit_s=run.item.trace.submit_s,
                start_s=run.first_start,
                finish_s=now,
                gpus=run.gpus,
                gpu_type=placement.gpu_type or "",
                nodes=tuple(a.node for a in placement.allocations),
                busy_gpu_s=run.busy,
                preemptions=run.preempted,
                lost_gpu_s=run.lost,
                team=run.item.job.team,
                run_s=run.item.trace.duration_s / run.speed,
                requeued_s=run.requeued,
            )
        )
        run.place(None, now)
        run.run_no += 1
        if self.on_finish is not None:
            self.on_finish()

    def _release(self, placement: Placement, elapsed: float) -> None:
        """Free a run's GPUs and count the GPU-seconds it held against each node group."""
        for alloc in placement.allocations:
            group = self.group[alloc.node]
            gpus = held_gpus(alloc)
            self.busy_by_group[group] = self.busy_by_group.get(group, 0.0) + elapsed * gpus
            self.busy_gpus = _exact(self.busy_gpus - gpus)
        self.state.release(placement)

    def _cross(self, job_id: str, now: float) -> None:
        run = self.runs[job_id]
        self.state.relevel(job_id, self._running((job_id,), now)[0])
        self._mark(run, now)

    def _relevel_soon(self, now: float) -> None:
        """Index the running jobs due to cross a threshold within ``MARK_LEAD_S`` by their level now (the
        scheduler's view of them), so that the index never shows a level above the one the cycle reads."""
        marks, bound = self.marks, now + MARK_LEAD_S
        soon: set[str] = set()
        stack = [0]
        while stack:  # the heap's entries up to ``bound``: a child is never due before its parent
            at = stack.pop()
            when, _, job_id, run_no = marks[at]
            if when > bound:
                continue
            if run_no == self.runs[job_id].run_no:
                soon.add(job_id)
            stack.extend(child for child in (2 * at + 1, 2 * at + 2) if child < len(marks))
        for job_id in sorted(soon):
            self.state.relevel(job_id, self._running((job_id,), now)[0])

    def _mark(self, run: JobRun, now: float) -> None:
        """Schedule the moment the running job crosses its next service threshold, if any."""
        attained = run.attained + (now - run.started) * run.gpus
        ahead = [t for t in self.policy.thresholds if t > attained + 1e-9]
        if ahead and run.gpus:
            job = run.item.job
            heapq.heappush(self.marks, (now + (ahead[0] - attained) / run.gpus, job.seq, job.id, run.run_no))

    def _pending(self, run: JobRun) -> Job:
        """The scheduler's view of a job that waits: its service so far, and what the policy may read."""
        job = run.item.job
        run.expected = self.history.expected(job.user, job.team)
        return replace(
            job,
            attained_gpu_s=run.attained,
            expected_gpu_s=run.expected,
            preemptible=self.policy.preemption,
            oracle_gpu_s=run.work_left * job.request.total_gpus if self.policy.simulation_only else None,
        )

    def _running(self, ids: Iterable[str], now: float) -> tuple[RunningJob, ...]:
        """The scheduler's view of running jobs at ``now``; each built once per moment and run."""
        if now != self.views_at:
            self.views.clear()
            self.views_at = now
        views = []
        preemptible, oracle, checkpoint_s = self.policy.preemption, self.policy.simulation_only, self.checkpoint_s
        for job_id in ids:
            run = self.runs[job_id]
            known = self.views.get(job_id)
            if known is not None and known[0] == run.run_no and known[1] == run.started:
                views.append(known[2])
                continue
            job = run.item.job
            elapsed = now - run.started
            # In field order (id, started, priority, preemptible, time limit, last checkpoint, stopping, user,
            # team, attained, expected, oracle): positional arguments are cheaper, and a cycle makes thousands.
            view = RunningJob(
                job_id,
                run.started_at,
                job.priority,
                preemptible,
                job.time_limit_s,
                EPOCH + timedelta(seconds=run.started + run.saved_s(now, checkpoint_s)),
                False,
                job.user,
                job.team,
                run.attained + elapsed * run.gpus,
                run.expected,
                max(0.0, run.work_left - elapsed * run.speed) * job.request.total_gpus if oracle else None,
            )
            self.views[job_id] = (run.run_no, run.started, view)
            views.append(view)
        return tuple(views)


def _exact(gpus: float) -> float:
    """A count of busy GPUs without the rounding error that adding and taking fractions leaves
    (a whole count, an ``int`` while no fraction ran, stays as it is)."""
    return gpus if isinstance(gpus, int) else round(gpus, 9)
