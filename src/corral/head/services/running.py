"""The scheduler's view of jobs that hold resources now, for backfill and preemption."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import select
from sqlalchemy.orm import Session

from corral.head.store.tables import JobRow
from corral.model import JobState, RunningJob, TaskState

_CHUNK = 500


class LiveTask(NamedTuple):
    job_id: str
    generation: int
    state: str
    assigned_at: datetime


def running_jobs(
    session: Session,
    tasks: Iterable[LiveTask],
    service: Callable[[str, str, str], tuple[float, float | None]] | None = None,
) -> tuple[RunningJob, ...]:
    """A ``RunningJob`` for every job with live tasks.

    A job counts as stopping (its resources come back soon, at no cost) when it was told to
    stop: a task of it is STOPPING, the job ended, or the tasks belong to an attempt it has
    left behind (requeued or preempted). ``service`` gives a job's attained and expected
    GPU-seconds from its id, user and team (``corral.head.services.history``).
    """
    by_job: dict[str, list[LiveTask]] = {}
    for task in tasks:
        by_job.setdefault(task.job_id, []).append(task)
    out: list[RunningJob] = []
    for row in _job_rows(session, sorted(by_job)):
        live = by_job[row.id]
        stopping = row.state not in (JobState.RUNNING.value, JobState.PENDING.value) or any(
            t.state == TaskState.STOPPING.value or t.generation != row.generation for t in live
        )
        started = row.started_at if row.state == JobState.RUNNING.value and row.started_at else None
        started = started or min(t.assigned_at for t in live)
        attained, expected = service(row.id, row.user, row.team) if service is not None else (0.0, None)
        out.append(
            RunningJob(
                id=row.id,
                started_at=started,
                priority=row.priority,
                preemptible=bool(row.spec.get("preemptible", False)),
                time_limit_s=row.spec.get("time_limit_s"),
                last_checkpoint_at=row.last_checkpoint_at,
                stopping=stopping,
                user=row.user,
                team=row.team,
                attained_gpu_s=attained,
                expected_gpu_s=expected,
            )
        )
    return tuple(out)


def _job_rows(session: Session, ids: Sequence[str]) -> Iterable[Any]:
    columns = (
        JobRow.id,
        JobRow.state,
        JobRow.generation,
        JobRow.priority,
        JobRow.spec,
        JobRow.started_at,
        JobRow.last_checkpoint_at,
        JobRow.user,
        JobRow.team,
    )
    for start in range(0, len(ids), _CHUNK):
        yield from session.execute(select(*columns).where(JobRow.id.in_(ids[start : start + _CHUNK]))).all()
