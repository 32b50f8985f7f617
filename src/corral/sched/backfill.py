"""EASY backfill: a reservation for the highest-priority blocked job, and a guard for the rest.

The timeline of future free resources comes from running jobs' time limits: a running job
frees its allocations at ``started_at + time_limit_s`` (at ``now`` when already overdue or
stopping), and a job placed earlier in the same cycle at ``now + time_limit_s``. A job without a
time limit, and a live allocation of no known running job, never frees its resources in the
timeline. The blocked job's reservation starts at the first release time at which it can be placed.

Later (lower) jobs may start now only if they do not delay it: either their time limit
ends by the reservation's start, or they fit the *guard* view: what is free now minus the
reservation's allocations. The guard is conservative: a job fitting it leaves the
reservation's resources untouched at every time.

Bound: one reservation per cycle; finding it costs one ``find_placement`` per distinct
release time of the running jobs (that frees anything on the nodes the job could use), and
building the two views costs one pass over the nodes.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from itertools import groupby
from operator import itemgetter

from corral.model import Allocation, Job
from corral.sched import describe, timeline
from corral.sched.placement import find_placement
from corral.sched.plan import BACKFILL_BLOCKED, RESERVED, Placement, Reason, Reservation
from corral.sched.policy import Policy
from corral.sched.snapshot import CapacityView, Snapshot


def release_times(snapshot: Snapshot, now: datetime, stopped: Iterable[str] = ()) -> Iterator[tuple[datetime, str]]:
    """``(when, job id)`` for every running job that frees its resources, earliest first (``timeline``).

    Jobs in ``stopped`` (chosen as victims this cycle) and stopping jobs free theirs now.
    """
    return timeline.release_times(snapshot.running, now, stopped)


def find_reservation(
    job: Job,
    snapshot: Snapshot,
    policy: Policy,
    now: datetime,
    taken: Iterable[Allocation],
    stopped: Iterable[str] = (),
    free: CapacityView | None = None,
    placed: Iterable[tuple[datetime, Placement]] = (),
) -> Reservation | None:
    """The job's earliest start on the timeline, or None when no known release lets it fit.

    ``taken`` are the allocations this cycle already gave out (placements and holds); ``free``, when
    the caller has it, is the snapshot's view with them taken (it is left as it is). ``placed``: this
    cycle's placements of jobs with a time limit, each with when that limit ends; they free their
    allocations then, as running jobs do.
    """
    held: Mapping[str, Sequence[Allocation]] = snapshot.allocations_of()
    placed_now: dict[str, Sequence[Allocation]] = {}  # this cycle's placements: not in the snapshot
    future = _less(snapshot, policy, taken, free)
    events: Iterable[tuple[datetime, str]] = release_times(snapshot, now, stopped)
    placed = list(placed)
    if placed:
        placed_now = {p.job_id: p.allocations for _, p in placed}
        events = heapq.merge(events, sorted((max(end, now), p.job_id) for end, p in placed))
    request = job.request
    # A job limited to some GPU types can only be placed on nodes with GPUs of one of them: what is
    # released elsewhere cannot change where (or whether) it fits, so it is not released at all.
    types = frozenset(request.gpu_types) if request.gpus_per_node > 0 and request.gpu_types else None
    nodes = future.nodes
    tried = False
    for when, released in groupby(events, key=itemgetter(0)):
        freed = list[Allocation]()
        for _, job_id in released:
            if types is None:
                freed.extend(placed_now.get(job_id) or held.get(job_id, ()))
            else:
                freed.extend(
                    a
                    for a in placed_now.get(job_id) or held.get(job_id, ())
                    if (node := nodes.get(a.node)) is not None and not types.isdisjoint(node.gpu_types)
                )
        if tried and not freed:
            continue  # nothing it could use was released: it still does not fit
        future.release(freed)
        tried = True
        placement = find_placement(future, job)
        if placement is not None:
            return Reservation(job.id, when, placement.gpu_type, placement.allocations)
    return None


def guard_view(
    snapshot: Snapshot,
    policy: Policy,
    taken: Iterable[Allocation],
    reservation: Reservation,
    free: CapacityView | None = None,
) -> CapacityView:
    """What lower jobs that run past the reservation's start may use: free now, less the reservation
    (``free`` as for ``find_reservation``)."""
    guard = _less(snapshot, policy, taken, free)
    guard.take(reservation.allocations)
    return guard


def _less(snapshot: Snapshot, policy: Policy, taken: Iterable[Allocation], free: CapacityView | None) -> CapacityView:
    """A new view of what is free now: the snapshot's, less ``taken``; a copy of ``free`` when given."""
    if free is not None:
        return free.copy()
    view = snapshot.view(policy.gpu_ranker, policy.cpu_ranker)
    view.take(taken)
    return view


def ends_by(job: Job, now: datetime, start: datetime) -> bool:
    """Whether the job's time limit ends by ``start`` if it starts now."""
    return job.time_limit_s is not None and now + timedelta(seconds=job.time_limit_s) <= start


def when(moment: datetime, now: datetime) -> str:
    """``2025-01-01 02:00:00 UTC (in 2h)``: an absolute time and how far away it is."""
    seconds = max(0, round((moment - now).total_seconds()))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{hours}h" if hours else "", f"{minutes}m" if minutes else "", f"{secs}s" if secs else ""]
    away = "".join(parts) or "0s"
    return f"{moment.strftime('%Y-%m-%d %H:%M:%S %Z').strip()} (in {away})"


def reserved_reason(base: Reason, reservation: Reservation, now: datetime) -> Reason:
    """The reserved job's reason: what it waits for and when it is expected to start."""
    nodes = describe.and_list(sorted({a.node for a in reservation.allocations}))
    message = f"{base.message}; expected to start at {when(reservation.start, now)} on {nodes}, reserved for it"
    return Reason(RESERVED, message, base.queued, reservation.start)


def blocked_reason(base: Reason, reservation: Reservation, now: datetime) -> Reason:
    """A job that fits now but would delay the reservation."""
    message = (
        f"fits now but starting it would delay job {reservation.job_id}, reserved to start at "
        f"{when(reservation.start, now)}; a time limit ending by then would let it start now"
    )
    return Reason(BACKFILL_BLOCKED, message, base.queued)
