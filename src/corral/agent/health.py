"""The node's own health command (``corral agent --health-cmd``)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal

from corral.agent.launch.process import spawn_waited


async def run_health_command(command: str, timeout_s: float) -> str:
    """Run ``command`` with a shell; answer what is wrong (empty if it exited 0 in time)."""
    try:
        # Named to the orphan reaper, which would otherwise take the exit status of a process in another session.
        process = await spawn_waited(
            asyncio.create_subprocess_shell(
                command,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,  # its own process group: what it starts is killed with it
            )
        )
    except OSError as exc:
        return f"health command could not start: {exc}"
    try:
        async with asyncio.timeout(timeout_s):
            output, _ = await process.communicate()
    except TimeoutError:
        # The whole group: a shell killed alone leaves its children running, holding the output pipe open.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        await process.wait()
        return f"health command `{command}` did not finish within {timeout_s:g}s"
    if process.returncode == 0:
        return ""
    lines = [line for line in output.decode(errors="replace").splitlines() if line.strip()]
    said = f": {lines[-1].strip()[:300]}" if lines else ""
    return f"health command `{command}` exited {process.returncode}{said}"
