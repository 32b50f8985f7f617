"""Apptainer and Enroot: daemonless; the container is the process tree the client started, so
ending the rank's processes (SIGTERM, grace, SIGKILL, as for a bare rank) ends it, and nothing is
left to remove."""

from __future__ import annotations

from corral.agent.containers.base import ContainerRun, ContainerRuntime, ContainerTask, argv_of, renumbered_gpus


class Apptainer(ContainerRuntime):
    """``apptainer exec --cleanenv [--nv] --bind …``: variables go in as ``APPTAINERENV_NAME``. ``--nv``
    binds every GPU of the host, so ``CUDA_VISIBLE_DEVICES`` keeps the host's indices."""

    name = "apptainer"

    def run(self, task: ContainerTask) -> ContainerRun:
        argv = [self.executable, "exec", "--cleanenv"]
        if task.real_gpus and task.gpus:
            argv.append("--nv")
        argv += ["--bind", f"{task.workdir}:{task.workdir}", "--pwd", task.workdir]
        for mount in task.mounts:
            argv += ["--bind", f"{mount.host}:{mount.container}:{'ro' if mount.read_only else 'rw'}"]
        env = {f"APPTAINERENV_{key}": value for key, value in task.env.items()}
        return ContainerRun([*argv, task.image, *argv_of(task.command)], env)

    def probe(self) -> list[str]:
        return [self.executable, "--version"]


class Enroot(ContainerRuntime):
    """``enroot start --rw --mount … --env …``; the image is a squashfs file (``enroot import``) or a
    container made with ``enroot create``. Enroot's NVIDIA hook mounts the GPUs named in
    ``NVIDIA_VISIBLE_DEVICES`` only, so inside they count from 0."""

    name = "enroot"

    def run(self, task: ContainerTask) -> ContainerRun:
        env = renumbered_gpus(task)
        if task.real_gpus and task.gpus:
            env["NVIDIA_VISIBLE_DEVICES"] = ",".join(str(i) for i in task.gpus)
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
