"""Each node's desired state: the tasks it should run, each with what it needs to start."""

from __future__ import annotations

import math
import os
from typing import Any, Protocol

from sqlalchemy import Row, select
from sqlalchemy.orm import Session

from corral.api import DesiredState, DesiredTask, HostSlots
from corral.head.desiredcache import keep
from corral.head.runtime import HeadRuntime
from corral.head.services.lifecycle import LIVE_TASK_STATES, stop_grace
from corral.head.store.tables import JobRow, NodeRow, TaskRow
from corral.model import TaskState


class _Ranked(Protocol):
    node_rank: int
    master_port: int


def handed_out(task: _Ranked) -> bool:
    """Whether the task is in its node's desired state yet: a rank above 0 waits for rank 0's port."""
    return task.node_rank == 0 or task.master_port != 0


_CHUNK = 500  # ids per IN (...) list


def desired_state(session: Session, rt: HeadRuntime, node: NodeRow) -> DesiredState:
    """The tasks this node should run now, each with what it needs to start."""
    return DesiredState.model_validate_json(desired_json(session, rt, node))


def desired_json(session: Session, rt: HeadRuntime, node: NodeRow) -> bytes:
    """The node's desired state as JSON. Reads which tasks are live (one query, and one more for the
    hosts of gangs) and serialises only the tasks the head has not serialised before (``desiredcache``)."""
    live = session.execute(
        select(
            TaskRow.id,
            TaskRow.job_id,
            TaskRow.node_rank,
            TaskRow.state,
            TaskRow.master_port,
            TaskRow.stop_grace_s,
            JobRow.nodes,
        )
        .join(JobRow, JobRow.id == TaskRow.job_id)
        .where(TaskRow.node == node.name, TaskRow.state.in_([s.value for s in LIVE_TASK_STATES]))
        .order_by(TaskRow.id)
    ).all()
    stopping = TaskState.STOPPING.value
    stop_grace = {t.id: t.stop_grace_s for t in live if t.state == stopping and t.stop_grace_s is not None}
    wanted = [t for t in live if t.state != stopping and handed_out(t)]
    hosts = _hosts(session, {t.job_id for t in wanted if t.nodes > 1})
    keys = [(t.id, t.master_port, tuple((h.addr, h.slots) for h in hosts.get(t.id, ()))) for t in wanted]
    with rt.desired_pieces.node(node.name, node.token_hash) as known:
        missing = [t.id for t, key in zip(wanted, keys, strict=True) if key not in known]
        made = _serialise(session, rt, node, missing, hosts) if missing else {}
        listed = {key: known.get(key) or made[key[0]] for key in keys}
        keep(known, listed)
    envelope = DesiredState(version=node.desired_version, tasks=[], stop_grace_s=stop_grace).model_dump_json()
    tasks = b'"tasks":[' + b",".join(listed.values()) + b"]"
    return envelope.encode().replace(b'"tasks":[]', tasks, 1)


def _serialise(
    session: Session, rt: HeadRuntime, node: NodeRow, task_ids: list[str], gang_hosts: dict[str, list[HostSlots]]
) -> dict[str, bytes]:
    """Each of these tasks as the JSON of its ``DesiredTask``, by task id (columns only: no ORM objects)."""
    memory = _gpu_memory(node)
    own = node.address or node.name
    checkpoints = str(rt.settings.checkpoints)  # joined as a string: a Path per task costs more than the rest
    out: dict[str, bytes] = {}
    for start in range(0, len(task_ids), _CHUNK):
        rows = session.execute(
            select(*_TASK_COLUMNS, *_JOB_COLUMNS)
            .join(JobRow, JobRow.id == TaskRow.job_id)
            .where(TaskRow.id.in_(task_ids[start : start + _CHUNK]))
        ).all()
        for row in rows:
            hosts = gang_hosts.get(row.id) or [HostSlots(addr=own, slots=max(1, len(row.gpus)))]
            out[row.id] = desired_task(rt, row, hosts, memory, checkpoints).model_dump_json().encode()
    return out


_TASK_COLUMNS = (
    TaskRow.id,
    TaskRow.job_id,
    TaskRow.generation,
    TaskRow.node_rank,
    TaskRow.gpus,
    TaskRow.gpu_fraction,
    TaskRow.master_addr,
    TaskRow.master_port,
)
_JOB_COLUMNS = (JobRow.name, JobRow.user, JobRow.team, JobRow.nodes, JobRow.gpus_per_node, JobRow.restarts, JobRow.spec)


