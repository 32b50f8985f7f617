"""Which container runtime an agent uses: the one asked for, or the first on PATH that answers."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field

from corral.agent.containers.base import ContainerRuntime
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
PROBE_TIMEOUT_S = 20.0


def probe_problem(runtime: ContainerRuntime) -> str | None:
    """Why the runtime cannot be used here (its probe command fails), or None if it answers."""
    command = runtime.probe()
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"`{' '.join(command)}`: {exc}"
    if result.returncode != 0:
        said = (result.stderr.strip() or result.stdout.strip()).splitlines()
        return f"`{' '.join(command)}` failed: {said[-1] if said else f'exit {result.returncode}'}"
    return None


@dataclass(frozen=True)
class Found:
    runtime: ContainerRuntime | None
    passed_over: dict[str, str] = field(default_factory=dict)
    """Runtimes on PATH that did not answer, and why."""


def find_runtime(
    requested: str | None,
    which: Callable[[str], str | None] = shutil.which,
    problem: Callable[[ContainerRuntime], str | None] = probe_problem,
) -> Found:
    """The runtime asked for (``none``: no containers), or else the first of ``RUNTIMES`` on PATH whose
    probe passes (a Docker client without a daemon does not count).

    Raises ValueError when the one asked for is unknown, not installed, or does not answer."""
    if requested == NO_RUNTIME:
        return Found(None)
    if requested is not None:
        if requested not in RUNTIMES:
            raise ValueError(f"expected one of {', '.join(CHOICES)}, got {requested!r}")
        if which(requested) is None:
            raise ValueError(f"{requested} is not on PATH; install it, or pick another of {', '.join(RUNTIMES)}")
        runtime = RUNTIMES[requested]()
        why = problem(runtime)
        if why is not None:
            raise ValueError(f"{requested} does not work here: {why}")
        return Found(runtime)
    passed_over: dict[str, str] = {}
    for name, kind in RUNTIMES.items():
        if which(name) is None:
            continue
        runtime = kind()
        why = problem(runtime)
        if why is None:
            return Found(runtime, passed_over)
        passed_over[name] = why
    return Found(None, passed_over)
