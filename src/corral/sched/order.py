"""The order a cycle tries pending jobs in, carried from one cycle to the next.

Sorting 100,000 pending jobs by a key built per job costs far more than the few jobs that come
and go between two cycles. A job's key is its policy order and id (fixed for a ``Job`` value) and
its team's and user's fair share (the same tables from cycle to cycle unless usage or capacity
changed). So the last order is kept with every job's key: a job that is the same object as then
keeps its key and its place; new ones get their key and are put in their places. Jobs that would
borrow quota go after all others; whether a job borrows is the same for all jobs of one team and
request (a group, which also decides why such a job waits), so each item carries its group's
number, the question is asked once per group each cycle, and the kept order is split in two, each
part in key order, with no sort; ``ordered_in_two`` also says where the second part starts.
Like ``carry``, this is a memo: the order equals a fresh sort, whatever came before.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from corral.model import Job, Request
from corral.sched.groups import Groups
from corral.sched.queue import Item, Queue, group_of, id_of, job_of, request_of

__all__ = [
    "Borrowing",
    "Groups",
    "Item",
    "Queue",
    "group_of",
    "id_of",
    "job_of",
    "ordered",
    "ordered_in_two",
    "request_of",
]

Key = tuple[object, ...]
Borrowing = Callable[[Groups], NDArray[np.bool_]]
"""By group number, whether the group's jobs borrow (False for a group with no jobs)."""

_SLACK = 1024  # requests and groups of jobs gone are forgotten once they outnumber twice the jobs by this


@dataclass
class _Kept:
    inputs: Hashable  # all the keys depend on besides each job
    ids: NDArray[np.int64]  # the ``id()`` of each job of ``queue``, sorted
    jobs: NDArray[np.object_]  # those jobs, in the same order (held here, so that an id stays theirs)
    queue: Queue  # sorted by key
    same: dict[Request, Request]  # each request value's one object
    groups: Groups


_lock = threading.Lock()
_kept: dict[Hashable, _Kept] = {}


def ordered(
    pending: Sequence[Job], key: Callable[[Job], Key], inputs: Hashable, borrows: Borrowing | None
) -> list[Item]:
    """The pending jobs as ``sorted(pending, key=key)`` orders them, each with its key and request
    (equal requests as one object); with ``borrows`` (of the jobs' group only: team and request), those
    for which it is true come after all the others, each part in that order. The list may be the one
    kept for the next call.

    ``inputs`` must be equal whenever ``key`` gives every job the same key, and differ otherwise."""
    items: list[Item] = ordered_in_two(pending, key, inputs, borrows)[0].items.tolist()
    return items


def ordered_in_two(
    pending: Sequence[Job], key: Callable[[Job], Key], inputs: Hashable, borrows: Borrowing | None
) -> tuple[Queue, int, Groups]:
    """``ordered`` as a ``Queue``, how many items come before those for which ``borrows`` is true, and the items'
    groups (by the numbers the items carry; kept for the next call, which changes it: read it before then)."""
    ids = np.fromiter(map(id, pending), dtype=np.int64, count=len(pending))
    with _lock:
        kept = _kept.pop(inputs, None)
        if kept is None or not _update(kept, pending, ids, key):
            same: dict[Request, Request] = {}
            groups = Groups()
            items = [_item(job, key, same, groups) for job in pending]
            items.sort()
            kept = _Kept(inputs, *_by_id(pending, ids), Queue.of(items), same, groups)
        _kept[inputs] = kept
        if len(_kept) > 4:  # callers with other policies or share tables: keep the latest few
            del _kept[next(iter(_kept))]
        queue, split = (kept.queue, len(kept.queue)) if borrows is None else _borrowers_last(kept, borrows)
        return queue, split, kept.groups


