"""Podman and Docker: a daemon (or conmon) keeps the container, not the client that started it.

Both run the container on the host's network (``MASTER_ADDR``/``MASTER_PORT`` and a service's
``$PORT`` work as on the bare node) and IPC namespace (NCCL and data loaders use shared memory).
Variables are passed by name (``-e NAME``): the values come from the client's environment.

Stopping: the rank's SIGTERM reaches the client, which passes it on to the container (``run``
proxies signals); ``--init`` puts an init process first in the container that hands it to the
command (as process 1 the command itself would ignore it). The grace period and SIGKILL of the
client are the agent's as for a bare rank; then ``remove`` kills and removes whatever is left, so
no container outlives its task. (``podman stop`` would send the command a second SIGTERM.)
"""

from __future__ import annotations

from abc import abstractmethod

from corral.agent.containers.base import (
    ContainerRun,
    ContainerRuntime,
    ContainerTask,
    argv_of,
    device_names,
    renumbered_gpus,
)

TASK_LABEL = "corral.task"
NODE_LABEL = "corral.node"


class OciRuntime(ContainerRuntime):
    def run(self, task: ContainerTask) -> ContainerRun:
        env = renumbered_gpus(task)
        devices = device_names(task) if task.real_gpus else []
        if devices:
            env.update(self.gpu_env(devices))
        argv = [self.executable, "run", "--rm", *self.replace_flag(), "--name", task.name]
        argv += ["--label", f"{TASK_LABEL}={task.name}", "--label", f"{NODE_LABEL}={task.node}"]
        argv += ["--init", "--network", "host", "--ipc", "host"]
        for key in sorted(env):
            argv += ["-e", key]
        argv += ["-v", f"{task.workdir}:{task.workdir}", "-w", task.workdir]
        for mount in task.mounts:
            argv += ["-v", f"{mount.host}:{mount.container}:{'ro' if mount.read_only else 'rw'}"]
        if devices:
            argv += self.gpu_flags(devices)
        return ContainerRun([*argv, task.image, *argv_of(task.command)], env)

    def replace_flag(self) -> list[str]:
        return []

    @abstractmethod
    def gpu_flags(self, devices: list[str]) -> list[str]:
        """The options that pass these devices (named as ``device_names`` does)."""

    def gpu_env(self, devices: list[str]) -> dict[str, str]:
        return {}

    def list_node(self, node: str) -> list[str]:
        return [self.executable, "ps", "-a", "--filter", f"label={NODE_LABEL}={node}", "--format", "{{.Names}}"]


class Podman(OciRuntime):
    """GPUs through CDI (``nvidia-ctk cdi generate``): ``--device nvidia.com/gpu=INDEX``, and a MIG
    device by its UUID name, ``nvidia.com/gpu=MIG-…`` (the spec must hold UUID names)."""

    name = "podman"

    def probe(self) -> list[str]:
        return [self.executable, "info", "--format", "{{.Version.Version}}"]  # reads its storage and config

    def replace_flag(self) -> list[str]:
        return ["--replace"]  # a container of that name left by a crash would block the start

    def gpu_flags(self, devices: list[str]) -> list[str]:
        return [flag for name in devices for flag in ("--device", f"nvidia.com/gpu={name}")]

    def remove(self, name: str) -> list[str]:
        return [self.executable, "rm", "-f", "--ignore", "--time", "0", name]  # the grace period is over


class Docker(OciRuntime):
    """GPUs through the NVIDIA Container Toolkit: ``--gpus '"device=0,1"'``; MIG devices by UUID."""

    name = "docker"

    def probe(self) -> list[str]:
        return [self.executable, "info", "--format", "{{.ServerVersion}}"]  # fails without a reachable daemon

    def gpu_flags(self, devices: list[str]) -> list[str]:
        # The quotes are Docker's: without them the comma would split the option.
        return ["--gpus", '"device=' + ",".join(devices) + '"']

    def gpu_env(self, devices: list[str]) -> dict[str, str]:
        # CUDA images set NVIDIA_VISIBLE_DEVICES=all; a toolkit hook that reads it would add every GPU.
        return {"NVIDIA_VISIBLE_DEVICES": ",".join(devices)}

    def remove(self, name: str) -> list[str]:
        return [self.executable, "rm", "-f", name]

    def already_gone(self, errors: str) -> bool:
        return "No such container" in errors
