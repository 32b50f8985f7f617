"""Podman for tests: a containers.conf of their own and a tiny image imported from a tarball.

Nothing is pulled: the image is a root file system holding a static busybox, imported with
``podman import``. The configuration (named by ``CONTAINERS_CONF``, so ``/etc`` stays untouched)
picks runc and lowers the default ulimits, which is what podman needs to run in small VMs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

NODE_LABEL = "corral.node"  # as the agent labels its containers (corral.agent.containers.oci)
IMAGE = "localhost/corral-test/busybox:2"  # a new tag whenever the applets change: an old image is reused
CONF_ENV = "CONTAINERS_CONF"
_CONF = """\
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]

[engine]
runtime = "runc"
"""
_APPLETS: tuple[str, ...] = ("sh", "echo", "cat", "env", "sleep", "touch", "test", "true", "false", "ls", "head")
_APPLETS += ("id", "nc", "seq", "httpd")
_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class LocalPodman:
    conf: Path
    image: str = IMAGE
    # ``containers`` lists only those of agents whose work directory is under this path ("": every agent's).
    scope: str = ""

    def env(self) -> dict[str, str]:
        """What a process that runs podman needs in its environment."""
        return {CONF_ENV: str(self.conf)}

    def podman(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["podman", *args],
            env={**os.environ, **self.env()},
            capture_output=True,
            text=True,
            timeout=_TIMEOUT_S,
            check=False,
        )

    def containers(self, prefix: str = "corral-") -> list[str]:
        """Names of the containers (running or not) whose name starts with ``prefix``, of the agents under
        ``scope``: a container names its agent's node and work directory in its ``corral.node`` label
        (``NODE@WORK_DIR``). One with no such label is listed too. Other containers on this host (another
        test run's, going on beside this one or left by one that was interrupted) are not."""
        listed = self.podman("ps", "-a", "--format", '{{.Names}}\t{{index .Labels "' + NODE_LABEL + '"}}')
        if listed.returncode != 0:
            raise RuntimeError(f"podman ps failed: {listed.stderr.strip()}")
        names = []
        for line in listed.stdout.splitlines():
            name, _, node = line.strip().partition("\t")
            if name.startswith(prefix) and self._in_scope(node):
                names.append(name)
        return sorted(names)

    def _in_scope(self, node: str) -> bool:
        work_dir = node.partition("@")[2]
        return not self.scope or not work_dir or work_dir == self.scope or work_dir.startswith(self.scope + "/")


def static_busybox() -> Path | None:
    """A busybox that needs no shared library (the ``busybox-static`` package), or None."""
    found = shutil.which("busybox")
    if found is None:
        return None
    ldd = subprocess.run(["ldd", found], capture_output=True, text=True, check=False)
    return Path(found) if ldd.returncode != 0 or "not a dynamic executable" in ldd.stdout + ldd.stderr else None


def prepare(directory: Path) -> LocalPodman | str:
    """Write the configuration and import the image; a reason instead where podman cannot run here."""
    if shutil.which("podman") is None:
        return "podman is not installed (apt-get install podman runc catatonit busybox-static)"
    busybox = static_busybox()
    if busybox is None:
        return "no static busybox to build the test image from (apt-get install busybox-static)"
    directory.mkdir(parents=True, exist_ok=True)
    conf = directory / "containers.conf"
    conf.write_text(_CONF)
    podman = LocalPodman(conf)
    if podman.podman("image", "exists", IMAGE).returncode != 0:
        rootfs = directory / "rootfs.tar"
        _write_rootfs(rootfs, busybox)
        imported = podman.podman("import", str(rootfs), IMAGE)
        if imported.returncode != 0:
            return f"podman import failed: {imported.stderr.strip()}"
    probe = podman.podman("run", "--rm", "--init", "--network", "host", IMAGE, "true")
    if probe.returncode != 0:
        return f"podman cannot run a container here: {probe.stderr.strip()}"
    return podman


def _write_rootfs(path: Path, busybox: Path) -> None:
    with tarfile.open(path, "w") as tar:
        for name in ("bin", "etc", "tmp"):
            info = tarfile.TarInfo(name)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if name == "tmp" else 0o755
            tar.addfile(info)
        tar.add(busybox, "bin/busybox")
        for applet in _APPLETS:
            link = tarfile.TarInfo(f"bin/{applet}")
            link.type, link.linkname = tarfile.SYMTYPE, "busybox"
            tar.addfile(link)
