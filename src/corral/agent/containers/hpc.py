"""Apptainer and Enroot: daemonless; the container is the process tree the client started, so
ending the rank's processes (SIGTERM, grace, SIGKILL, as for a bare rank) ends it, and nothing is
left to remove."""

from __future__ import annotations

from corral.agent.containers.base import (
    GPU_ENV,
    ContainerRun,
    ContainerRuntime,
    ContainerTask,
    argv_of,
    device_names,
    has_mig,
    renumbered_gpus,
)


class Apptainer(ContainerRuntime):
    """``apptainer exec --cleanenv [--nv] --bind …``: variables go in as ``APPTAINERENV_NAME``. ``--nv``
    binds every GPU of the host, so ``CUDA_VISIBLE_DEVICES`` keeps the host's names: indices, or the
    UUIDs of MIG devices (the host's ``/dev``, MIG's capability devices included, is shared)."""

    name = "apptainer"

    def run(self, task: ContainerTask) -> ContainerRun:
        argv = [self.executable, "exec", "--cleanenv"]
        if task.real_gpus and task.gpus:
            argv.append("--nv")
        argv += ["--bind", f"{task.workdir}:{task.workdir}", "--pwd", task.workdir]
        for mount in task.mounts:
            argv += ["--bind", f"{mount.host}:{mount.container}:{'ro' if mount.read_only else 'rw'}"]
        inside = dict(task.env)
        if task.real_gpus and has_mig(task):
            inside[GPU_ENV] = ",".join(device_names(task))
        env = {f"APPTAINERENV_{key}": value for key, value in inside.items()}
        return ContainerRun([*argv, task.image, *argv_of(task.command)], env)

    def probe(self) -> list[str]:
        return [self.executable, "--version"]


class Enroot(ContainerRuntime):
    """``enroot start --rw --mount … --env …``; the image is a squashfs file (``enroot import``) or a
    container made with ``enroot create``. Enroot's NVIDIA hook mounts the GPUs named in
    ``NVIDIA_VISIBLE_DEVICES`` only (MIG devices by UUID), so inside they count from 0."""

    name = "enroot"

    def run(self, task: ContainerTask) -> ContainerRun:
        env = renumbered_gpus(task)
        if task.real_gpus and task.gpus:
            env["NVIDIA_VISIBLE_DEVICES"] = ",".join(device_names(task))
        argv = [self.executable, "start", "--rw"]
        for host, container, mode in [(task.workdir, task.workdir, "rw")] + [
            (m.host, m.container, "ro" if m.read_only else "rw") for m in task.mounts
        ]:
            argv += ["--mount", f"{host}:{container}:none:x-create=dir,bind,{mode}"]
        for key in sorted(env):
            argv += ["--env", key]
        # Enroot has no working-directory option: the image's shell changes into it first.
        in_workdir = ["/bin/sh", "-c", 'cd "$0" && exec "$@"', task.workdir, *argv_of(task.command)]
        return ContainerRun([*argv, task.image, *in_workdir], env)

    def probe(self) -> list[str]:
        return [self.executable, "version"]
