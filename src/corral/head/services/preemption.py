"""Stopping a running job to make room (admin preemption), and what the job reports of its checkpoints."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select

from corral.api import JobOut
from corral.head.runtime import HeadRuntime
from corral.head.security import Principal
from corral.head.services.common import Conflict, NotAllowed, NotFound, record_event
from corral.head.services.jobs import to_out
from corral.head.services.lifecycle import WANTED_TASK_STATES, current_tasks, preempt, record_checkpoint
from corral.head.store.tables import JobRow
from corral.model import JobState

_WANTED = {s.value for s in WANTED_TASK_STATES}


def preempt_job(rt: HeadRuntime, who: Principal, job_id: str) -> JobOut:
    """An admin stops a running job (SIGTERM, its grace period, SIGKILL) and queues it again.

    Unlike a plan's preemption this works on any running job, preemptible or not: the admin
    decided. It does not use up the job's ``max_restarts``."""
    if not who.is_admin:
        raise NotAllowed("only an admin may preempt jobs")
    now = rt.clock.now()
    with rt.write() as session:
        job = session.scalar(select(JobRow).where(JobRow.id == job_id))
        if job is None:
            raise NotFound(f"no job {job_id!r}")
        tasks = current_tasks(session, job)
        if job.state != JobState.RUNNING.value or any(t.state not in _WANTED for t in tasks):
            raise Conflict(f"job {job_id} is {job.state}, not RUNNING: only a running job can be preempted")
        preempt(session, job, now, f"preempted by admin {who.user}", rt.settings.preempt_grace_s)
        session.flush()
        return to_out(session, job, rt)


def checkpoint_done(rt: HeadRuntime, who: Principal, job_id: str, at: datetime | None = None) -> JobOut:
    """The job saved a checkpoint (at ``at``, default now): a preemption now loses only what came after."""
    now = rt.clock.now()
    when = min(at or now, now)
    with rt.write() as session:
        job = session.scalar(select(JobRow).where(JobRow.id == job_id))
        if job is None or (not who.is_admin and job.user != who.user):
            raise NotFound(f"no job {job_id!r}")
        if JobState(job.state).terminal:
            raise Conflict(f"job {job_id} is {job.state}: it has ended")
        record_checkpoint(job, when)
        record_event(session, now, "job.checkpoint", f"checkpoint at {when.isoformat()}", job_id=job.id)
        session.flush()
        return to_out(session, job, rt)
