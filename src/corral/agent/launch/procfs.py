"""Reading and signalling processes through ``/proc``, with pid-reuse-safe identities."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from corral.agent.watchdog import MARKER_ENV as MARKER_ENV  # defined beside the watchdog, which runs alone

_GONE_STATES = frozenset({"Z", "X", "x"})
_KTHREADD = 2


class ProcKey(NamedTuple):
    """A process identity that survives pid reuse: the pid plus its start time in clock ticks.

    ``start`` is ``None`` when the start time could not be read (the process was already gone).
    """

    pid: int
    start: int | None


@dataclass(frozen=True, slots=True)
class ProcInfo:
    """The fields of ``/proc/<pid>/stat`` that process-tree work needs."""

    pid: int
    state: str
    ppid: int
    pgid: int
    sid: int
    start: int

    @property
    def key(self) -> ProcKey:
        return ProcKey(self.pid, self.start)

    @property
    def alive(self) -> bool:
        """Running, sleeping or stopped; a zombie counts as gone."""
        return self.state not in _GONE_STATES


def read_info(pid: int) -> ProcInfo | None:
    """The process's stat fields, or ``None`` when it does not exist (any more)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    # The command name is in parentheses and may itself contain spaces and ')'.
    fields = data.rpartition(b")")[2].split()
    try:
        return ProcInfo(
            pid=pid,
            state=fields[0].decode(),
            ppid=int(fields[1]),
            pgid=int(fields[2]),
            sid=int(fields[3]),
            start=int(fields[19]),
        )
    except (IndexError, ValueError):
        return None


def snapshot() -> dict[int, ProcInfo]:
    """Every process on the machine (kernel threads excluded), by pid."""
    procs: dict[int, ProcInfo] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        info = read_info(int(name))
        if info is not None and info.pid != _KTHREADD and info.ppid != _KTHREADD:
            procs[info.pid] = info
    return procs


def children_of(pid: int) -> list[int] | None:
    """The process's children, from ``/proc/PID/task/*/children`` (every thread's); None when the
    kernel does not list children (built without CONFIG_PROC_CHILDREN) or the process is gone."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    found: list[int] = []
    listed = False
    for tid in threads:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                found.extend(int(child) for child in f.read().split())
            listed = True
        except (OSError, ValueError):
            continue
    return found if listed else None


def subtree(root: int) -> dict[int, ProcInfo] | None:
    """``root`` and all its descendants, by pid; None when the kernel does not list children.

    Reads only those processes: with a few hundred processes on a machine, far cheaper than ``snapshot``."""
    if children_of(root) is None:
        return None
    procs: dict[int, ProcInfo] = {}
    stack = [root]
    while stack:
        pid = stack.pop()
        if pid in procs:
            continue
        info = read_info(pid)
        if info is None:
            continue
        procs[pid] = info
        stack.extend(children_of(pid) or ())
    return procs


def key_of(pid: int) -> ProcKey:
    """The identity of a live process, read now."""
    info = read_info(pid)
    return ProcKey(pid, info.start if info is not None else None)


def is_alive(key: ProcKey) -> bool:
    """Whether the process ``key`` names still exists and is not a zombie."""
    info = read_info(key.pid)
    return info is not None and info.start == key.start and info.alive


def matches(key: ProcKey, procs: Mapping[int, ProcInfo]) -> bool:
    """Whether ``key`` names a live process in ``procs`` (same pid and start time)."""
    info = procs.get(key.pid)
    return info is not None and info.start == key.start and info.alive


def pid_still_ours(key: ProcKey, procs: Mapping[int, ProcInfo]) -> bool:
    """Whether ``key.pid`` can still be trusted as a process group or session id of that process.

    Linux keeps a pid allocated while any process uses it as its group or session id, so the id
    stays ours unless a different process now holds the pid.
    """
    info = procs.get(key.pid)
    return info is None or info.start == key.start


def has_marker(pid: int, marker: str) -> bool:
    """Whether the process's initial environment holds ``CORRAL_TASK_MARKER=<marker>``."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            data = f.read()
    except OSError:
        return False
    return f"{MARKER_ENV}={marker}".encode() in data.split(b"\0")


def markers_with_prefix(prefix: str) -> set[str]:
    """Markers of live processes whose marker starts with ``prefix`` (e.g. one node's tasks)."""
    return set(marked_processes(prefix))


def marked_processes(prefix: str) -> dict[str, list[int]]:
    """Live processes whose marker starts with ``prefix``, by marker, pids in ascending order."""
    needle = f"{MARKER_ENV}={prefix}".encode()
    found: dict[str, list[int]] = {}
    for pid, info in sorted(snapshot().items()):
        if not info.alive:
            continue
        for entry in _environ_entries(pid):
            if entry.startswith(needle):
                found.setdefault(entry.split(b"=", 1)[1].decode(errors="replace"), []).append(pid)
    return found


def environ_value(pid: int, name: str) -> str | None:
    """The value of ``name`` in the process's initial environment, or None."""
    prefix = f"{name}=".encode()
    for entry in _environ_entries(pid):
        if entry.startswith(prefix):
            return entry[len(prefix) :].decode(errors="replace")
    return None


def _environ_entries(pid: int) -> list[bytes]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


def protected_pids(procs: Mapping[int, ProcInfo]) -> set[int]:
    """This process and its ancestors, which must never be signalled."""
    protected: set[int] = set()
    pid = os.getpid()
    while pid > 0 and pid not in protected:
        protected.add(pid)
        info = procs.get(pid) or read_info(pid)
        pid = info.ppid if info is not None else 0
    return protected


def children_map(procs: Mapping[int, ProcInfo]) -> dict[int, list[int]]:
    """Live processes grouped by parent pid."""
    children: dict[int, list[int]] = {}
    for info in procs.values():
        if info.alive:
            children.setdefault(info.ppid, []).append(info.pid)
    return children


def with_descendants(seeds: Iterable[int], children: Mapping[int, list[int]]) -> set[int]:
    """The seed pids and all their descendants."""
    found: set[int] = set()
    stack = list(seeds)
    while stack:
        pid = stack.pop()
        if pid not in found:
            found.add(pid)
            stack.extend(children.get(pid, ()))
    return found


def send(key: ProcKey, sig: int) -> bool:
    """Send ``sig`` to the process if it is still the one ``key`` names; whether it was sent."""
    info = read_info(key.pid)
    if info is None or info.start != key.start or not info.alive:
        return False
    try:
        os.kill(key.pid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def send_group(pgid: int, sig: int) -> None:
    """Send ``sig`` to a process group, ignoring an empty or foreign group."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
