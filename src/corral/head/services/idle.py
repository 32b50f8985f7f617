"""Idle GPUs: running jobs whose GPUs stay under 5 % utilization are flagged, and optionally cancelled.

``decide`` is pure: the jobs that hold GPUs, their GPUs' utilization readings and the time in,
decisions out. ``check_idle`` loads, decides and applies them in a write that re-checks each job.
What was decided lives in the event log (``job.idle``, ``job.busy``), so a restarted head keeps
a warning's deadline.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from sqlalchemy import select
from sqlalchemy.orm import Session

from corral.head.runtime import HeadRuntime
from corral.head.services.common import record_event
from corral.head.services.lifecycle import current_tasks, end_job
from corral.head.settings import HeadSettings
from corral.head.store.tables import EventRow, JobRow, TaskRow
from corral.model import JobState, TaskState

THRESHOLD_PCT = 5.0
IDLE_EVENT, BUSY_EVENT = "job.idle", "job.busy"
IDLE_NOTE = "; idle: "
IDLE_ACTIONS = ("flag", "cancel")
GpuKey = tuple[str, int]


@dataclass(frozen=True)
class IdlePolicy:
    after_s: float
    action: Literal["flag", "cancel"] = "flag"
    grace_s: float = 900.0
    threshold_pct: float = THRESHOLD_PCT


@dataclass(frozen=True)
class Mark:
    """The job's current attempt was flagged idle at ``flagged_at``; with a deadline, warned too."""

    flagged_at: datetime
    cancel_at: datetime | None = None


@dataclass(frozen=True)
class JobGpus:
    job_id: str
    generation: int
    held_since: datetime  # when its current attempt started holding the GPUs
    gpus: tuple[GpuKey, ...]
    mark: Mark | None = None


@dataclass(frozen=True)
class Utilization:
    at: datetime
    percent: float


@dataclass(frozen=True)
class Decision:
    job_id: str
    generation: int
    action: Literal["flag", "clear", "cancel"]
    gpus: int
    idle_since: datetime | None = None
    cancel_at: datetime | None = None


def idle_since(series: Sequence[Utilization], threshold_pct: float) -> datetime | None:
    """Start of the newest unbroken run of readings under the threshold; None if the newest is busy."""
    if not series or series[-1].percent >= threshold_pct:
        return None
    start = series[-1].at
    for reading in reversed(series):
        if reading.percent >= threshold_pct:
            break
        start = reading.at
    return start


def decide(
    jobs: Sequence[JobGpus], readings: Mapping[GpuKey, Sequence[Utilization]], now: datetime, policy: IdlePolicy
) -> list[Decision]:
    """Flag jobs idle for ``after_s`` on every GPU; clear a flag once a GPU is busy again; cancel a
    warned job whose deadline passed without a busy reading since the warning."""
    decisions = []
    for job in jobs:
        series = [readings.get(gpu, ()) for gpu in job.gpus]
        if job.mark is not None:
            flagged = job.mark.flagged_at
            if any(r.percent >= policy.threshold_pct and r.at >= flagged for s in series for r in s):
                decisions.append(Decision(job.job_id, job.generation, "clear", len(job.gpus)))
            elif job.mark.cancel_at is not None and now >= job.mark.cancel_at:
                decisions.append(Decision(job.job_id, job.generation, "cancel", len(job.gpus), flagged))
            continue
        starts = [idle_since(s, policy.threshold_pct) for s in series]
        if not starts or any(s is None for s in starts):
            continue
        since = max([job.held_since, *(s for s in starts if s is not None)])
        if (now - since).total_seconds() >= policy.after_s:
            deadline = now + timedelta(seconds=policy.grace_s) if policy.action == "cancel" else None
            decisions.append(Decision(job.job_id, job.generation, "flag", len(job.gpus), since, deadline))
    return decisions


def policy_of(settings: HeadSettings) -> IdlePolicy | None:
    if settings.idle_after_s is None:
        return None
    action: Literal["flag", "cancel"] = "cancel" if settings.idle_action == "cancel" else "flag"
    return IdlePolicy(after_s=settings.idle_after_s, action=action, grace_s=settings.idle_grace_s)


def check_idle(rt: HeadRuntime) -> list[Decision]:
    """One round: load the running jobs and their marks, decide, apply what still holds."""
    policy = policy_of(rt.settings)
    if policy is None:
        return []
    now = rt.clock.now()
    with rt.read() as session:
        jobs = running_jobs(session)
    readings = {gpu: _utilization(rt, gpu) for job in jobs for gpu in job.gpus}
    decisions = decide(jobs, readings, now, policy)
    if decisions:
        with rt.write() as session:
            for decision in decisions:
                _apply(session, decision, now, policy)
    return decisions


