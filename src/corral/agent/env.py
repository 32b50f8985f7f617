"""The environment of a task's processes: the agent's own, the job's, and the rank variables."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from corral.api import DesiredTask

HOSTFILE = "hostfile"

# Credentials of whoever started the agent must not leak into jobs.
_DROPPED = ("CORRAL_TOKEN", "CORRAL_JOIN_TOKEN")


def hostfile_text(task: DesiredTask) -> str:
    """An MPI/DeepSpeed hostfile: one ``ADDRESS slots=N`` line per node, rank 0 first."""
    return "".join(f"{host.addr} slots={host.slots}\n" for host in task.hosts)


def inherited_env() -> dict[str, str]:
    """What a task's processes get of the agent's own environment."""
    return {k: v for k, v in os.environ.items() if k not in _DROPPED}


def process_env(
    task: DesiredTask,
    local_rank: int,
    node: str,
    task_dir: str,
    marker: str,
    base: Mapping[str, str] | None = None,
    visible: Mapping[int, str] | None = None,
) -> dict[str, str]:
    """The rank's environment: ``base`` (default: the agent's, see ``inherited_env``), the job's
    variables, and Corral's. ``visible`` names GPU slots for CUDA_VISIBLE_DEVICES where their index
    does not (MIG devices, by UUID)."""
    names = visible or {}
    env = inherited_env() if base is None else {k: v for k, v in base.items() if k not in _DROPPED}
    env.update(task.env)
    env.update(
        {
            "CUDA_VISIBLE_DEVICES": ",".join(names.get(i, str(i)) for i in task.gpus),
            "RANK": str(task.rank_offset + local_rank),
            "LOCAL_RANK": str(local_rank),
            "CORRAL_NODE": node,
            "CORRAL_TASK_DIR": task_dir,
            "CORRAL_TASK_MARKER": marker,
        }
    )
    if task.hosts:
        env["CORRAL_HOSTFILE"] = str(Path(task_dir) / HOSTFILE)
    return env
