"""The environment of a task's processes: the agent's own, the job's, and the rank variables."""

from __future__ import annotations

import os
from collections.abc import Mapping

from corral.api import DesiredTask

# Credentials of whoever started the agent must not leak into jobs.
_DROPPED = ("CORRAL_TOKEN", "CORRAL_JOIN_TOKEN")


def process_env(
    task: DesiredTask, local_rank: int, node: str, task_dir: str, marker: str, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    env = {k: v for k, v in (os.environ if base is None else base).items() if k not in _DROPPED}
    env.update(task.env)
    env.update(
        {
            "CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in task.gpus),
            "RANK": str(task.rank_offset + local_rank),
            "LOCAL_RANK": str(local_rank),
            "CORRAL_NODE": node,
            "CORRAL_TASK_DIR": task_dir,
            "CORRAL_TASK_MARKER": marker,
        }
    )
    return env
