"""One scheduling cycle: load a snapshot, ask the pure scheduler, apply its plan."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import select

from corral.head.plan_apply import apply_plan
from corral.head.runtime import HeadRuntime
from corral.head.services.convert import job_model, node_model
from corral.head.services.lifecycle import LIVE_TASK_STATES
from corral.head.store.tables import JobRow, NodeRow, TaskRow
from corral.model import Allocation, JobState, LiveAllocation
from corral.sched import Policy, Snapshot, schedule


@dataclass(frozen=True)
class CycleResult:
    pending: int
    placed: int


def load_snapshot(rt: HeadRuntime) -> tuple[Snapshot, dict[str, str]]:
    """The cluster as the scheduler needs it, plus each pending job's current reason."""
    with rt.read() as session:
        fresh_after = rt.clock.now() - timedelta(seconds=rt.settings.node_timeout_s)
        nodes = tuple(
            node_model(row, heard_since=fresh_after) for row in session.scalars(select(NodeRow).order_by(NodeRow.name))
        )
        live_states = [s.value for s in LIVE_TASK_STATES]
        tasks = list(session.scalars(select(TaskRow).where(TaskRow.state.in_(live_states))))
        busy = {t.job_id for t in tasks}
        live = tuple(
            LiveAllocation(
                t.job_id,
                Allocation(
                    node=t.node, gpus=tuple(t.gpus), gpu_fraction=t.gpu_fraction, cpus=t.cpus, memory_mb=t.memory_mb
                ),
            )
            for t in tasks
        )
        rows = [
            r for r in session.scalars(select(JobRow).where(JobRow.state == JobState.PENDING.value)) if r.id not in busy
        ]
        pending = tuple(job_model(r) for r in rows)
        reasons = {r.id: r.reason for r in rows}
    return Snapshot(nodes=nodes, live=live, pending=pending), reasons


def run_cycle(rt: HeadRuntime, policy: Policy) -> CycleResult:
    snapshot, reasons = load_snapshot(rt)
    if not snapshot.pending:
        return CycleResult(pending=0, placed=0)
    plan = schedule(snapshot, policy, rt.clock.now())
    result = apply_plan(rt, plan, reasons)
    return CycleResult(pending=len(snapshot.pending), placed=result.placed)
