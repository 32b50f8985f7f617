"""The order a cycle tries pending jobs in, carried from one cycle to the next.

Sorting 100,000 pending jobs by a key built per job costs far more than the few jobs that come
and go between two cycles. A job's key is its policy order and id (fixed for a ``Job`` value),
its team's and user's fair share (the same tables from cycle to cycle unless usage or capacity
changed) and whether it would borrow (the same for all jobs of one team, GPU types and size, and
mostly the same as last cycle). So the last order is kept with every job's key: a job that is the
same object as then, in a group whose borrowing did not change, keeps its key and its place; the
others get their key again and are merged in. Like ``carry``, this is a memo: the order equals a
fresh sort by the cycle's key, whatever came before.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from operator import itemgetter

from corral.model import Job, Request

Key = tuple[object, ...]
Item = tuple[Key, Job, Request]  # a job's key, the job, and its request (one object per request value)
Group = tuple[str, tuple[str, ...], float]  # what ``borrows`` reads of a GPU job: team, GPU types, GPUs

_key_of = itemgetter(0)


@dataclass
class _Kept:
    inputs: Hashable  # all the keys depend on besides each job and its group's borrowing
    jobs: dict[int, Job]  # the jobs of ``items`` by ``id()`` (held here, so that an id stays theirs)
    items: list[Item]  # sorted by key
    item_of: dict[int, Item]  # by the job's ``id()``
    same: dict[Request, Request]  # each request value's one object
    keyed_with: Callable[[Job], bool] | None  # ``borrows`` of the cycle that sorted them all
    members: dict[Group, set[int]] | None = None  # each group's jobs, once needed
    borrowing: dict[Group, tuple[Job, bool]] | None = None  # a job of each group and its ``borrows`` in the keys


_lock = threading.Lock()
_kept: dict[Hashable, _Kept] = {}


def ordered(
    pending: Sequence[Job], key: Callable[[Job], Key], inputs: Hashable, borrows: Callable[[Job], bool] | None
) -> list[Item]:
    """The pending jobs as ``sorted(pending, key=key)`` orders them, each with its key and request
    (equal requests as one object); the list is shared with the next call, so leave it as it is.

    ``inputs`` must be equal whenever ``key`` gives every job the same key save for ``borrows``
    (a function of the job's ``Group`` only), and differ otherwise. With ``borrows``, a job's key
    starts with ``borrows(job)``."""
    now = dict(zip(map(id, pending), pending, strict=True))
    with _lock:
        kept = _kept.pop(inputs, None)
        if kept is None or not _update(kept, now, key, borrows):
            same: dict[Request, Request] = {}
            items = [(key(job), job, same.setdefault(job.request, job.request)) for job in pending]
            items.sort(key=_key_of)
            kept = _Kept(inputs, now, items, {id(item[1]): item for item in items}, same, borrows)
        _kept[inputs] = kept
        if len(_kept) > 4:  # callers with other policies or share tables: keep the latest few
            del _kept[next(iter(_kept))]
        return kept.items


def forget() -> None:
    """Drop what is kept, so that the next call sorts afresh (for tests)."""
    with _lock:
        _kept.clear()


def _update(kept: _Kept, now: dict[int, Job], key: Callable[[Job], Key], borrows: Callable[[Job], bool] | None) -> bool:
    """Bring ``kept`` to the jobs ``now``; False (and ``kept`` unusable) where sorting afresh is as cheap."""
    gone, new = kept.jobs.keys() - now.keys(), now.keys() - kept.jobs.keys()
    rekey = _regroup(kept, gone, new, now, borrows) if borrows is not None else {}
    if len(gone) + len(new) + len(rekey) > len(now) // 2:
        return False
    items, item_of, same = kept.items, kept.item_of, kept.same
    out = gone.union(rekey)
    if len(out) * 32 < len(items):  # a few: find each one by its key
        at = sorted(bisect_left(items, item_of[i][0], key=_key_of) for i in out)
        kept_items: list[Item] = []
        start = 0
        for i in at:
            kept_items.extend(items[start:i])
            start = i + 1
        kept_items.extend(items[start:])
    else:
        kept_items = [item for item in items if id(item[1]) not in out]
    fresh = [(key(job), job, same.setdefault(job.request, job.request)) for job in (now[i] for i in new)]
    for i, borrowing in rekey.items():  # the rest of the key stays
        key_, job, request = item_of[i]
        fresh.append(((borrowing, *key_[1:]), job, request))
    for i in gone:
        del item_of[i]
    fresh.sort(key=_key_of)
    item_of.update((id(item[1]), item) for item in fresh)
    kept_items.extend(fresh)
    kept_items.sort(key=_key_of)  # two sorted runs: one merge
    if len(same) > 2 * len(kept_items) + 1024:  # forget the requests of jobs gone
        kept.same = {item[2]: item[2] for item in kept_items}
    kept.jobs, kept.items = now, kept_items
    return True


def _regroup(
    kept: _Kept, gone: set[int], new: set[int], now: dict[int, Job], borrows: Callable[[Job], bool]
) -> dict[int, bool]:
    """Update the groups for the jobs gone and new; the jobs kept whose group's borrowing changed, with
    its value now."""
    if kept.members is None or kept.borrowing is None:
        kept.members, kept.borrowing = {}, {}
        _join(kept, kept.jobs.items(), kept.keyed_with or borrows)
        kept.keyed_with = None
    members, borrowing = kept.members, kept.borrowing
    for i in gone:
        group = _group_of(kept.jobs[i])
        if group is not None:
            members[group].discard(i)
            if not members[group]:
                del members[group], borrowing[group]
    changed: dict[int, bool] = {}
    for group, (member, was) in borrowing.items():
        if (now_borrowing := borrows(member)) != was:
            borrowing[group] = (member, now_borrowing)
            changed.update(dict.fromkeys(members[group], now_borrowing))
    _join(kept, ((i, now[i]) for i in new), borrows)
    return changed


def _join(kept: _Kept, jobs: Iterable[tuple[int, Job]], borrows: Callable[[Job], bool]) -> None:
    assert kept.members is not None and kept.borrowing is not None
    for i, job in jobs:
        group = _group_of(job)
        if group is not None:
            kept.members.setdefault(group, set()).add(i)
            if group not in kept.borrowing:
                kept.borrowing[group] = (job, borrows(job))


def _group_of(job: Job) -> Group | None:
    request = job.request
    return (job.team, request.gpu_types, request.total_gpus) if request.gpus_per_node > 0 else None
