"""The reasons of a cycle's waiting jobs, most of them said once per group of the queue.

A cycle that leaves 100,000 jobs waiting decides the reasons of the few thousand it looked at one by
one, and those of the rest of the queue once per group (request and team). Writing a dictionary entry
for each of the rest costs a large share of such a cycle, and most readers only go through the reasons
in order (the head writes each one down). So ``Reasons`` keeps the rest as it was decided: the jobs'
ids, each one's group, and each group's reason; a lookup by id builds the index on first use.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterable, Iterator, Mapping, Sequence
from itertools import chain, islice
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from corral.sched.plan import Reason


class Reasons(Mapping[str, "Reason"]):
    """Job id → ``Reason``, in queue order: the jobs looked at one by one (``first``), then the rest."""

    __slots__ = ("_first", "_ids", "_index", "_rest_at", "_rest_groups", "_said")

    def __init__(
        self,
        first: dict[str, Reason],
        rest_ids: Iterable[str] = (),
        rest_groups: Sequence[int] = (),
        said: Mapping[int, Reason] | None = None,
    ) -> None:
        self._first = first
        self._ids = tuple(chain(first, rest_ids))  # every job, in order (``ids``)
        self._rest_at = len(first)
        self._rest_groups = rest_groups
        self._said: Mapping[int, Reason] = said or {}
        self._index: dict[str, int] | None = None  # rest job id → its group, built on the first lookup

    def ids(self) -> tuple[str, ...]:
        """Every job's id, in queue order (kept, not copied: a plan's ``waiting`` is this tuple)."""
        return self._ids

    def replace(self, job_id: str, reason: Reason) -> None:
        """Give a job looked at one by one another reason (the cycle's last word on it)."""
        if job_id not in self._first:
            raise KeyError(job_id)
        self._first[job_id] = reason

    def __getitem__(self, job_id: str) -> Reason:
        found = self._first.get(job_id)
        if found is not None:
            return found
        return self._said[self._groups()[job_id]]

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._first or (len(self._ids) > self._rest_at and job_id in self._groups())

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids)

    def __len__(self) -> int:
        return len(self._ids)

    def items(self) -> ItemsView[str, Reason]:
        return _Items(self)

    def in_order(self) -> Iterator[tuple[str, Reason]]:
        """(job id, reason) in queue order, without building the index."""
        rest = zip(self._rest_ids(), map(self._said.__getitem__, self._rest_groups), strict=True)
        return chain(self._first.items(), rest)

    def __repr__(self) -> str:
        return f"Reasons({dict(self.in_order())!r})"

    def _rest_ids(self) -> Iterator[str]:
        return islice(self._ids, self._rest_at, None)

    def _groups(self) -> dict[str, int]:
        if self._index is None:
            self._index = dict(zip(self._rest_ids(), self._rest_groups, strict=True))
        return self._index


class _Items(ItemsView[str, "Reason"]):
    """``Reasons.items()``: iterated in order without the index."""

    _mapping: Reasons

    def __iter__(self) -> Iterator[tuple[str, Reason]]:
        return self._mapping.in_order()
