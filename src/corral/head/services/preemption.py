"""Stopping a running job to make room (admin preemption), and what the job reports of its checkpoints."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy.orm import Session

from corral.api import JobOut
from corral.head.runtime import HeadRuntime
from corral.head.security import Principal
from corral.head.services.common import Conflict, NotAllowed, record_event
from corral.head.services.jobs import get_row, get_rows, to_out
from corral.head.services.lifecycle import WANTED_TASK_STATES, current_tasks, preempt, record_checkpoint
from corral.head.store.tables import JobRow
from corral.model import JobState

_WANTED = {s.value for s in WANTED_TASK_STATES}


def preempt_jobs(rt: HeadRuntime, who: Principal, job_ids: Sequence[str]) -> list[JobOut]:
    """An admin stops running jobs (SIGTERM, their grace period, SIGKILL) and queues them again.

    All or none: every id must name a job that runs, else nothing is preempted. Unlike a plan's
    preemption this works on any running job, preemptible or not: the admin decided. It does not
    use up the jobs' ``max_restarts``."""
    if not who.is_admin:
        raise NotAllowed("only an admin may preempt jobs")
    now = rt.clock.now()
    with rt.write() as session:
        jobs = get_rows(session, job_ids, who, "preempted")
        idle = [job for job in jobs if not _running(session, job)]
        if len(jobs) == 1 and idle:
            raise Conflict(f"job {idle[0].id} is {idle[0].state}, not RUNNING: only a running job can be preempted")
        if idle:
            states = ", ".join(f"{job.id} ({job.state})" for job in idle)
            verb = "is" if len(idle) == 1 else "are"
            raise Conflict(
                f"{'job' if len(idle) == 1 else 'jobs'} {states} {verb} not RUNNING: only a running job can be"
                f" preempted; none of the {len(jobs)} jobs given was preempted"
            )
        for job in jobs:
            preempt(session, job, now, f"preempted by admin {who.user}", rt.settings.preempt_grace_s)
        session.flush()
        return [to_out(session, job, rt) for job in jobs]


def _running(session: Session, job: JobRow) -> bool:
    return job.state == JobState.RUNNING.value and all(t.state in _WANTED for t in current_tasks(session, job))


def _started(session: Session, job: JobRow) -> bool:
    """Whether the job's processes run or are being started: RUNNING, or placed and waiting for the
    rest of its gang to report running (its first ranks may already have saved a checkpoint)."""
    if job.state == JobState.RUNNING.value:
        return True
    tasks = current_tasks(session, job) if job.state == JobState.PENDING.value else []
    return bool(tasks) and all(t.state in _WANTED for t in tasks)


def checkpoint_done(rt: HeadRuntime, who: Principal, job_id: str, at: datetime | None = None) -> JobOut:
    """The job saved a checkpoint (at ``at``, default now): a preemption now loses only what came after.

    Only a job whose processes run can have saved one: any other is refused (409) naming its state."""
    now = rt.clock.now()
    when = min(at or now, now)
    with rt.write() as session:
        job = get_row(session, job_id, who)
        if not _started(session, job):
            raise Conflict(f"job {job_id} is {job.state}, not RUNNING: only a running job can record a checkpoint")
        record_checkpoint(job, when)
        record_event(session, now, "job.checkpoint", f"checkpoint at {when.isoformat()}", job_id=job.id)
        session.flush()
        return to_out(session, job, rt)
