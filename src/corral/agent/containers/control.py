"""Running a runtime's commands that list and remove containers."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import subprocess
from typing import NamedTuple

from corral.agent.containers.base import ContainerRuntime

log = logging.getLogger(__name__)
# How long a runtime may take to kill and remove a container.
REMOVE_TIMEOUT_S = 30.0
# A container whose processes were killed behind the runtime's back is "running" to it until a first
# removal finds them gone; the next one removes it.
REMOVE_ATTEMPTS = 3
RETRY_AFTER_S = 0.2


class Outcome(NamedTuple):
    ok: bool
    output: str
    errors: str


async def remove_containers(runtime: ContainerRuntime, names: list[str]) -> None:
    """Kill and remove the containers, all at once; the ones already gone are no error."""
    await asyncio.gather(*(_remove(runtime, name) for name in names))


async def _remove(runtime: ContainerRuntime, name: str) -> None:
    command = runtime.remove(name)
    if command is None:
        return
    for attempt in range(1, REMOVE_ATTEMPTS + 1):
        outcome = await _run(command, REMOVE_TIMEOUT_S)
        if outcome.ok or runtime.already_gone(outcome.errors):
            return
        if attempt < REMOVE_ATTEMPTS:
            await asyncio.sleep(RETRY_AFTER_S)
    log.warning("could not remove container %s: %s", name, outcome.errors.strip())


async def remove_left_behind(runtime: ContainerRuntime, node: str, keep: set[str]) -> list[str]:
    """Remove the node's containers that no task of this agent owns (an earlier agent's, whose rank
    processes died with it); the names removed."""
    command = runtime.list_node(node)
    if command is None:
        return []
    listed = await _run(command, REMOVE_TIMEOUT_S)
    if not listed.ok:
        log.warning("could not list the containers of node %s: %s", node, listed.errors.strip())
        return []
    orphans = sorted(set(listed.output.split()) - keep)
    await remove_containers(runtime, orphans)
    return orphans


async def _run(argv: list[str], timeout_s: float) -> Outcome:
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
    except OSError as exc:
        return Outcome(False, "", f"cannot run {argv[0]}: {exc}")
    try:
        async with asyncio.timeout(timeout_s):
            output, errors = await proc.communicate()
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        return Outcome(False, "", f"{' '.join(argv)} did not finish within {timeout_s:.0f}s")
    return Outcome(proc.returncode == 0, output.decode(errors="replace"), errors.decode(errors="replace"))
