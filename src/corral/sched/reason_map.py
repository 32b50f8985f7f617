"""The reasons of a cycle's waiting jobs, most of them said once per group of the queue.

A cycle that leaves 100,000 jobs waiting decides the reasons of the few thousand it looked at one by
one, and those of the rest once per group (request and team). Writing a dictionary entry for each
job costs a large share of such a cycle, and most readers only go through the reasons in order (the
head writes each one down). So ``Reasons`` keeps them as they were decided: the jobs' ids in order,
each one's number, and the reason of each number (a job looked at one by one has a number of its own,
below zero; the others share their group's); a lookup by id builds the index on first use.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from corral.sched.plan import Reason


class Reasons(Mapping[str, "Reason"]):
    """Job id → ``Reason``, in queue order."""

    __slots__ = ("_ids", "_index", "_numbers", "_own", "_said")

    def __init__(
        self, ids: Iterable[str], numbers: Sequence[int], said: dict[int, Reason], own: dict[str, int]
    ) -> None:
        """``numbers`` gives each job of ``ids`` (in the same order) the number of its reason in ``said``.
        ``own`` gives the jobs looked at one by one theirs: a number below zero that only the job has
        (``replace`` may change its reason)."""
        self._ids = tuple(ids)  # every job, in order (``ids``)
        self._numbers = numbers
        self._said = said
        self._own = own
        self._index: dict[str, int] | None = None  # job id → its number, built on the first lookup of a group's job

    @classmethod
    def of(cls, reasons: Mapping[str, Reason]) -> Reasons:
        """Each job with a reason of its own, in the mapping's order."""
        numbers = range(-1, -len(reasons) - 1, -1)
        said = dict(zip(numbers, reasons.values(), strict=True))
        return cls(reasons, numbers, said, dict(zip(reasons, numbers, strict=True)))

    def ids(self) -> tuple[str, ...]:
        """Every job's id, in queue order (kept, not copied: a plan's ``waiting`` is this tuple)."""
        return self._ids

    def replace(self, job_id: str, reason: Reason) -> None:
        """Give a job looked at one by one another reason (the cycle's last word on it)."""
        self._said[self._own[job_id]] = reason

    def __getitem__(self, job_id: str) -> Reason:
        number = self._own.get(job_id)
        if number is None:
            number = self._numbers_by_id()[job_id]
        return self._said[number]

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._own or (len(self._ids) > len(self._own) and job_id in self._numbers_by_id())

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids)

    def __len__(self) -> int:
        return len(self._ids)

    def items(self) -> ItemsView[str, Reason]:
        return _Items(self)

    def in_order(self) -> Iterator[tuple[str, Reason]]:
        """(job id, reason) in queue order, without building the index."""
        return zip(self._ids, map(self._said.__getitem__, self._numbers), strict=True)

    def __repr__(self) -> str:
        return f"Reasons({dict(self.in_order())!r})"

    def _numbers_by_id(self) -> dict[str, int]:
        if self._index is None:
            self._index = dict(zip(self._ids, self._numbers, strict=True))
        return self._index


class _Items(ItemsView[str, "Reason"]):
    """``Reasons.items()``: iterated in order without the index."""

    _mapping: Reasons

    def __iter__(self) -> Iterator[tuple[str, Reason]]:
        return self._mapping.in_order()
