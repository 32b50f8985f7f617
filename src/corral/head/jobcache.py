"""The scheduler's view of pending jobs, kept in memory between cycles.

What the scheduler reads of a job (its request, priority, submit order, owner) does not change
while it waits, so each cycle reads only the ids of pending jobs and fetches the rows of jobs it
has not seen before. Entries of jobs no longer pending are dropped.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from corral.head.store.tables import JobRow
from corral.model import Job, Request

_CHUNK = 500


class JobCache:
    def __init__(self) -> None:
        self._jobs: dict[str, Job] = {}
        self._lock = threading.Lock()

    def jobs(self, session: Session, ids: Sequence[str]) -> tuple[Job, ...]:
        """Scheduler values for these pending jobs, in the order given."""
        with self._lock:
            missing = [job_id for job_id in ids if job_id not in self._jobs]
            for start in range(0, len(missing), _CHUNK):
                for job in _load(session, missing[start : start + _CHUNK]):
                    self._jobs[job.id] = job
            wanted = set(ids)
            for job_id in [j for j in self._jobs if j not in wanted]:
                del self._jobs[job_id]
            return tuple(self._jobs[job_id] for job_id in ids if job_id in self._jobs)

    def forget(self, job_id: str) -> None:
        """Drop a job whose scheduling fields changed, so the next cycle reads it again."""
        with self._lock:
            self._jobs.pop(job_id, None)


def _load(session: Session, ids: Sequence[str]) -> list[Job]:
    rows = session.execute(
        select(
            JobRow.id,
            JobRow.seq,
            JobRow.priority,
            JobRow.nodes,
            JobRow.gpus_per_node,
            JobRow.gpu_types,
            JobRow.cpus,
            JobRow.memory_mb,
            JobRow.submitted_at,
            JobRow.user,
            JobRow.team,
            JobRow.spec,
        ).where(JobRow.id.in_(ids))
    ).all()
    return [
        Job(
            id=r.id,
            seq=r.seq,
            priority=r.priority,
            submitted_at=r.submitted_at,
            user=r.user,
            team=r.team,
            time_limit_s=r.spec.get("time_limit_s"),
            preemptible=bool(r.spec.get("preemptible", False)),
            request=Request(
                nodes=r.nodes,
                gpus_per_node=r.gpus_per_node,
                gpu_types=tuple(r.gpu_types),
                cpus_per_node=r.cpus,
                memory_mb_per_node=r.memory_mb,
            ),
        )
        for r in rows
    ]
