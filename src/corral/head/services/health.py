"""Node and GPU health from heartbeats: what is unhealthy gets no work, and its jobs are requeued."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from corral.api import GpuSample, HeartbeatRequest
from corral.head.services.common import record_event, wake_scheduler
from corral.head.services.lifecycle import WANTED_TASK_STATES, requeue
from corral.head.store.tables import JobRow, NodeRow, TaskRow
from corral.model import JobState


def gpu_problem(sample: GpuSample) -> str:
    problems = []
    if sample.ecc_uncorrectable:
        problems.append(f"{sample.ecc_uncorrectable} uncorrectable ECC errors")
    if sample.xid_errors:
        problems.append(f"{sample.xid_errors} XID errors")
    return " and ".join(problems)


def assess(session: Session, row: NodeRow, req: HeartbeatRequest, now: datetime) -> None:
    """Record what the heartbeat says is wrong; requeue the jobs that newly unhealthy hardware holds."""
    gpus = {str(s.index): problem for s in req.samples if (problem := gpu_problem(s))}
    if req.samples or not gpus:  # without readings, keep what was known about the GPUs
        newly_bad = set(gpus) - set(row.unhealthy_gpus)
        row.unhealthy_gpus = gpus if req.samples else row.unhealthy_gpus
    else:
        newly_bad = set()
    node_turned_bad = bool(req.health_problem) and not row.health_problem
    if req.health_problem != row.health_problem:
        kind = "node.unhealthy" if req.health_problem else "node.healthy"
        record_event(session, now, kind, req.health_problem or "health command passes again", node=row.name)
        row.health_problem = req.health_problem
        wake_scheduler(session)
    for index in sorted(newly_bad, key=int):
        record_event(session, now, "gpu.unhealthy", f"GPU {index}: {gpus[index]}", node=row.name, gpu=int(index))
        wake_scheduler(session)
    if node_turned_bad or newly_bad:
        _requeue_affected(session, row, newly_bad, node_turned_bad, now)


def _requeue_affected(session: Session, row: NodeRow, bad_gpus: set[str], whole_node: bool, now: datetime) -> None:
    wanted = [s.value for s in WANTED_TASK_STATES]
    for task in session.scalars(select(TaskRow).where(TaskRow.node == row.name, TaskRow.state.in_(wanted))):
        hit = [str(i) for i in task.gpus if str(i) in bad_gpus]
        if not whole_node and not hit:
            continue
        job = session.scalar(select(JobRow).where(JobRow.id == task.job_id))
        if job is None or JobState(job.state).terminal or job.generation != task.generation:
            continue
        why = (
            f"node {row.name} is unhealthy: {row.health_problem}"
            if whole_node
            else f"GPU {hit[0]} on {row.name} is unhealthy: {row.unhealthy_gpus[hit[0]]}"
        )
        requeue(session, job, now, f"requeued: {why}")
