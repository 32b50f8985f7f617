"""Making the agent the reaper of orphaned task processes, and collecting their exit status."""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Collection

from corral.agent.launch.process import running_pids, starts_in_flight
from corral.agent.launch.procfs import children_of, read_info, snapshot

_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37


def _prctl(option: int, arg: object) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        result: int = libc.prctl(option, arg, 0, 0, 0)
    except (OSError, AttributeError):
        return False
    return result == 0


def become_subreaper() -> bool:
    """Have orphaned descendants reparent to this process instead of init; ``False`` where unsupported.

    From then on their zombies are this process's to reap: call ``reap_orphans`` periodically.
    """
    return _prctl(_PR_SET_CHILD_SUBREAPER, 1)


_subreaper = False  # once this process is a subreaper it stays one: no need to ask the kernel again


def is_subreaper() -> bool:
    """Whether this process is a child subreaper."""
    global _subreaper
    if not _subreaper:
        flag = ctypes.c_int(0)
        _subreaper = _prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(flag)) and flag.value != 0
    return _subreaper


def reap_orphans(known_pids: Collection[int] = ()) -> list[int]:
    """Reap zombie children that were reparented here (orphaned task descendants); the pids reaped.

    Leaves alone: processes started by ``start`` and not yet awaited, ``known_pids``, and children
    in this process's own session, which other code (``subprocess``, ``asyncio``) started and
    waits for itself. Never calls ``waitpid(-1)``, so no other waiter loses an exit status.

    While a ``start`` is under way (it runs in another thread, the event loop's), a task process
    that exited at once may be a zombie that ``running_pids`` does not name yet; so zombies that lead
    their own session, as every process ``start`` makes does, wait for a call with no start under way.
    """
    me = os.getpid()
    own_session = os.getsid(0)
    children = children_of(me)
    candidates = (
        [info for pid in children if (info := read_info(pid)) is not None]
        if children is not None
        else list(snapshot().values())
    )
    # Read after the candidates: a start whose fork they saw is either still counted or recorded by now.
    starting = starts_in_flight() > 0
    skip = running_pids() | set(known_pids)
    reaped: list[int] = []
    for info in candidates:
        if info.ppid != me or info.state != "Z" or info.pid in skip or info.sid == own_session:
            continue
        if starting and info.sid == info.pid:
            continue
        if _reap(info.pid):
            reaped.append(info.pid)
    return reaped


def _reap(pid: int) -> bool:
    # Check again just before waiting: the pid must still be a zombie child of ours.
    info = read_info(pid)
    if info is None or info.ppid != os.getpid() or info.state != "Z":
        return False
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return False
    return done == pid
