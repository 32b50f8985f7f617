"""When running jobs free their resources (backfill's timeline), kept from one snapshot to the next.

Sorting 20,000 running jobs by when their time limits run out costs a cycle tens of milliseconds,
while a reservation is mostly found at one of the first few release times, and from one snapshot to
the next only the jobs that started, ended or changed move. So the jobs' ends are kept sorted, brought
up to date with the jobs that changed, and the timeline is read from them lazily. Like ``carry``, this
is a memo: the timeline equals one sorted from scratch, whatever snapshots came before.
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import islice
from operator import itemgetter

from corral.model import RunningJob

_end = itemgetter(0)


@dataclass(frozen=True)
class _Ends:
    running: dict[str, RunningJob]  # by id: the values these were computed from
    ends: list[tuple[datetime, str]]  # (end of its time limit, id) of each job that has one and is not stopping
    stopping: frozenset[str]


_lock = threading.Lock()
_kept: list[_Ends] = []  # the last one


def release_times(
    running: Sequence[RunningJob], now: datetime, stopped: Iterable[str] = ()
) -> Iterator[tuple[datetime, str]]:
    """``(when, job id)`` for every running job that frees its resources, earliest first, then by id.

    A job frees them when its time limit runs out (at ``now`` when already overdue); stopping jobs,
    and jobs in ``stopped`` (chosen as victims this cycle), free theirs at ``now``. A job without a time
    limit that is not stopping never does."""
    kept = _ends_of(running)
    gone = kept.running.keys() & set(stopped)
    due = bisect_right(kept.ends, now, key=_end)
    for job_id in sorted({*kept.stopping, *gone, *(job_id for _, job_id in islice(kept.ends, due))}):
        yield now, job_id
    for end, job_id in islice(kept.ends, due, None):
        if job_id not in gone:
            yield end, job_id


def _ends_of(running: Sequence[RunningJob]) -> _Ends:
    by_id = {r.id: r for r in running}
    with _lock:
        last = _kept[0] if _kept else None
        kept = None if last is None else _brought_up(last, running, by_id)
        if kept is None:
            kept = _Ends(by_id, sorted(_entries(running)), frozenset(r.id for r in running if r.stopping))
        _kept[:] = [kept]
        return kept


def _brought_up(last: _Ends, running: Sequence[RunningJob], by_id: dict[str, RunningJob]) -> _Ends | None:
    """The last ends brought up to date with ``running``; None where sorting afresh is as cheap."""
    before = last.running
    changed = [r for r in running if (was := before.get(r.id)) is not r and was != r]
    gone = before.keys() - by_id.keys()
    if not changed and not gone:
        return _Ends(by_id, last.ends, last.stopping)
    if len(changed) + len(gone) > len(by_id) // 2:
        return None
    out = gone | {r.id for r in changed}
    ends = [entry for entry in last.ends if entry[1] not in out]
    ends += sorted(_entries(changed))
    ends.sort()  # two sorted runs: one merge
    stopping = (last.stopping - out) | {r.id for r in changed if r.stopping}
    return _Ends(by_id, ends, stopping)


def _entries(running: Iterable[RunningJob]) -> Iterator[tuple[datetime, str]]:
    for r in running:
        if not r.stopping and (end := r.expected_end) is not None:
            yield end, r.id
