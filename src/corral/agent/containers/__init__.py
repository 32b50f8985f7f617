"""Running tasks in containers: one class per runtime turns a rank into the runtime's argv.

--runtime NAME, or the first of docker, podman, apptainer, enroot on PATH
    │
    ▼
ContainerRuntime.run(ContainerTask) ──▶ ContainerRun(argv, env) ──▶ started like a bare rank
ContainerRuntime.remove ──▶ control: once the rank's processes are gone, so no container outlives them
"""

from __future__ import annotations

import shutil
from collections.abc import Callable

from corral.agent.containers.base import ContainerRun, ContainerRuntime, ContainerTask
from corral.agent.containers.control import remove_containers, remove_left_behind
from corral.agent.containers.hpc import Apptainer, Enroot
from corral.agent.containers.oci import Docker, Podman

RUNTIMES: dict[str, type[ContainerRuntime]] = {
    "docker": Docker,
    "podman": Podman,
    "apptainer": Apptainer,
    "enroot": Enroot,
}
NO_RUNTIME = "none"
CHOICES = (*RUNTIMES, NO_RUNTIME)


def find_runtime(requested: str | None, which: Callable[[str], str | None] = shutil.which) -> ContainerRuntime | None:
    """The runtime asked for (``none``: no containers), or the first of ``RUNTIMES`` on PATH; None if none.

    Raises ValueError when the one asked for is unknown or not installed."""
    if requested == NO_RUNTIME:
        return None
    if requested is not None:
        if requested not in RUNTIMES:
            raise ValueError(f"expected one of {', '.join(CHOICES)}, got {requested!r}")
        if which(requested) is None:
            raise ValueError(f"{requested} is not on PATH; install it, or pick another of {', '.join(RUNTIMES)}")
        return RUNTIMES[requested]()
    return next((runtime() for name, runtime in RUNTIMES.items() if which(name) is not None), None)


__all__ = [
    "CHOICES",
    "NO_RUNTIME",
    "RUNTIMES",
    "ContainerRun",
    "ContainerRuntime",
    "ContainerTask",
    "find_runtime",
    "remove_containers",
    "remove_left_behind",
]
