"""A task's rank as a container: its name, what is mounted, and the command it starts with."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from corral.agent.containers.base import ContainerRun, ContainerRuntime, ContainerTask
from corral.agent.gpus.base import HostDevice
from corral.agent.launch import MARKER_ENV, LaunchError
from corral.api import DesiredTask
from corral.spec.containers import Volume, parse_volume

# Kept out of the container: the agent finds a task's host-side processes by it, and would otherwise
# signal the container's processes itself, on top of the SIGTERM the runtime's client passes on.
_HOST_ONLY = frozenset({MARKER_ENV})


def container_name(task: DesiredTask, rank: int) -> str:
    """``corral-j-3fk2a9qz-1-0-r0``: job, attempt, node rank and rank; unique on the node."""
    return re.sub(r"[^A-Za-z0-9_.-]", "-", f"corral-{task.job_id}-{task.generation}-{task.node_rank}-r{rank}")


def container_names(task: DesiredTask) -> list[str]:
    return [container_name(task, task.rank_offset + local) for local in range(task.processes)]


def container_run(
    runtime: ContainerRuntime | None,
    task: DesiredTask,
    rank: int,
    job_env: Mapping[str, str],
    cwd: Path,
    task_dir: Path,
    real_gpus: bool,
    node: str,
    devices: Mapping[int, HostDevice] | None = None,
) -> ContainerRun:
    """How the rank starts in the task's image; ``job_env``: the variables the job sees;
    ``devices``: the host device behind each slot, where discovery knows it."""
    if task.image is None:
        raise ValueError("the task has no image")
    if runtime is None:
        raise LaunchError(
            f"the job runs in image {task.image} but this agent has no container runtime; "
            "start it with --runtime docker|podman|apptainer|enroot"
        )
    user = [parse_volume(v) for v in task.volumes]
    taken = {v.container for v in user}
    corral = [Volume(str(task_dir), str(task_dir))]
    if Path(task.checkpoint_dir).is_dir():
        corral.append(Volume(task.checkpoint_dir, task.checkpoint_dir))
    mounts = [v for v in corral if v.container not in taken and v.container != str(cwd)] + user
    return runtime.run(
        ContainerTask(
            name=container_name(task, rank),
            image=task.image,
            command=task.command,
            env={k: v for k, v in job_env.items() if k not in _HOST_ONLY},
            workdir=str(cwd),
            mounts=tuple(mounts),
            gpus=tuple(task.gpus),
            real_gpus=real_gpus,
            devices=tuple(devices[g] for g in task.gpus) if devices and all(g in devices for g in task.gpus) else (),
            by_uuid=any(d.mig is not None for d in (devices or {}).values()),
            node=node,
        )
    )