def _utilization(rt: HeadRuntime, gpu: GpuKey) -> list[Utilization]:
    return [Utilization(r.at, r.sample.utilization) for r in rt.samples.series(*gpu)]


def running_jobs(session: Session) -> list[JobGpus]:
    """RUNNING jobs that hold GPUs, with the idle mark of their current attempt."""
    jobs = list(session.scalars(select(JobRow).where(JobRow.state == JobState.RUNNING.value)))
    marks = idle_marks(session, {job.id: job.generation for job in jobs})
    tasks: dict[str, list[TaskRow]] = {}
    ids = [job.id for job in jobs]
    for start in range(0, len(ids), 500):
        query = select(TaskRow).where(
            TaskRow.job_id.in_(ids[start : start + 500]), TaskRow.state == TaskState.RUNNING.value
        )
        for task in session.scalars(query):
            tasks.setdefault(task.job_id, []).append(task)
    out = []
    for job in jobs:
        mine = [t for t in tasks.get(job.id, []) if t.generation == job.generation and t.gpus]
        if not mine:
            continue
        gpus = tuple((t.node, int(i)) for t in mine for i in t.gpus)
        held = max(t.started_at or job.started_at or t.assigned_at for t in mine)
        out.append(JobGpus(job.id, job.generation, held, gpus, marks.get(job.id)))
    return out


def idle_marks(session: Session, generations: Mapping[str, int]) -> dict[str, Mark]:
    """The newest idle/busy event of each job's current attempt, where it says idle."""
    ids = list(generations)
    latest: dict[str, EventRow] = {}
    for start in range(0, len(ids), 500):
        query = (
            select(EventRow)
            .where(EventRow.kind.in_([IDLE_EVENT, BUSY_EVENT]), EventRow.job_id.in_(ids[start : start + 500]))
            .order_by(EventRow.id)
        )
        for row in session.scalars(query):
            if row.job_id is not None and row.data.get("generation") == generations[row.job_id]:
                latest[row.job_id] = row
    marks = {}
    for job_id, row in latest.items():
        if row.kind == IDLE_EVENT:
            deadline = row.data.get("cancel_at")
            marks[job_id] = Mark(row.ts, datetime.fromisoformat(deadline) if deadline else None)
    return marks


def _apply(session: Session, decision: Decision, now: datetime, policy: IdlePolicy) -> None:
    job = session.scalar(select(JobRow).where(JobRow.id == decision.job_id))
    if job is None or job.state != JobState.RUNNING.value or job.generation != decision.generation:
        return  # ended or restarted since we looked
    if not any(t.state == TaskState.RUNNING.value for t in current_tasks(session, job)):
        return
    base = job.reason.split(IDLE_NOTE)[0]
    if decision.action == "clear":
        job.reason = base
        record_event(session, now, BUSY_EVENT, "GPUs busy again", job_id=job.id, generation=job.generation)
    elif decision.action == "flag":
        note = _note(decision, policy)
        job.reason = base + IDLE_NOTE + note
        until = decision.cancel_at.isoformat() if decision.cancel_at else None
        generation, gpus = job.generation, decision.gpus
        record_event(session, now, IDLE_EVENT, note, job_id=job.id, generation=generation, gpus=gpus, cancel_at=until)
    else:
        since = decision.idle_since.isoformat(timespec="seconds") if decision.idle_since else "?"
        end_job(
            session,
            job,
            JobState.CANCELLED,
            now,
            f"cancelled: its {decision.gpus} GPU(s) stayed under {policy.threshold_pct:g}% utilization "
            f"(flagged idle at {since}, warned, still idle after {policy.grace_s:g}s)",
        )


def _note(decision: Decision, policy: IdlePolicy) -> str:
    since = decision.idle_since.isoformat(timespec="seconds") if decision.idle_since else "?"
    note = f"{decision.gpus} GPU(s) under {policy.threshold_pct:g}% utilization since {since}"
    if decision.cancel_at is not None:
        note += f"; will be cancelled at {decision.cancel_at.isoformat(timespec='seconds')} unless they get busy"
    return note


def flagged_jobs(session: Session) -> dict[str, tuple[int, str, str]]:
    """Running jobs flagged idle now: job id → (GPUs, user, team); for the metrics."""
    jobs = running_jobs(session)
    owners = dict.fromkeys((j.job_id for j in jobs if j.mark is not None), ("", ""))
    if owners:
        for row in session.execute(select(JobRow.id, JobRow.user, JobRow.team).where(JobRow.id.in_(list(owners)))):
            owners[row.id] = (row.user, row.team)
    return {j.job_id: (len(j.gpus), *owners[j.job_id]) for j in jobs if j.mark is not None}
