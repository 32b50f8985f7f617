"""A queue of pending jobs as three arrays side by side: each job's ``order`` item, its group's number and its id.

A cycle passes over the whole queue (100,000 jobs) a few times without looking at most jobs one by one:
it splits the queue in two by the groups that borrow quota, and lists the ids and group numbers of the jobs
that wait as their group does. Read from the items, each such pass costs a Python call per job and a visit
to each item's tuple in memory; with the numbers and ids kept in arrays alongside, numpy does it in one go.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from operator import itemgetter
from typing import Any

import numpy as np
from numpy.typing import NDArray

Item = tuple[Any, ...]
"""A job's key, then the job, its request (one object per request value), its group's number and the job's
id: one flat tuple, so that items sort by their keys as they are (a key ends with the job's id, so two
items never compare past it). Read the fields with ``job_of``, ``request_of``, ``group_of`` and ``id_of``."""

job_of = itemgetter(-4)
request_of = itemgetter(-3)
group_of = itemgetter(-2)
id_of = itemgetter(-1)

Objects = NDArray[np.object_]
Numbers = NDArray[np.int64]


class Queue:
    """Items in queue order (``items``), with each one's group number (``numbers``) and job id (``ids``) at the
    same place. The arrays are never changed in place: a part, a pick or a merge makes new ones (a part
    may share memory with the whole)."""

    __slots__ = ("ids", "items", "numbers")

    def __init__(self, items: Objects, numbers: Numbers, ids: Objects) -> None:
        self.items = items
        self.numbers = numbers
        self.ids = ids

    @classmethod
    def of(cls, items: Sequence[Item]) -> Queue:
        count = len(items)
        return cls(
            np.fromiter(items, dtype=object, count=count),
            np.fromiter(map(group_of, items), dtype=np.int64, count=count),
            np.fromiter(map(id_of, items), dtype=object, count=count),
        )

    def __len__(self) -> int:
        return len(self.items)

    def part(self, start: int, stop: int | None = None) -> Queue:
        """``[start:stop]``."""
        return Queue(self.items[start:stop], self.numbers[start:stop], self.ids[start:stop])

    def picked(self, at: NDArray[np.intp] | Sequence[int]) -> Queue:
        """The items at these places, in this order."""
        return Queue(self.items[at], self.numbers[at], self.ids[at])

    def without(self, at: Sequence[int]) -> Queue:
        """Less the items at these places."""
        return Queue(np.delete(self.items, at), np.delete(self.numbers, at), np.delete(self.ids, at))

    def merged(self, fresh: Queue) -> Queue:
        """This queue and ``fresh`` (both sorted by key, no key in both) as one sorted queue. Each fresh item is
        put in its place, found by bisection, so the long queue is not compared item by item again."""
        if not len(fresh):
            return self
        items, at, start = self.items, [], 0
        for item in fresh.items:
            start = bisect_left(items, item, lo=start)
            at.append(start)
        numbers, ids = np.insert(self.numbers, at, fresh.numbers), np.insert(self.ids, at, fresh.ids)
        return Queue(np.insert(items, at, fresh.items), numbers, ids)

    @staticmethod
    def joined(first: Queue, second: Queue) -> Queue:
        """``first``, then ``second``."""
        return Queue(
            np.concatenate((first.items, second.items)),
            np.concatenate((first.numbers, second.numbers)),
            np.concatenate((first.ids, second.ids)),
        )

    def split(self, late: NDArray[np.bool_]) -> tuple[Queue, int]:
        """The items whose group is late (``late``, by group number) moved after all others, each part in this
        order; and how many are not late."""
        moved = late[self.numbers]
        first = np.flatnonzero(~moved)
        if len(first) == len(self):
            return self, len(self)
        return self.picked(np.concatenate((first, np.flatnonzero(moved)))), len(first)
