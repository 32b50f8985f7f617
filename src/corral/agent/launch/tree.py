"""Finding every process of a task and ending them all, including ones that escaped the process tree."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from corral.agent.launch.process import TaskProcess, running_pids
from corral.agent.launch.procfs import (
    ProcInfo,
    ProcKey,
    children_map,
    children_of,
    has_marker,
    is_alive,
    matches,
    pid_still_ours,
    protected_pids,
    read_info,
    send,
    send_group,
    snapshot,
    subtree,
    with_descendants,
)
from corral.agent.launch.reaper import is_subreaper

_KILL_ROUND_S = 0.25


def candidates(roots: Iterable[ProcKey] = (), tracked: Iterable[ProcKey] = ()) -> dict[int, ProcInfo]:
    """The processes that may belong to tasks with these roots and tracked processes.

    This process is a child subreaper, so every process its tasks start, orphans included, stays
    below it: reading its subtree is enough, and far cheaper than reading all of ``/proc``. Tasks
    adopted from an earlier agent live elsewhere, as does everything when this process is not a
    subreaper or the kernel does not list children: then every process is a candidate."""
    if is_subreaper():
        below = subtree(os.getpid())
        if below is not None and all(k.pid in below or not is_alive(k) for k in (*roots, *tracked)):
            return below
    return snapshot()


@dataclass(frozen=True)
class TerminationResult:
    """What ending a task's processes took."""

    signalled: int
    """Processes sent SIGTERM."""
    killed: int
    """Processes sent SIGKILL."""
    survivors: tuple[int, ...]
    """Pids still alive when giving up (e.g. stuck in uninterruptible sleep in a driver)."""

    @property
    def clean(self) -> bool:
        return not self.survivors


def _group_index(procs: dict[int, ProcInfo]) -> dict[int, set[int]]:
    """Live pids by process group id and by session id."""
    index: dict[int, set[int]] = {}
    for info in procs.values():
        if info.alive:
            index.setdefault(info.pgid, set()).add(info.pid)
            index.setdefault(info.sid, set()).add(info.pid)
    return index


def _members(roots: Iterable[ProcKey], procs: dict[int, ProcInfo], index: dict[int, set[int]]) -> set[int]:
    """Live members of the roots' sessions and process groups (the roots lead both)."""
    members: set[int] = set()
    for root in roots:
        if pid_still_ours(root, procs):
            members |= index.get(root.pid, set())
    return members


class DescendantTracker:
    """Remembers the processes under each task, so ones that later clear their environment and
    leave the tree (``setsid`` plus a double fork) are still found when the task is ended.

    The caller drives ``poll`` every 0.5-1 s; one poll reads ``/proc`` once for all tasks.
    """

    def __init__(self) -> None:
        self._roots: dict[str, tuple[ProcKey, ...]] = {}
        self._seen: dict[str, frozenset[ProcKey]] = {}

    def watch(self, marker: str, processes: Iterable[TaskProcess]) -> None:
        """Start tracking the processes of a task (may be called again to add ranks)."""
        self._roots[marker] = (*self._roots.get(marker, ()), *(p.key for p in processes))

    def forget(self, marker: str) -> None:
        self._roots.pop(marker, None)
        self._seen.pop(marker, None)

    def tracked(self, marker: str) -> frozenset[ProcKey]:
        """The task's processes seen alive at the last poll."""
        return self._seen.get(marker, frozenset())

    def _all_seen(self) -> list[ProcKey]:
        return [k for seen in self._seen.values() for k in seen]

    def poll(self) -> None:
        """Record the current descendants of every watched task (blocking; a few ms)."""
        if not self._roots:
            return
        procs = candidates([k for roots in self._roots.values() for k in roots], self._all_seen())
        children = children_map(procs)
        index = _group_index(procs)
        for marker, roots in list(self._roots.items()):
            known = (*roots, *self._seen.get(marker, ()))
            seeds = {key.pid for key in known if matches(key, procs)} | _members(roots, procs, index)
            found = frozenset(procs[pid].key for pid in with_descendants(seeds, children) if pid in procs)
            if marker in self._roots:
                self._seen[marker] = found


def find_task_processes(marker: str, roots: Iterable[ProcKey] = (), tracked: Iterable[ProcKey] = ()) -> list[ProcInfo]:
    """Every live process of a task: members of the roots' sessions and groups, tracked processes,
    processes whose environment carries the marker, and all their descendants.

    Never includes this process or its ancestors. Reads all of ``/proc`` (blocking; meant for
    termination time, not for every poll).
    """
    procs = candidates(roots, tracked)
    protected = protected_pids(procs)
    seeds = {key.pid for key in tracked if matches(key, procs)}
    seeds |= _members(roots, procs, _group_index(procs))
    seeds |= {pid for pid, info in procs.items() if info.alive and pid not in seeds and has_marker(pid, marker)}
    found = with_descendants(seeds - protected, children_map(procs)) - protected
    return [procs[pid] for pid in sorted(found) if pid in procs and procs[pid].alive]


