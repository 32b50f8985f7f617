"""The scheduler's view of pending jobs, kept in memory between cycles.

What the scheduler reads of a job (its request, priority, submit order, owner) does not change
while it waits, so each cycle reads only the ids of pending jobs and fetches the rows of jobs it
has not seen before. Entries of jobs no longer pending are dropped.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from corral.head.store.tables import JobRow
from corral.model import Job, Request, interned

_CHUNK = 500


@dataclass(frozen=True)
class Gate:
    """What a pending job waits for besides resources: other jobs, or room in its array."""

    after_ok: tuple[str, ...] = ()
    after_any: tuple[str, ...] = ()
    array_id: str | None = None
    array_limit: int | None = None

    @property
    def closed(self) -> bool:
        """Whether the job may have to wait (has dependencies or a throttled array)."""
        return bool(self.after_ok or self.after_any or (self.array_id and self.array_limit))

    @classmethod
    def of(cls, spec: Mapping[str, Any]) -> Gate:
        return cls(
            after_ok=tuple(spec.get("after_ok", ())),
            after_any=tuple(spec.get("after_any", ())),
            array_id=spec.get("array_id"),
            array_limit=spec.get("array_limit"),
        )


class JobCache:
    def __init__(self) -> None:
        self._jobs: dict[str, Job] = {}
        self._gates: dict[str, Gate] = {}  # only jobs with a closed gate
        self._lock = threading.Lock()

    def jobs(self, session: Session, ids: Sequence[str]) -> tuple[Job, ...]:
        """Scheduler values for these pending jobs, in the order given."""
        with self._lock:
            missing = [job_id for job_id in ids if job_id not in self._jobs]
            for start in range(0, len(missing), _CHUNK):
                for job, gate in load_jobs(session, missing[start : start + _CHUNK]):
                    self._jobs[job.id] = job
                    if gate.closed:
                        self._gates[job.id] = gate
            wanted = set(ids)
            for job_id in [j for j in self._jobs if j not in wanted]:
                del self._jobs[job_id]
                self._gates.pop(job_id, None)
            return tuple(self._jobs[job_id] for job_id in ids if job_id in self._jobs)

    def gates(self) -> dict[str, Gate]:
        """The closed gates of the pending jobs last asked for."""
        with self._lock:
            return dict(self._gates)

    def forget(self, job_id: str) -> None:
        """Drop a job whose scheduling fields changed, so the next cycle reads it again."""
        with self._lock:
            self._jobs.pop(job_id, None)
            self._gates.pop(job_id, None)


def load_jobs(session: Session, ids: Sequence[str]) -> list[tuple[Job, Gate]]:
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
        (
            Job(
                id=r.id,
                seq=r.seq,
                priority=r.priority,
                submitted_at=r.submitted_at,
                user=r.user,
                team=r.team,
                time_limit_s=r.spec.get("time_limit_s"),
                preemptible=bool(r.spec.get("preemptible", False)),
                request=interned(
                    Request(
                        nodes=r.nodes,
                        gpus_per_node=r.gpus_per_node,
                        gpu_types=tuple(r.gpu_types),
                        cpus_per_node=r.cpus,
                        memory_mb_per_node=r.memory_mb,
                        **_topology(r.spec),
                        container=r.spec.get("image") is not None,
                    )
                ),
            ),
            Gate.of(r.spec),
        )
        for r in rows
    ]


def _topology(spec: Mapping[str, Any]) -> dict[str, Any]:
    topology = spec.get("topology") or {}
    label = topology.get("required") or topology.get("pack") or "rack"
    return {"topology": label, "topology_required": topology.get("required") is not None}
