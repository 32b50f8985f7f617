"""The order a cycle tries pending jobs in, carried from one cycle to the next.

Sorting 100,000 pending jobs by a key built per job costs far more than the few jobs that come
and go between two cycles. A job's key is its policy order and id (fixed for a ``Job`` value) and
its team's and user's fair share (the same tables from cycle to cycle unless usage or capacity
changed). So the last order is kept with every job's key: a job that is the same object as then
keeps its key and its place; new ones get their key and are put in their places. Jobs that would
borrow quota go after all others; whether a job borrows is the same for all jobs of one team and
request (a ``Group``, which also decides why such a job waits), so each item carries its group's
number, the question is asked once per group each cycle, and the kept order is split in two, each
part in key order, with no sort; ``ordered_in_two`` also says where the second part starts.
Like ``carry``, this is a memo: the order equals a fresh sort, whatever came before.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from itertools import compress, filterfalse
from operator import itemgetter, not_
from typing import Any

from corral.model import Job, Request

Key = tuple[object, ...]
Item = tuple[Any, ...]
"""A job's key, then the job, its request (one object per request value), its group's number and the job's
id: one flat tuple, so that items sort by their keys as they are (a key ends with the job's id, so two
items never compare past it), and a queue of 100,000 jobs is 100,000 objects the collector looks at, not
twice that. Read the fields with ``job_of``, ``request_of``, ``group_of`` and ``id_of``."""
Group = tuple[Request, str]  # a job's request and team: all that ``borrows`` and a waiting job's reason read

job_of = itemgetter(-4)
request_of = itemgetter(-3)
group_of = itemgetter(-2)
id_of = itemgetter(-1)
_SLACK = 1024  # requests and groups of jobs gone are forgotten once they outnumber twice the jobs by this


@dataclass
class _Kept:
    inputs: Hashable  # all the keys depend on besides each job
    jobs: dict[int, Job]  # the jobs of ``items`` by ``id()`` (held here, so that an id stays theirs)
    items: list[Item]  # sorted by key
    same: dict[Request, Request]  # each request value's one object
    groups: Groups


_lock = threading.Lock()
_kept: dict[Hashable, _Kept] = {}


def ordered(
    pending: Sequence[Job], key: Callable[[Job], Key], inputs: Hashable, borrows: Callable[[Job], bool] | None
) -> list[Item]:
    """The pending jobs as ``sorted(pending, key=key)`` orders them, each with its key and request
    (equal requests as one object); with ``borrows`` (a function of the job's ``Group`` only), those
    for which it is true come after all the others, each part in that order. The list may be the one
    kept for the next call, which brings it up to date in place: leave it as it is, and copy what must
    outlive that call.

    ``inputs`` must be equal whenever ``key`` gives every job the same key, and differ otherwise."""
    return ordered_in_two(pending, key, inputs, borrows)[0]


def ordered_in_two(
    pending: Sequence[Job], key: Callable[[Job], Key], inputs: Hashable, borrows: Callable[[Job], bool] | None
) -> tuple[list[Item], int, Groups]:
    """``ordered``, how many items come before those for which ``borrows`` is true, and the items' groups
    (by the numbers the items carry; like the list, kept for the next call: read it before then)."""
    now = dict(zip(map(id, pending), pending, strict=True))
    with _lock:
        kept = _kept.pop(inputs, None)
        if kept is None or not _update(kept, now, key):
            same: dict[Request, Request] = {}
            groups = Groups()
            items = [_item(job, key, same, groups) for job in pending]
            items.sort()
            kept = _Kept(inputs, now, items, same, groups)
        _kept[inputs] = kept
        if len(_kept) > 4:  # callers with other policies or share tables: keep the latest few
            del _kept[next(iter(_kept))]
        items, split = (kept.items, len(kept.items)) if borrows is None else _borrowers_last(kept, borrows)
        return items, split, kept.groups


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


def _update(kept: _Kept, now: dict[int, Job], key: Callable[[Job], Key]) -> bool:
    """Bring ``kept`` to the jobs ``now``; False (and ``kept`` unusable) where sorting afresh is as cheap."""
    new = list(filterfalse(kept.jobs.__contains__, now))
    if len(new) > len(now) // 2:
        return False
    gone = list(filterfalse(now.__contains__, kept.jobs)) if len(kept.jobs) != len(now) - len(new) else []
    if len(gone) + len(new) > len(now) // 2:
        return False
    items, jobs, same = kept.items, kept.jobs, kept.same
    if len(gone) * 32 < len(items):  # a few: find each one by its key (keys are unique: they end with the id)
        at = sorted(bisect_left(items, key(jobs[i])) for i in gone)  # a key sorts just before its item
        kept_items: list[Item] = []
        start = 0
        for i in at:
            kept_items.extend(items[start:i])
            start = i + 1
        kept_items.extend(items[start:])
    else:
        gone_ids = set(gone)
        kept_items = [item for item in items if id(item[-4]) not in gone_ids]
    groups = kept.groups
    groups.leave(jobs[i] for i in gone)
    fresh = [_item(job, key, same, groups) for job in (now[i] for i in new)]
    fresh.sort()
    kept_items = merged(kept_items, fresh)
    if len(same) > 2 * len(kept_items) + _SLACK:  # forget the requests of jobs gone
        kept.same = {item[-3]: item[-3] for item in kept_items}
    if len(groups.members) > 2 * len(kept_items) + _SLACK:  # forget the groups of jobs gone
        kept.groups = groups = Groups()
        kept_items = [(*item[:-2], groups.join(item[-4], item[-3]), item[-1]) for item in kept_items]
    # The kept dictionary and list are brought up to date in place rather than replaced: they then stay in
    # the collector's old generation, and the young collection after a cycle does not walk their entries.
    for i in gone:
        del jobs[i]
    jobs.update((i, now[i]) for i in new)
    if kept_items is not items:
        items[:] = kept_items
    return True


def merged(items: list[Item], fresh: list[Item]) -> list[Item]:
    """Two lists sorted by key (no key in both) as one; ``items`` may be the list returned, so pass one
    that is not shared. A few fresh items are put in their places, found by bisection, so the long list
    is not compared item by item again (as a sort would, to find it sorted)."""
    if len(fresh) * 32 >= len(items):
        items.extend(fresh)
        items.sort()  # two sorted runs: one merge
        return items
    out: list[Item] = []
    start = 0
    for item in fresh:
        at = bisect_left(items, item, lo=start)
        out += items[start:at]
        out.append(item)
        start = at
    out += items[start:]
    return out


def _borrowers_last(kept: _Kept, borrows: Callable[[Job], bool]) -> tuple[list[Item], int]:
    """The kept order with the jobs of groups that borrow now moved after all others (a stable split),
    and how many do not borrow."""
    groups = kept.groups
    late = [count > 0 and borrows(job) for job, count in zip(groups.first, groups.members, strict=True)]
    items = kept.items
    if not any(late):
        return items, len(items)
    borrowing = list(map(late.__getitem__, map(group_of, items)))
    first = list(compress(items, map(not_, borrowing)))
    return [*first, *compress(items, borrowing)], len(first)


def _item(job: Job, key: Callable[[Job], Key], same: dict[Request, Request], groups: Groups) -> Item:
    request = same.setdefault(job.request, job.request)
    return key(job) + (job, request, groups.join(job, request), job.id)  # noqa: RUF005 (joining is cheaper than unpacking)


class Groups:
    """Numbers for the groups of the kept jobs, each with its first job and how many jobs it has now."""

    def __init__(self) -> None:
        self.number: dict[Group, int] = {}
        self.first: list[Job] = []  # by number: a job of the group (``borrows`` reads only its group)
        self.request: list[Request] = []  # by number: the group's request, the one object of its value
        self.members: list[int] = []  # by number: jobs kept now

    def join(self, job: Job, request: Request) -> int:
        group = (request, job.team)
        number = self.number.get(group)
        if number is None:
            number = self.number[group] = len(self.first)
            self.first.append(job)
            self.request.append(request)
            self.members.append(0)
        self.members[number] += 1
        return number

    def member(self, number: int) -> tuple[Job, Request]:
        """A job of the group (all that a waiting job's reason reads is its group), and the group's request."""
        return self.first[number], self.request[number]

    def requests(self) -> set[Request]:
        """The requests of the groups with jobs now."""
        return {group[0] for group, count in zip(self.number, self.members, strict=True) if count > 0}

    def leave(self, jobs: Iterable[Job]) -> None:
        for job in jobs:
            self.members[self.number[(job.request, job.team)]] -= 1
