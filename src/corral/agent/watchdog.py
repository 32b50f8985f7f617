"""The fence of an agent that died or hangs: its tasks must not outlive its lease.

An agent kills its tasks itself when it loses the head for too long (``Agent._fence_if_cut_off``),
and task processes outlive their agent on purpose, so that a restarted agent re-adopts them. But an
agent that dies and stays away fences nothing, while the head, once the lease has run out, starts the
jobs' next attempts elsewhere. This small process, started by the agent in a session of its own,
fences for it: once the lease the agent last wrote down (``BEAT_FILE`` in its work directory) is about
to run out and the agent is gone, it kills every task process of that agent (by marker and task
directory) and exits. An agent that lives but has not fenced by then is stopped or hung (SIGSTOP, a
process stuck in the kernel): the watchdog kills its tasks too, and goes on watching. It exits at once
when the beat file names another agent (a restarted one, which fences by itself) or is removed (the
agent shut down cleanly).

Run as a script with the standard library only (``python -I -S watchdog.py …``): it starts in a few
milliseconds and holds little memory beside each agent.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

BEAT_FILE = "agent.beat"
"""``PID DEADLINE``: the agent's pid and, on the monotonic clock, when its lease ends: its tasks must be dead by
then. A live agent fences itself a second before; the watchdog acts ``FENCE_BEFORE_S`` before, only for an
agent that has not."""
MARKER_ENV = "CORRAL_TASK_MARKER"  # every task process's: NODE:TASK_ID (the agent's own modules use these too)
TASK_DIR_ENV = "CORRAL_TASK_DIR"
CHECK_S = 1.0
FENCE_BEFORE_S = 0.5  # tasks die this long before the lease ends (the head starts next attempts at its end)


def write_beat(work_dir: Path, pid: int, deadline: float) -> None:
    """Write down the lease (atomically: the watchdog never reads half a file)."""
    path = work_dir / BEAT_FILE
    part = path.with_name(f"{BEAT_FILE}.{pid}.part")
    part.write_text(f"{pid} {deadline:.3f}\n")
    os.replace(part, path)


def read_beat(work_dir: Path) -> tuple[int, float] | None:
    try:
        pid, deadline = (work_dir / BEAT_FILE).read_text().split()
        return int(pid), float(deadline)
    except (OSError, ValueError):
        return None


def task_processes(node: str, work_dir: Path) -> list[int]:
    """Live processes of this agent's tasks: their marker names the node, their task directory is under
    ``work_dir`` (another cluster's agent on this host may have the same node name)."""
    marker, task_dir = f"{MARKER_ENV}={node}:".encode(), f"{TASK_DIR_ENV}=".encode()
    home = str(work_dir.resolve()).encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = f.read().split(b"\0")
        except OSError:
            continue
        dirs = [e[len(task_dir) :] for e in environ if e.startswith(task_dir)]
        if any(e.startswith(marker) for e in environ) and any(d == home or d.startswith(home + b"/") for d in dirs):
            found.append(int(entry))
    return found


def kill_tasks(node: str, work_dir: Path) -> int:
    """SIGKILL every task process of the agent, with its process group; how many there were."""
    pids = task_processes(node, work_dir)
    for pid in pids:
        with contextlib.suppress(OSError):
            os.killpg(os.getpgid(pid), signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return len(pids)


def _alive(pid: int, start: str) -> bool:
    return _start_time(pid) == start


def _start_time(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def watch(agent_pid: int, node: str, work_dir: Path) -> str:
    """Wait as described above; answers why it stopped."""
    start = _start_time(agent_pid)
    pause = CHECK_S
    while True:
        time.sleep(pause)
        beat = read_beat(work_dir)
        if beat is None:
            return "the agent shut down"
        if beat[0] != agent_pid:
            return f"agent {beat[0]} took over"
        now, fence_at = time.monotonic(), beat[1] - FENCE_BEFORE_S
        pause = min(CHECK_S, max(0.05, fence_at - now))  # wake in time for the lease
        if now < fence_at:
            continue
        if start and _alive(agent_pid, start):
            # The agent lives but has not fenced by its lease (it fences itself a second before): it is
            # stopped or hung, and the head may start its jobs' next attempts elsewhere. Keep watching: it
            # may come back, register again and start new tasks under a new lease.
            if killed := kill_tasks(node, work_dir):
                print(
                    f"corral agent watchdog ({node}): the agent is alive but did not fence by the end of its"
                    f" lease (stopped or hung): killed {killed} task process(es)",
                    file=sys.stderr,
                )
            pause = CHECK_S
            continue
        killed = kill_tasks(node, work_dir)
        (work_dir / BEAT_FILE).unlink(missing_ok=True)
        return f"the agent died and its lease ran out: killed {killed} task process(es)"


def start(agent_pid: int, node: str, work_dir: Path, deadline: float) -> subprocess.Popen[bytes]:
    """Write the first beat and start the watchdog of this agent (its messages go to the agent's stderr)."""
    work_dir.mkdir(parents=True, exist_ok=True)
    write_beat(work_dir, agent_pid, deadline)
    argv = [sys.executable, "-I", "-S", str(Path(__file__).resolve()), str(agent_pid), node, str(work_dir)]
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True)


def stop(process: subprocess.Popen[bytes], work_dir: Path) -> None:
    """The agent shuts down cleanly, its tasks stopped: no fence is needed any more."""
    (work_dir / BEAT_FILE).unlink(missing_ok=True)
    process.terminate()
    try:
        process.wait(2.0)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(2.0)


def main(argv: list[str]) -> int:
    agent_pid, node, work_dir = int(argv[0]), argv[1], Path(argv[2])
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    why = watch(agent_pid, node, work_dir)
    print(f"corral agent watchdog ({node}): {why}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
