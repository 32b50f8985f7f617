"""Running tasks in containers: one class per runtime turns a rank into the runtime's argv.

--runtime NAME, or the first of docker, podman, apptainer, enroot on PATH that answers (detect)
    │
    ▼
ContainerRuntime.run(ContainerTask) ──▶ ContainerRun(argv, env) ──▶ started like a bare rank
ContainerRuntime.remove ──▶ control: once the rank's processes are gone, so no container outlives them
"""

from __future__ import annotations

from corral.agent.containers.base import ContainerRun, ContainerRuntime, ContainerTask
from corral.agent.containers.control import remove_containers, remove_left_behind
from corral.agent.containers.detect import CHOICES, NO_RUNTIME, RUNTIMES, Found, find_runtime

__all__ = [
    "CHOICES",
    "NO_RUNTIME",
    "RUNTIMES",
    "ContainerRun",
    "ContainerRuntime",
    "ContainerTask",
    "Found",
    "find_runtime",
    "remove_containers",
    "remove_left_behind",
]
