"""One scheduling cycle: load a snapshot, ask the pure scheduler, apply its plan."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from corral.collector import collections_paused
from corral.head.config import quotas_of, team_parents_of
from corral.head.plan_apply import apply_plan
from corral.head.runtime import HeadRuntime, no_position
from corral.head.services.agents import write_heard
from corral.head.services.decay import fair_share_usage
from corral.head.services.gating import ArrayWait, array_reason, gate
from corral.head.services.history import HeldTask, fill_pending
from corral.head.services.lifecycle import LIVE_TASK_STATES, end_job
from corral.head.services.running import LiveTask, running_jobs
from corral.head.store.tables import JobRow, TaskRow
from corral.model import FairShare, JobState, RunningJob, TaskState
from corral.sched import DEPENDENCY, Plan, Policy, Reason, Snapshot, fragmentation, get_policy, schedule


@dataclass(frozen=True)
class CycleResult:
    pending: int
    placed: int


FAIR_SHARE_REFRESH_S = 30.0


@dataclass(frozen=True)
class CycleInput:
    snapshot: Snapshot
    reasons: dict[str, str]  # each pending job's stored reason
    held: dict[str, str]  # pending jobs kept out of the snapshot: what they wait for
    doomed: dict[str, str]  # pending jobs whose dependencies can never be met: why
    array_waits: dict[str, ArrayWait] = field(default_factory=dict)  # held for earlier elements of their array


def load_snapshot(rt: HeadRuntime, policy: Policy | None = None) -> tuple[Snapshot, dict[str, str]]:
    """The cluster as the scheduler needs it, plus each pending job's stored reason."""
    loaded = load_cycle(rt, policy)
    return loaded.snapshot, loaded.reasons


def load_cycle(rt: HeadRuntime, policy: Policy | None = None) -> CycleInput:
    """What one cycle needs: the snapshot, and the pending jobs that wait for other jobs.

    Jobs holding resources are described (``Snapshot.running``) only when something reads
    them: the policy reserves (backfill) or preempts, teams have quotas, or a GPU speed table
    may hold a job back for a faster type; plain placement does not. Without a policy, the
    head's own."""
    policy = policy or get_policy(rt.settings.policy)
    now = rt.clock.now()
    rt.config.reload_if_changed()
    config = rt.config.current
    quotas = quotas_of(config)
    # A node counts as heard from if its silence, less the spans the head itself stalled, is within the timeout.
    timeout_s = rt.settings.node_timeout_s
    fresh_after = now - timedelta(seconds=timeout_s + rt.lateness.deaf_within(timeout_s))
    live_states = [s.value for s in LIVE_TASK_STATES]
    with rt.read() as session:
        nodes = rt.node_models.load(session, heard_since=fresh_after)
        tasks = session.execute(
            select(
                TaskRow.job_id,
                TaskRow.node,
                TaskRow.gpus,
                TaskRow.gpu_fraction,
                TaskRow.cpus,
                TaskRow.memory_mb,
                TaskRow.generation,
                TaskRow.state,
                TaskRow.assigned_at,
                TaskRow.started_at,
            ).where(TaskRow.state.in_(live_states))
        ).all()
        waiting_rows = session.execute(
            select(JobRow.id, JobRow.reason, JobRow.generation).where(JobRow.state == JobState.PENDING.value)
        ).all()
        fencing = session.scalars(
            select(TaskRow.job_id).where(TaskRow.state == TaskState.LOST.value, TaskRow.fenced_after > now)
        ).all()
        # A requeued job waits until its previous attempt is gone: stopped, or surely fenced.
        busy = {t.job_id for t in tasks} | set(fencing)
        reasons = {r.id: r.reason for r in waiting_rows}
        queued = [r.id for r in waiting_rows if r.id not in busy]
        gated = gate(session, rt.job_cache.jobs(session, queued), rt.job_cache.gates(), busy)
        gated.held.update(_stopping_waits(reasons.keys() & (busy - set(fencing))))
        held = [HeldTask(t.job_id, t.generation, len(t.gpus), t.gpu_fraction, t.started_at) for t in tasks]
        generations = {r.id: r.generation for r in waiting_rows}
        pending, service = fill_pending(rt.service, session, now, held, generations, gated.runnable)
        running: tuple[RunningJob, ...] = ()
        if pending and (policy.backfill or policy.preemption or quotas or config.gpu_speed):
            live_tasks = (LiveTask(t.job_id, t.generation, t.state, t.assigned_at) for t in tasks)
            running = running_jobs(session, live_tasks, service)
        fair = _fair_share(rt, session, now) if pending and policy.fair_share and config.teams else None
    live = rt.live_allocations.of(tasks)
    snapshot = Snapshot(
        nodes=nodes,
        live=live,
        pending=pending,
        running=running,
        quotas=quotas,
        team_parents=team_parents_of(config) if quotas else {},
        fair_share=fair,
        gpu_speed=config.gpu_speed,
    )
    return CycleInput(snapshot, reasons, gated.held, gated.doomed, gated.array_waits)


