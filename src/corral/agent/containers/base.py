"""What every container runtime is given, and what it answers: the argv that runs a task's rank.

A runtime only builds commands (pure); ``corral.agent.containers.control`` runs the removal
commands, and the task's rank runs the ``ContainerRun`` like any bare command.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field

from corral.spec.containers import Volume

GPU_ENV = "CUDA_VISIBLE_DEVICES"


@dataclass(frozen=True)
class ContainerTask:
    """One rank to run in a container."""

    name: str
    """Unique on the node: the runtime's name for the container, to stop and remove it by."""
    image: str
    command: str | list[str]
    """A shell line (run by the image's ``/bin/sh``) or an argv."""
    env: Mapping[str, str]
    """Every variable the job sees inside, with the values a bare rank would get."""
    workdir: str
    """A host directory, mounted at the same path and made the command's working directory."""
    mounts: tuple[Volume, ...] = ()
    gpus: tuple[int, ...] = ()
    """The host's indices of the GPUs given to the task."""
    real_gpus: bool = False
    """Whether ``gpus`` are devices of this host (NVML) rather than a fake inventory's."""
    node: str = ""
    """The node's name; a container the runtime keeps carries it, so a later agent finds the ones left behind."""


@dataclass(frozen=True)
class ContainerRun:
    """How to start the container: the argv, and variables to add to that process's environment
    (values the argv names without spelling them out, so they stay off the process list)."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)


def argv_of(command: str | list[str]) -> list[str]:
    return ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)


def renumbered_gpus(task: ContainerTask) -> dict[str, str]:
    """With only its own devices passed in, the container counts them from 0: the job's
    ``CUDA_VISIBLE_DEVICES`` lists 0..n-1 there. Fake GPUs pass no device, so the indices stay the host's."""
    if not task.real_gpus:
        return dict(task.env)
    return {**task.env, GPU_ENV: ",".join(str(i) for i in range(len(task.gpus)))}


class ContainerRuntime(ABC):
    """A container runtime's command line. Subclasses set ``name`` and build ``run``."""

    name = ""

    @property
    def executable(self) -> str:
        return self.name

    @abstractmethod
    def run(self, task: ContainerTask) -> ContainerRun: ...

    def probe(self) -> list[str]:
        """A quick command that succeeds only where the runtime can run containers."""
        return [self.executable, "--version"]

    def list_node(self, node: str) -> list[str] | None:
        """The command that prints the names of every container (running or not) started for ``node``,
        one per line; None where the runtime keeps no containers."""
        return None

    def remove(self, name: str) -> list[str] | None:
        """The command that kills and removes a container, running or not, where the runtime keeps
        containers apart from the processes that started them; None where ending those processes is enough."""
        return None

    def already_gone(self, errors: str) -> bool:
        """Whether a failed ``remove`` said there was no such container (nothing left to do)."""
        return False
