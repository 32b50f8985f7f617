"""Processes for end-to-end tests: waiting on conditions, finding a cluster's processes through /proc."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def wait_for(predicate: Callable[[], T], timeout_s: float, what: str, interval_s: float = 0.1) -> T:
    """Poll ``predicate`` until it returns something truthy; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s:g}s waiting for {what} (last value: {value!r})")
        time.sleep(interval_s)


def _proc_state(pid: int) -> tuple[str, int] | None:
    """(state letter, start time in clock ticks) of a process, or None if it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[0], int(fields[19])


def process_key(pid: int) -> tuple[int, int] | None:
    """(pid, start time): tells a process apart from a later one that reuses its pid."""
    state = _proc_state(pid)
    return None if state is None or state[0] in "ZX" else (pid, state[1])


def alive(key: tuple[int, int]) -> bool:
    """Whether the process is still running (a zombie or a new process with the same pid is not it)."""
    state = _proc_state(key[0])
    return state is not None and state[0] not in "ZX" and state[1] == key[1]


def processes_mentioning(*needles: str) -> dict[int, str]:
    """Live processes (not zombies) whose command line or environment contains any needle: pid → cmdline."""
    wanted = [n.encode() for n in needles]
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        pid = int(entry)
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if process_key(pid) is None:
            continue
        if any(n in cmdline or n in environ for n in wanted):
            found[pid] = cmdline.replace(b"\0", b" ").decode(errors="replace").strip()
    return found


def descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry))
    found: set[int] = set()
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def stop_group(proc: subprocess.Popen[bytes], sig: signal.Signals = signal.SIGTERM, wait_s: float = 20.0) -> None:
    """Signal the process group a daemon leads (started with ``start_new_session``), wait, then SIGKILL it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)
    try:
        proc.wait(wait_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
