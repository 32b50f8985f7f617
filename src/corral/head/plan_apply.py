"""Commit a scheduler Plan in one transaction (a very large one in a few), re-checking every placement
against current state.

The scheduler worked on a snapshot; between that read and this write a node may
have left or a job may have been cancelled. What no longer fits is skipped (the
next cycle sees the new state); the partial unique index on whole-GPU claims makes
a double allocation impossible even if two writers race.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import cast

from sqlalchemy import Table, bindparam, select, update
from sqlalchemy.orm import Session

from corral.head.leader import still_leading
from corral.head.runtime import HeadRuntime
from corral.head.services.common import bump_nodes, record_event
from corral.head.services.lifecycle import (
    LIVE_TASK_STATES,
    WANTED_TASK_STATES,
    add_claims,
    current_tasks,
    preempt,
    with_requeue_cause,
)
from corral.head.store.tables import GpuClaimRow, JobRow, NodeRow, TaskRow
from corral.model import EPSILON, JobState, NodeState, TaskState
from corral.sched import Placement, Plan, Preemption

log = logging.getLogger(__name__)
WANTED = {s.value for s in WANTED_TASK_STATES}


@dataclass(frozen=True)
class ApplyResult:
    placed: int
    skipped: int
    preempted: int = 0


class _Usage:
    """GPU fractions, CPUs and memory held on the nodes a plan touches, as of now."""

    def __init__(self, session: Session, nodes: set[str]) -> None:
        self.gpu: dict[tuple[str, int], float] = defaultdict(float)
        self.cpus: dict[str, float] = defaultdict(float)
        self.memory: dict[str, int] = defaultdict(int)
        for claim in session.scalars(select(GpuClaimRow).where(GpuClaimRow.node.in_(nodes))):
            self.gpu[(claim.node, claim.gpu_index)] += claim.fraction
        live = [s.value for s in LIVE_TASK_STATES]
        for task in session.scalars(select(TaskRow).where(TaskRow.node.in_(nodes), TaskRow.state.in_(live))):
            self.cpus[task.node] += task.cpus
            self.memory[task.node] += task.memory_mb


PLACEMENTS_PER_WRITE = 5000
"""A plan with more placements is applied in several write transactions, this many placements each (the
preemptions and reasons with the last): other writers, heartbeats among them, get their turn in between
instead of waiting for one transaction that places tens of thousands of jobs (5,000 take about a second).
Not fewer: every transaction that places tasks on a node advances its desired-state version, and the
node's agent then reads its whole task set again."""


def apply_plan(rt: HeadRuntime, plan: Plan, known_reasons: Mapping[str, str]) -> ApplyResult:
    placed = skipped = preempted = 0
    placements = list(plan.placements)
    for start in range(0, max(len(placements), 1), PLACEMENTS_PER_WRITE):
        part = placements[start : start + PLACEMENTS_PER_WRITE]
        last = start + PLACEMENTS_PER_WRITE >= len(placements)
        applied = _apply_part(rt, part, plan if last else None, known_reasons)
        if applied is None:  # fencing: a head that lost the lease must not apply (the rest of) its plan
            log.warning("plan not applied: another head holds the leader lease now")
            return ApplyResult(placed=placed, skipped=skipped + len(placements) - start)
        placed, skipped, preempted = placed + applied.placed, skipped + applied.skipped, applied.preempted
    if skipped:
        log.info("plan apply skipped %d stale placements", skipped)
    return ApplyResult(placed=placed, skipped=skipped, preempted=preempted)


def _apply_part(
    rt: HeadRuntime, placements: list[Placement], rest: Plan | None, known_reasons: Mapping[str, str]
) -> ApplyResult | None:
    """Apply some placements in one transaction, and ``rest``'s preemptions and reasons with them;
    None if this head no longer leads."""
    now = rt.clock.now()
    placed = skipped = preempted = 0
    touched = {a.node for p in placements for a in p.allocations}
    with rt.write() as session:
        if not still_leading(session, rt.db):
            return None
        nodes = {row.name: row for row in session.scalars(select(NodeRow).where(NodeRow.name.in_(touched)))}
        usage = _Usage(session, touched)
        placing = _Placing(session, [p.job_id for p in placements], touched)
        for placement in placements:
            if _place(session, placement, placing, nodes, usage, now):
                placed += 1
            else:
                skipped += 1
        session.flush()  # the task rows first: the claims refer to them
        add_claims(session, placing.claims)
        if rest is not None:
            preempted = sum(_preempt(session, p, now, rt.settings.preempt_grace_s) for p in rest.preemptions)
            _write_reasons(session, rest, known_reasons)
    return ApplyResult(placed=placed, skipped=skipped, preempted=preempted)


def _write_reasons(session: Session, plan: Plan, known_reasons: Mapping[str, str]) -> None:
    """Write the reasons that say something new, in one statement run for all of them (a Core statement:
    the ORM's would look for each job among the objects the session holds)."""
    changed = []
    for job_id, reason in plan.reasons.items():
        known = known_reasons.get(job_id)
        message = with_requeue_cause(known, reason.message)
        if known != message:
            changed.append({"b_id": job_id, "b_reason": message})
    if not changed:
        return
    table = cast(Table, JobRow.__table__)
    statement = (
        update(table)
        .where(table.c.id == bindparam("b_id"), table.c.state == JobState.PENDING.value)
        .values(reason=bindparam("b_reason"))
    )
    session.connection().execute(statement, changed)