def _stopping_waits(jobs: Collection[str]) -> dict[str, str]:
    """What a job put back in the queue waits for while its previous attempt's processes stop (a lost node's
    job says already when that node's agent surely stopped it)."""
    return {
        job_id: "waiting for its previous attempt to stop (SIGTERM, then SIGKILL after its grace period)"
        for job_id in jobs
    }


def run_cycle(rt: HeadRuntime, policy: Policy) -> CycleResult:
    write_heard(rt)  # nodes heard from since the last batch count as heard from
    loaded = load_cycle(rt, policy)
    snapshot, reasons = loaded.snapshot, loaded.reasons
    if loaded.doomed:
        _cancel_doomed(rt, loaded.doomed)
    held = {job_id: Reason(DEPENDENCY, message) for job_id, message in loaded.held.items()}
    if not snapshot.pending:
        rt.queue_position = no_position
        rt.expected_starts = {}
        rt.fragmented_gpus = {}
        if held:
            apply_plan(rt, Plan(reasons=held), reasons)
        return CycleResult(pending=0, placed=0)
    with collections_paused():
        plan = schedule(snapshot, policy, rt.clock.now())
    if loaded.array_waits:  # said once the cycle has placed the elements they waited for, or not
        placed = {p.job_id for p in plan.placements}
        held.update((j, Reason(DEPENDENCY, array_reason(w, placed))) for j, w in loaded.array_waits.items())
    if held:
        plan = replace(plan, reasons={**plan.reasons, **held})
    rt.queue_position = plan.position
    rt.expected_starts = {
        job_id: reason.expected_start for job_id, reason in plan.reasons.items() if reason.expected_start
    }
    result = apply_plan(rt, plan, reasons)
    rt.fragmented_gpus = fragmentation(snapshot, plan, policy)
    return CycleResult(pending=len(snapshot.pending), placed=result.placed)


def _fair_share(rt: HeadRuntime, session: Session, now: datetime) -> FairShare:
    """Decayed usage by team and user, recomputed at most every ``FAIR_SHARE_REFRESH_S``."""
    cached = rt.fair_share_cache
    if cached is not None and (now - cached[0]).total_seconds() < FAIR_SHARE_REFRESH_S:
        return cached[1]
    settings = rt.config.current.fair_share
    usage = fair_share_usage(session, now, settings.half_life_s, settings.weights)
    rt.fair_share_cache = (now, usage)
    return usage


def _cancel_doomed(rt: HeadRuntime, doomed: dict[str, str]) -> None:
    """Cancel pending jobs whose dependencies can never be met, saying which."""
    now = rt.clock.now()
    with rt.write() as session:
        for job_id, why in doomed.items():
            job = session.scalar(select(JobRow).where(JobRow.id == job_id))
            if job is not None and job.state == JobState.PENDING.value:
                end_job(session, job, JobState.CANCELLED, now, why)