def _hosts(session: Session, job_ids: set[str]) -> dict[str, list[HostSlots]]:
    """By task id: every node of the task's attempt, in node-rank order, with its GPU count as slots."""
    if not job_ids:
        return {}
    rows = session.execute(
        select(TaskRow.id, TaskRow.job_id, TaskRow.generation, TaskRow.node, NodeRow.address, TaskRow.gpus)
        .join(NodeRow, NodeRow.name == TaskRow.node)
        .where(TaskRow.job_id.in_(job_ids))
        .order_by(TaskRow.job_id, TaskRow.generation, TaskRow.node_rank)
    ).all()
    attempts: dict[tuple[str, int], list[HostSlots]] = {}
    for r in rows:
        attempts.setdefault((r.job_id, r.generation), []).append(
            HostSlots(addr=r.address or r.node, slots=max(1, len(r.gpus)))
        )
    return {r.id: attempts[(r.job_id, r.generation)] for r in rows}


def _gpu_memory(node: NodeRow) -> dict[int, int]:
    return {int(g["index"]): int(g.get("memory_mb", 0)) for g in node.gpus}


def _sharing_env(task: Row[Any], gpu_memory: dict[int, int]) -> dict[str, str]:
    """For a fraction of a GPU: the share of its SMs (MPS) and of its memory the job may use."""
    if task.gpu_fraction >= 1.0 or not task.gpus:
        return {}
    memory = min((gpu_memory.get(i, 0) for i in task.gpus), default=0)
    # Whole percents rounded down, as the memory is, so the sharers of one GPU never get more than 100
    # between them, nor one of them all of it; the nudge keeps 0.29 (28.999… × 100) at 29.
    percent = max(1, math.floor(task.gpu_fraction * 100 + 1e-9))
    env = {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": str(percent)}
    if memory:
        env["CORRAL_GPU_MEMORY_LIMIT_MB"] = str(int(memory * task.gpu_fraction))
    return env


def desired_task(
    rt: HeadRuntime, row: Row[Any], hosts: list[HostSlots], gpu_memory: dict[int, int], checkpoints: str
) -> DesiredTask:
    """One task as its agent gets it, from a row of ``_TASK_COLUMNS`` and ``_JOB_COLUMNS``; ``checkpoints``
    is the directory that holds each job's checkpoint directory."""
    job = task = row
    spec = job.spec
    launcher = spec.get("launcher", "per-node")
    whole = int(job.gpus_per_node) if job.gpus_per_node >= 1 else 0
    processes = whole if launcher == "per-gpu" and whole > 0 else 1
    checkpoint_dir = os.path.join(checkpoints, job.job_id)
    env = dict(spec.get("env", {}))
    env.update(
        {
            "CORRAL_JOB_ID": job.job_id,
            "CORRAL_JOB_NAME": job.name,
            "CORRAL_USER": job.user,
            "CORRAL_TEAM": job.team,
            "CORRAL_HEAD": rt.settings.url,
            "WORLD_SIZE": str(processes * job.nodes),
            "NNODES": str(job.nodes),
            "NODE_RANK": str(task.node_rank),
            "LOCAL_WORLD_SIZE": str(processes),
            "MASTER_ADDR": task.master_addr,
            "CORRAL_GPUS_PER_NODE": _gpus_text(job.gpus_per_node),
            "CORRAL_CHECKPOINT_DIR": checkpoint_dir,
            "CORRAL_RESTART_COUNT": str(job.restarts),
            "CORRAL_GENERATION": str(task.generation),
        }
    )
    if task.master_port:
        env["MASTER_PORT"] = str(task.master_port)
    env.update(_sharing_env(task, gpu_memory))
    if spec.get("array_id"):
        env["CORRAL_ARRAY_JOB_ID"] = spec["array_id"]
        env["CORRAL_ARRAY_INDEX"] = str(spec["array_index"])
    return DesiredTask(
        task_id=task.id,
        job_id=job.job_id,
        generation=task.generation,
        node_rank=task.node_rank,
        command=spec["command"],
        launcher=launcher,
        gpus=list(task.gpus),
        gpu_fraction=task.gpu_fraction,
        env=env,
        rank_offset=task.node_rank * processes,
        processes=processes,
        workdir=spec.get("workdir"),
        image=spec.get("image"),
        volumes=list(spec.get("volumes", [])),
        checkpoint_dir=checkpoint_dir,
        grace_s=stop_grace(spec, rt.settings.grace_s),
        hosts=hosts,
    )


def _gpus_text(gpus: float) -> str:
    return str(int(gpus)) if float(gpus).is_integer() else str(gpus)
