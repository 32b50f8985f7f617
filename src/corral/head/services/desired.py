"""Each node's desired state: the tasks it should run, each with what it needs to start."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from corral.api import DesiredState, DesiredTask, HostSlots
from corral.head.runtime import HeadRuntime
from corral.head.services.lifecycle import LIVE_TASK_STATES, stop_grace
from corral.head.store.tables import JobRow, NodeRow, TaskRow
from corral.model import TaskState


def handed_out(task: TaskRow) -> bool:
    """Whether the task is in its node's desired state yet: a rank above 0 waits for rank 0's port."""
    return task.node_rank == 0 or task.master_port != 0


def desired_state(session: Session, rt: HeadRuntime, node: NodeRow) -> DesiredState:
    """The tasks this node should run now, each with what it needs to start (three queries in all)."""
    tasks = list(
        session.scalars(
            select(TaskRow)
            .where(TaskRow.node == node.name, TaskRow.state.in_([s.value for s in LIVE_TASK_STATES]))
            .order_by(TaskRow.id)
        )
    )
    stop_grace = {
        t.id: t.stop_grace_s for t in tasks if t.state == TaskState.STOPPING.value and t.stop_grace_s is not None
    }
    wanted = [t for t in tasks if t.state != TaskState.STOPPING.value and handed_out(t)]
    if not wanted:
        return DesiredState(version=node.desired_version, tasks=[], stop_grace_s=stop_grace)
    job_ids = {t.job_id for t in wanted}
    jobs = {job.id: job for job in session.scalars(select(JobRow).where(JobRow.id.in_(job_ids)))}
    hosts = _hosts(session, job_ids)
    memory = _gpu_memory(node)
    out = [
        desired_task(rt, jobs[t.job_id], t, hosts.get((t.job_id, t.generation), []), memory)
        for t in wanted
        if t.job_id in jobs
    ]
    return DesiredState(version=node.desired_version, tasks=out, stop_grace_s=stop_grace)


def _hosts(session: Session, job_ids: set[str]) -> dict[tuple[str, int], list[HostSlots]]:
    """Every node of every attempt of these jobs, in node-rank order, with its GPU count as slots."""
    rows = session.execute(
        select(TaskRow.job_id, TaskRow.generation, TaskRow.node, NodeRow.address, TaskRow.gpus)
        .join(NodeRow, NodeRow.name == TaskRow.node)
        .where(TaskRow.job_id.in_(job_ids))
        .order_by(TaskRow.job_id, TaskRow.generation, TaskRow.node_rank)
    ).all()
    hosts: dict[tuple[str, int], list[HostSlots]] = {}
    for r in rows:
        hosts.setdefault((r.job_id, r.generation), []).append(
            HostSlots(addr=r.address or r.node, slots=max(1, len(r.gpus)))
        )
    return hosts


def _gpu_memory(node: NodeRow) -> dict[int, int]:
    return {int(g["index"]): int(g.get("memory_mb", 0)) for g in node.gpus}


def _sharing_env(task: TaskRow, gpu_memory: dict[int, int]) -> dict[str, str]:
    """For a fraction of a GPU: the share of its SMs (MPS) and of its memory the job may use."""
    if task.gpu_fraction >= 1.0 or not task.gpus:
        return {}
    memory = min((gpu_memory.get(i, 0) for i in task.gpus), default=0)
    env = {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": str(max(1, round(task.gpu_fraction * 100)))}
    if memory:
        env["CORRAL_GPU_MEMORY_LIMIT_MB"] = str(int(memory * task.gpu_fraction))
    return env


def desired_task(
    rt: HeadRuntime, job: JobRow, task: TaskRow, hosts: list[HostSlots], gpu_memory: dict[int, int] | None = None
) -> DesiredTask:
    spec = job.spec
    launcher = spec.get("launcher", "per-node")
    whole = int(job.gpus_per_node) if job.gpus_per_node >= 1 else 0
    processes = whole if launcher == "per-gpu" and whole > 0 else 1
    checkpoint_dir = str(rt.settings.checkpoints / job.id)
    env = dict(spec.get("env", {}))
    env.update(
        {
            "CORRAL_JOB_ID": job.id,
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
    env.update(_sharing_env(task, gpu_memory or {}))
    if spec.get("array_id"):
        env["CORRAL_ARRAY_JOB_ID"] = spec["array_id"]
        env["CORRAL_ARRAY_INDEX"] = str(spec["array_index"])
    return DesiredTask(
        task_id=task.id,
        job_id=job.id,
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
        grace_s=stop_grace(job, rt.settings.grace_s),
        hosts=hosts,
    )


def _gpus_text(gpus: float) -> str:
    return str(int(gpus)) if float(gpus).is_integer() else str(gpus)
