"""What every container runtime is given, and what it answers: the argv that runs a task's rank.

A runtime only builds commands (pure); ``corral.agent.containers.control`` runs the removal
commands, and the task's rank runs the ``ContainerRun`` like any bare command.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field

from corral.agent.gpus.base import HostDevice
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
    devices: tuple[HostDevice, ...] = ()
    """The host devices behind ``gpus``, in the same order (NVML's GPU index, MIG index and UUID);
    empty when unknown, and then the slots are taken for the host's GPU indices."""
    by_uuid: bool = False
    """Name every GPU by UUID to the runtime: the node has MIG on (a MIG device is always named so)."""
    node: str = ""
    """The agent that runs it (node name and work directory, ``TaskSet.owner``); a container the runtime keeps
    carries it, so a later agent of the same node finds the ones left behind, and no other agent does."""


@dataclass(frozen=True)
class ContainerRun:
    """How to start the container: the argv, and variables to add to that process's environment
    (values the argv names without spelling them out, so they stay off the process list)."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)


def argv_of(command: str | list[str]) -> list[str]:
    return ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)


def has_mig(task: ContainerTask) -> bool:
    """Whether a MIG device is among the task's GPUs."""
    return any(d.mig is not None for d in task.devices)


def device_names(task: ContainerTask) -> list[str]:
    """How the host's NVIDIA tooling (CDI spec, ``--gpus``, ``NVIDIA_VISIBLE_DEVICES``) names the task's GPUs.

    On a node with MIG on, every one goes by UUID (``MIG-…``, ``GPU-…``), so one kind of name in
    the CDI spec serves every job there: a MIG device's index name (``0:1``) changes when the GPU
    is partitioned again, its UUID names the very device. Elsewhere by NVML's GPU index, or by slot
    where the host devices are unknown (the same numbers on a node without MIG).
    """
    if not task.devices:
        return [str(i) for i in task.gpus]
    if task.by_uuid or has_mig(task):
        return [d.uuid or d.index_name for d in task.devices]
    return [str(d.gpu) for d in task.devices]


def renumbered_gpus(task: ContainerTask) -> dict[str, str]:
    """With only its own devices passed in, the container counts them from 0: the job's
    ``CUDA_VISIBLE_DEVICES`` lists 0..n-1 there, or the MIG devices' UUIDs (exact whatever the
    order CUDA enumerates them in). Fake GPUs pass no device, so the indices stay the host's."""
    if not task.real_gpus:
        return dict(task.env)
    if has_mig(task):
        return {**task.env, GPU_ENV: ",".join(device_names(task))}
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
