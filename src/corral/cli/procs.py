"""The processes `corral up` starts and `corral down` stops: spawning, liveness, stopping, the home's head."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from corral import pidlock
from corral.client.config import dir_problem
from corral.client.errors import InvalidRequest

HEAD_LOCK = "head.lock"  # what every head of a CORRAL_HOME holds while it lives (see corral.head.main)
AGENT_LOCK = "agent.lock"  # what an agent holds in its work directory while it lives (see corral.agent.main)


def alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is not alive
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def holds(pid: int | None, lock: Path) -> bool:
    """Whether process ``pid`` runs and holds ``lock``: the daemon `up` started, as a head holds its home's
    head.lock and an agent its work directory's agent.lock, and not a process that was given the same pid
    after that daemon ended (once the machine restarted, say), which `down` must not stop."""
    return alive(pid) and pidlock.holder(lock) == str(pid)


def agent_work_dir(home: Path, name: str) -> Path:
    """The work directory `up` gives its agent ``name``."""
    return home / "agents" / name


def agent_runs(home: Path, agent: dict[str, Any]) -> bool:
    """Whether the agent of a local-cluster.json entry (``name``, ``pid``) still runs."""
    return holds(agent.get("pid"), agent_work_dir(home, str(agent.get("name"))) / AGENT_LOCK)


def port_free(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def spawn(args: list[str], log_path: Path, home: Path, secrets: Mapping[str, str] | None = None) -> int:
    """Start ``corral ARGS`` in its own session, its output appended to ``log_path``. ``secrets`` go in
    its environment (which only its user can read), never in its arguments (which anyone can, in ``ps``)."""
    try:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log = log_path.open("ab")
    except OSError as exc:  # such as a file named logs in CORRAL_HOME: exit 2 naming it, not a traceback
        why = dir_problem(log_path.parent) or exc.strerror or str(exc)
        raise InvalidRequest(f"CORRAL_HOME: cannot write the log {log_path}: {why}") from None
    env = {**os.environ, "CORRAL_HOME": str(home), **(secrets or {})}
    env.pop("CORRAL_HEAD", None)
    env.pop("CORRAL_TOKEN", None)
    with log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "corral", *args],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
            cwd=home,
        )
    return proc.pid


def log_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def log_since(path: Path, offset: int, limit: int = 2000) -> str:
    """What was written to the log from ``offset`` on (its last ``limit`` characters): this start's lines,
    not those of an earlier one."""
    try:
        with path.open("rb") as log:
            log.seek(offset)
            text = log.read().decode(errors="replace")
    except OSError:
        return ""
    return text[-limit:]


def head_holding_home(home: Path) -> str | None:
    """The pid (as written) of a head that runs with this CORRAL_HOME, whoever started it; None if none does
    (every head holds CORRAL_HOME/head.lock while it lives)."""
    return pidlock.holder(home / HEAD_LOCK)


def stop(pids: list[int], timeout_s: float, sig: signal.Signals = signal.SIGTERM) -> list[int]:
    """Signal each daemon's process group (``sig``), wait, then SIGKILL what is left; returns survivors."""
    for pid in pids:
        _signal_group(pid, sig)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.05)
    for pid in pids:
        if alive(pid):
            _signal_group(pid, signal.SIGKILL)
    time.sleep(0.1)
    return [p for p in pids if alive(p)]


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


@contextlib.contextmanager
def one_at_a_time(home: Path, name: str) -> Iterator[None]:
    """Hold ``home/name`` locked: a second `corral up` with the same home waits for the first, then finds
    what it started."""
    import fcntl

    fd = os.open(home / name, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
