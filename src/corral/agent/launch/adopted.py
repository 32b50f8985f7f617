"""Task processes that outlive their agent: the exit-status wrapper, and following an adopted rank.

A rank's process is the agent's child, so the agent learns its exit status from ``waitpid``. An
agent that restarts while the rank runs is not its parent any more and cannot. So every rank runs
under a ``/bin/sh`` wrapper that waits for the command, writes its exit status to a file, and exits
with it; a new agent follows the wrapper by pid and start time and reads the file once it is gone.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

from corral.agent.launch.process import LaunchError
from corral.agent.launch.procfs import ProcKey, is_alive

# The wrapper defers HUP, INT and TERM until the command has ended (a trapped signal does not cut a
# foreground wait short) while the command itself gets the default handling back. Its own stderr
# goes to /dev/null, so that "Terminated" notices of the shell do not land in the rank's log; the
# shell it starts restores the command's stderr first, then runs a shell line, or becomes the argv.
_WRAPPER = """f=$1; mode=$2; shift 2; trap true HUP INT TERM; exec 3>&2 2>/dev/null
if [ "$mode" = line ]; then /bin/sh -c "exec 2>&3 3>&-
$1"; else /bin/sh -c 'exec 2>&3 3>&-; exec "$@"' corral-rank "$@"; fi
s=$?; echo "$s" > "$f"; exit "$s"
"""

UNRECORDED_STATUS = 128 + signal.SIGKILL
"""The status of a rank whose wrapper left no file: only an uncatchable signal ends it that way."""

_POLL_S = 0.1


def recording_exit(command: str | list[str], exit_file: Path) -> list[str]:
    """The argv that runs ``command`` (a shell line, or an argv) and records its exit status."""
    if not command:
        raise LaunchError("empty command")
    mode, args = ("line", [command]) if isinstance(command, str) else ("argv", command)
    return ["/bin/sh", "-c", _WRAPPER, "corral-wrapper", str(exit_file), mode, *args]


def read_exit_file(path: Path) -> int | None:
    """The recorded status (exit code, or 128 + signal number), or None if there is none."""
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


class AdoptedProcess:
    """A rank started by an earlier agent on this node, followed until its wrapper is gone."""

    def __init__(self, key: ProcKey, marker: str, exit_file: Path) -> None:
        self.key = key
        self.marker = marker
        self.exit_file = exit_file
        self._status: int | None = None

    @property
    def pid(self) -> int:
        return self.key.pid

    @property
    def returncode(self) -> int | None:
        return self._status

    async def wait(self) -> int:
        while self._status is None:
            if is_alive(self.key):
                await asyncio.sleep(_POLL_S)
                continue
            recorded = await asyncio.to_thread(read_exit_file, self.exit_file)
            self._status = UNRECORDED_STATUS if recorded is None else recorded
        return self._status

    def __repr__(self) -> str:
        return f"AdoptedProcess(pid={self.pid}, marker={self.marker!r}, returncode={self.returncode})"