def queue_key(
    order: Callable[[Job], tuple[int, ...]], tables: tuple[dict[str, float], dict[str, float]] | None
) -> Callable[[Job], Key]:
    """The queue's sort key: the policy's ``order``, or, with fair share's tables (team's and user's share,
    ``share_tables``: lower shares go first), priority, then the shares, then the order; then the job's id.
    One flat tuple, which compares faster than nested ones (a policy's order has the same length for every job)."""
    if tables is None:
        return lambda job: (*order(job), job.id)
    teams, users = tables  # built inline, as it keys every pending job
    return lambda job: (-job.priority, teams.get(job.team, 0.0), users.get(job.user, 0.0), *order(job), job.id)


def forget() -> None:
    """Drop what is kept, so that the next call sorts afresh (for tests)."""
    with _lock:
        _kept.clear()


def _update(kept: _Kept, pending: Sequence[Job], ids: NDArray[np.int64], key: Callable[[Job], Key]) -> bool:
    """Bring ``kept`` to the jobs ``pending`` (``ids``: their ``id()``s); False (and ``kept`` unusable) where
    sorting afresh is as cheap. The jobs that came and went are found by their ids in numpy."""
    known = kept.ids
    at = np.searchsorted(known, ids)
    found = known[np.minimum(at, len(known) - 1)] == ids if len(known) else np.zeros(len(ids), dtype=bool)
    new_at = np.flatnonzero(~found)
    if len(new_at) > len(pending) // 2:
        return False
    stays = np.zeros(len(known), dtype=bool)
    stays[at[found]] = True
    gone: list[Job] = kept.jobs[~stays].tolist()
    if len(gone) + len(new_at) > len(pending) // 2:
        return False
    queue, same = kept.queue, kept.same
    new = [pending[i] for i in new_at.tolist()]
    if len(gone) * 32 < len(queue):  # a few: find each by its key (unique: it ends with the id), just before its item
        queue = queue.without(sorted(bisect_left(queue.items, key(job)) for job in gone))
    elif gone:  # by their ids (a snapshot's are unique)
        names = {job.id for job in gone}
        leaving = np.fromiter(map(names.__contains__, queue.ids.tolist()), dtype=bool, count=len(queue))
        queue = queue.picked(np.flatnonzero(~leaving))
    groups = kept.groups
    groups.leave(gone)
    fresh = [_item(job, key, same, groups) for job in new]
    fresh.sort()
    queue = queue.merged(Queue.of(fresh))
    if len(same) > 2 * len(queue) + _SLACK:  # forget the requests of jobs gone
        kept.same = {item[-3]: item[-3] for item in queue.items}
    if len(groups.members) > 2 * len(queue) + _SLACK:  # forget the groups of jobs gone
        kept.groups = groups = Groups()
        queue = Queue.of([(*item[:-2], groups.join(item[-4], item[-3]), item[-1]) for item in queue.items])
    came_ids, came = _by_id(new, ids[new_at])
    known, jobs = known[stays], kept.jobs[stays]
    at = np.searchsorted(known, came_ids)
    kept.ids, kept.jobs = np.insert(known, at, came_ids), np.insert(jobs, at, came)
    kept.queue = queue
    return True


def _by_id(jobs: Sequence[Job], ids: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.object_]]:
    """``ids`` (the jobs' ``id()``s) sorted, and the jobs in that order."""
    order = np.argsort(ids)
    return ids[order], np.fromiter(jobs, dtype=object, count=len(jobs))[order]


def _borrowers_last(kept: _Kept, borrows: Borrowing) -> tuple[Queue, int]:
    """The kept order with the jobs of groups that borrow now moved after all others (a stable split),
    and how many do not borrow."""
    groups = kept.groups
    late = borrows(groups)
    if not late.any():
        return kept.queue, len(kept.queue)
    return kept.queue.split(late)


def _item(job: Job, key: Callable[[Job], Key], same: dict[Request, Request], groups: Groups) -> Item:
    request = same.setdefault(job.request, job.request)
    return key(job) + (job, request, groups.join(job, request), job.id)  # noqa: RUF005 (joining is cheaper than unpacking)