def _preempt(session: Session, preemption: Preemption, now: datetime, grace_s: float) -> bool:
    """Stop a victim the plan named, if it still runs the attempt the scheduler saw and may be preempted."""
    job = session.scalar(select(JobRow).where(JobRow.id == preemption.victim_job_id))
    if job is None or not (preemption.reclaim or job.spec.get("preemptible", False)):
        return False  # only preemptible jobs, and jobs running on borrowed quota its owner reclaims
    tasks = current_tasks(session, job)
    if job.state == JobState.PENDING.value and not tasks:
        return False  # already requeued, or never placed
    if JobState(job.state).terminal or any(t.state not in WANTED for t in tasks):
        return False  # already stopping
    preempt(session, job, now, preemption.reason, grace_s)
    return True


class _Placing:
    """The rows a plan's placements need, read in a few queries: the jobs, which of them still have live
    tasks, and each touched node's new desired-state version (advanced once per plan)."""

    def __init__(self, session: Session, job_ids: list[str], touched: set[str]) -> None:
        self.session = session
        self.jobs: dict[str, JobRow] = {}
        self.busy: set[str] = set()  # jobs with live tasks: a placement for one of them is stale
        live = [s.value for s in LIVE_TASK_STATES]
        for start in range(0, len(job_ids), _CHUNK):
            chunk = job_ids[start : start + _CHUNK]
            self.jobs.update((row.id, row) for row in session.scalars(select(JobRow).where(JobRow.id.in_(chunk))))
            self.busy.update(
                session.scalars(select(TaskRow.job_id).where(TaskRow.job_id.in_(chunk), TaskRow.state.in_(live)))
            )
        self.touched = touched
        self.versions: dict[str, int] | None = None
        self.claims: list[GpuClaimRow] = []  # added once the placed tasks' rows are written

    def version(self, node: str) -> int:
        """The node's new desired-state version: every node the plan touches is advanced together, once."""
        if self.versions is None:
            self.versions = bump_nodes(self.session, self.touched)
        return self.versions.get(node, 0)


_CHUNK = 500  # ids per IN (...) list


def _types_of(node: NodeRow, gpus: Sequence[int]) -> list[str]:
    """The type of each of ``gpus`` on ``node`` now, kept with the task so accounting never re-types it."""
    types = {int(gpu["index"]): str(gpu["type"]) for gpu in node.gpus}
    return [types.get(index, "") for index in gpus]


def _place(
    session: Session, placement: Placement, placing: _Placing, nodes: dict[str, NodeRow], usage: _Usage, now: datetime
) -> bool:
    job = placing.jobs.get(placement.job_id)
    if job is None or job.state != JobState.PENDING.value or job.id in placing.busy:
        return False
    if not _still_fits(placement, nodes, usage):
        return False
    placing.busy.add(job.id)
    first = placement.allocations[0].node
    for rank, alloc in enumerate(placement.allocations):
        task_id = f"{job.id}/{job.generation}/{rank}"
        # Rank 0 goes out now; the other ranks once rank 0's agent has chosen the rendezvous port.
        version = placing.version(alloc.node) if rank == 0 else 0
        session.add(
            TaskRow(
                id=task_id,
                job_id=job.id,
                generation=job.generation,
                node_rank=rank,
                node=alloc.node,
                state=TaskState.ASSIGNED.value,
                gpus=list(alloc.gpus),
                gpu_types=_types_of(nodes[alloc.node], alloc.gpus),
                gpu_fraction=alloc.gpu_fraction,
                cpus=alloc.cpus,
                memory_mb=alloc.memory_mb,
                master_addr=nodes[first].address or "127.0.0.1",
                master_port=0,  # the rank-0 agent picks a free one when it starts the task
                assigned_version=version,
                exit_code=None,
                detail="",
                assigned_at=now,
                started_at=None,
                finished_at=None,
                fenced_after=None,
            )
        )
        for index in alloc.gpus:
            placing.claims.append(
                GpuClaimRow(
                    node=alloc.node, gpu_index=index, fraction=alloc.gpu_fraction, job_id=job.id, task_id=task_id
                )
            )
            usage.gpu[(alloc.node, index)] += alloc.gpu_fraction
        usage.cpus[alloc.node] += alloc.cpus
        usage.memory[alloc.node] += alloc.memory_mb
    where = ", ".join(f"{a.node}[{','.join(map(str, a.gpus))}]" if a.gpus else a.node for a in placement.allocations)
    job.reason = f"starting on {where}"
    tasks = [
        {
            "task": f"{job.id}/{job.generation}/{rank}",
            "node": a.node,
            "gpus": list(a.gpus),
            "fraction": a.gpu_fraction if a.gpus else 0.0,
        }
        for rank, a in enumerate(placement.allocations)
    ]
    record_event(session, now, "job.placed", job.reason, job_id=job.id, generation=job.generation, tasks=tasks)
    return True


def _still_fits(placement: Placement, nodes: dict[str, NodeRow], usage: _Usage) -> bool:
    for alloc in placement.allocations:
        node = nodes.get(alloc.node)
        if node is None or node.state != NodeState.READY.value or node.health_problem:
            return False
        indices = {g["index"] for g in node.gpus if str(g["index"]) not in node.unhealthy_gpus}
        for index in alloc.gpus:
            if index not in indices or usage.gpu[(alloc.node, index)] + alloc.gpu_fraction > 1.0 + EPSILON:
                return False
        if alloc.cpus and usage.cpus[alloc.node] + alloc.cpus > node.cpus + EPSILON:
            return False
        if alloc.memory_mb and usage.memory[alloc.node] + alloc.memory_mb > node.memory_mb:
            return False
    return True
