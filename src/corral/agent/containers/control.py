"""Running a runtime's removal command for a task's containers."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import subprocess

from corral.agent.containers.base import ContainerRuntime

log = logging.getLogger(__name__)
# How long a runtime may take to kill and remove a container.
REMOVE_TIMEOUT_S = 30.0


async def remove_containers(runtime: ContainerRuntime, names: list[str]) -> None:
    """Kill and remove the containers, all at once; the ones already gone are no error."""
    commands = [c for c in (runtime.remove(name) for name in names) if c]
    await asyncio.gather(*(_run(command, REMOVE_TIMEOUT_S) for command in commands))


async def _run(argv: list[str], timeout_s: float) -> None:
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
    except OSError as exc:
        log.warning("could not run %s: %s", " ".join(argv), exc)
        return
    try:
        output, _ = await asyncio.wait_for(proc.communicate(), timeout_s)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        log.warning("%s did not finish within %.0fs", " ".join(argv), timeout_s)
        return
    if proc.returncode:
        log.debug("%s: exit %s: %s", " ".join(argv), proc.returncode, output.decode(errors="replace").strip())