def _nothing_left(roots: Sequence[ProcKey], tracked: Sequence[ProcKey]) -> bool:
    """Whether the task plainly has no process left, seen from this process's children alone.

    Once every root and tracked process is gone, each live process of the task has been reparented
    to this process (a child subreaper): the ones whose parents ended, and the ones that left with
    ``setsid`` and a double fork. So when its only live children are roots of other tasks (started
    here and not yet waited for), nothing of this task is left: the common end of a task, decided
    without reading every descendant's details and environment."""
    if not is_subreaper() or any(is_alive(key) for key in (*roots, *tracked)):
        return False
    children = children_of(os.getpid())
    if children is None:
        return False
    started = running_pids()
    for pid in children:
        if pid in started:
            continue
        info = read_info(pid)
        if info is not None and info.alive:
            return False  # maybe a leftover of this task: look closely
    return True


def _our_groups(roots: Iterable[ProcKey]) -> set[int]:
    """The roots' process group ids that still belong to them (see ``pid_still_ours``)."""
    groups = set()
    for root in roots:
        info = read_info(root.pid)
        if info is None or info.start == root.start:
            groups.add(root.pid)
    return groups


def _terminate(fresh: Sequence[ProcInfo], groups: set[int]) -> set[ProcKey]:
    """SIGTERM, once each: the groups at one stroke, then every process outside them."""
    for pgid in groups:
        send_group(pgid, signal.SIGTERM)
        send_group(pgid, signal.SIGCONT)
    reached = set()
    for info in fresh:
        if info.pgid in groups:
            reached.add(info.key)
        elif send(info.key, signal.SIGTERM):
            send(info.key, signal.SIGCONT)  # a stopped process only acts on SIGTERM once continued
            reached.add(info.key)
    return reached


def _kill(targets: Sequence[ProcInfo], groups: set[int]) -> set[ProcKey]:
    """SIGKILL every target, then the groups, to catch anything forked since the scan."""
    reached = {info.key for info in targets if send(info.key, signal.SIGKILL)}
    for pgid in groups:
        send_group(pgid, signal.SIGKILL)
    return reached


async def _wait_gone(targets: Sequence[ProcInfo], deadline: float, poll_s: float) -> None:
    loop = asyncio.get_running_loop()
    while loop.time() < deadline:
        if not any(is_alive(info.key) for info in targets):
            return
        await asyncio.sleep(min(poll_s, deadline - loop.time()))


async def terminate_tree(
    processes: Sequence[TaskProcess],
    marker: str,
    grace_s: float,
    *,
    tracker: DescendantTracker | None = None,
    kill_timeout_s: float = 5.0,
    poll_s: float = 0.02,
) -> TerminationResult:
    """End every process of a task: SIGTERM, up to ``grace_s`` to exit, then SIGKILL until none is left.

    Processes are found by ``find_task_processes`` again each round, so ones forked meanwhile are
    caught too (during the grace period they get SIGTERM; no process gets it twice). Gives up
    ``kill_timeout_s`` after the grace period and reports the survivors. Exit statuses of
    ``processes`` are still collected through their own ``wait``.
    """
    loop = asyncio.get_running_loop()
    roots = [p.key for p in processes]
    term_deadline = loop.time() + grace_s
    give_up = term_deadline + kill_timeout_s
    termed: set[ProcKey] = set()
    killed: set[ProcKey] = set()
    while True:
        tracked = tracker.tracked(marker) if tracker is not None else frozenset()
        # The common end (nothing left) is told from a few reads, without handing the search to a thread.
        gone = _nothing_left(roots, list(tracked))
        targets = [] if gone else await asyncio.to_thread(find_task_processes, marker, roots, tracked)
        now = loop.time()
        if not targets or now >= give_up:
            return TerminationResult(len(termed), len(killed), tuple(info.pid for info in targets))
        if now < term_deadline:
            groups = set() if termed else _our_groups(roots)
            termed |= _terminate([info for info in targets if info.key not in termed], groups)
            await _wait_gone(targets, term_deadline, poll_s)
        else:
            killed |= _kill(targets, _our_groups(roots))
            await _wait_gone(targets, min(give_up, now + _KILL_ROUND_S), poll_s)


async def kill_leftovers(
    processes: Sequence[TaskProcess],
    marker: str,
    *,
    grace_s: float = 0.0,
    tracker: DescendantTracker | None = None,
    kill_timeout_s: float = 5.0,
) -> TerminationResult:
    """After a task's main processes exited, end whatever they left running (SIGKILL by default)."""
    return await terminate_tree(processes, marker, grace_s, tracker=tracker, kill_timeout_s=kill_timeout_s)
