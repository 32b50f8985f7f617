"""What the team quotas let each queued job do during one cycle, asked once per team, GPU types and size.

A cycle asks the ``QuotaLedger`` about every job it tries; what the ledger says depends only on the
job's team, the GPU types it accepts and its size (``quota_key``), and on usage. So the answers are
kept per key: whether a job would borrow as usage stands at the start of the cycle (such jobs go
after the others), the types it may use now (kept while usage stays as it is), and why a job passed
over is kept out.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import numpy as np
from numpy.typing import NDArray

from corral.model import Job, Request
from corral.sched.groups import Groups
from corral.sched.quota import QuotaLedger
from corral.sched.snapshot import CapacityView

_NO_LIMIT = (0.0, math.inf)  # the room of a team on a GPU type no team has a quota for

QuotaKey = tuple[str, tuple[str, ...], float]
"""A job's team, GPU types and GPUs: all that the quota's answers about it depend on, with usage."""


def quota_key(job: Job) -> QuotaKey:
    request = job.request
    return job.team, request.gpu_types, request.total_gpus


class QuotaGate:
    """The quota's answers for the jobs of one cycle (``quota`` changes as the cycle places and preempts)."""

    def __init__(self, quota: QuotaLedger) -> None:
        self.quota = quota
        self._own: dict[int, tuple[str, ...]] = {}  # by group number: see ``borrowing``
        # The request limited to the types its quota allows, or why none, while usage stays as it was when
        # ``_allowed_at`` was the quota's count of changes.
        self._allowed: dict[QuotaKey, Request | str] = {}
        self._allowed_at = -1
        self._limited: dict[tuple[Request, tuple[str, ...]], Request] = {}  # one object per value

    def borrowing(self, gpu_types: tuple[str, ...]) -> Callable[[Groups], NDArray[np.bool_]]:
        """For the groups of the queue: whether their jobs would borrow (past their team's nominal quota on every
        type they accept), as usage stands at the start of the cycle; False for a group with no jobs. Such jobs go
        last: GPUs an owner reclaims from borrowers then go to the owner, not back to the borrower whose preempted
        job waits again (as Kueue orders them). A job that would borrow on some of the types it accepts only has
        its other types noted (``own_types``): it is placed there, or preempts there, before the jobs that would
        borrow, and tried on all its types only after them. Each team's room on each type is asked once, and the
        sizes of all groups compared with it at once."""
        quota = self.quota

        def borrowing(groups: Groups) -> NDArray[np.bool_]:
            self._own = own = {}
            gpus = np.array(groups.gpus, dtype=float)
            asked = (np.array(groups.members) > 0) & (gpus > 0)
            late = np.zeros(len(gpus), dtype=bool)
            if not asked.any():
                return late
            pair_of = np.array(groups.pair)
            # Per team and listed types (``pairs``, those of groups asked), per type it accepts: the team's usage
            # and the most it may use within its nominal (``TypeQuotas.room``), rows padded with a type that no
            # size fits within and that no job accepts. A type no team has a quota for has room for any size.
            pairs = list(groups.pairs)
            types_of = [listed or gpu_types for _, listed in pairs]
            width = max(map(len, types_of))
            used = np.zeros((len(pairs), width))
            most = np.full((len(pairs), width), -math.inf)
            accepted = np.zeros((len(pairs), width), dtype=bool)
            some_type = np.zeros(len(pairs), dtype=bool)  # (none where the cluster has no GPU type)
            for row in np.unique(pair_of[asked]).tolist():
                team, types = pairs[row][0], types_of[row]
                some_type[row] = bool(types)
                for column, gpu_type in enumerate(types):
                    room = quota.levels(gpu_type).room(team) if gpu_type in quota.governed else _NO_LIMIT
                    used[row, column], most[row, column] = room
                    accepted[row, column] = gpu_type in gpu_types
            within = used[pair_of] + gpus[:, None] <= most[pair_of]
            late[asked & ~within.any(axis=1) & some_type[pair_of]] = True
            # A group some accepted type of which borrows (not all): the accepted types that do not.
            mixed = np.flatnonzero(asked & (accepted[pair_of] & ~within).any(axis=1))
            pattern = within[mixed] @ (1 << np.arange(width))  # which of its types are within, as bits
            said: dict[tuple[int, int], tuple[str, ...]] = {}
            for number, row, bits in zip(mixed.tolist(), pair_of[mixed].tolist(), pattern.tolist(), strict=True):
                found = said.get((row, bits))
                if found is None:
                    found = said[(row, bits)] = tuple(
                        t for column, t in enumerate(types_of[row]) if accepted[row, column] and bits >> column & 1
                    )
                own[number] = found
            return late

        return borrowing

    def own_types(self, group: int) -> tuple[str, ...] | None:
        """For a job of a group ``borrowing`` found: the GPU types it accepts (of those the cluster has) where its
        team stays within its nominal quota with it, as usage stands at the start of the cycle, or that no team has
        a quota for; None when that is all the types it accepts (or its group was not asked)."""
        return self._own.get(group)

    def admit(self, job: Job, view: CapacityView) -> Job | str:
        """The job (of GPUs) limited to the GPU types its team's quota allows now, or why none does."""
        quota, request = self.quota, job.request
        if self._allowed_at != quota.changes:
            self._allowed.clear()
            self._allowed_at = quota.changes
        key = quota_key(job)
        found = self._allowed.get(key)
        if found is None:
            types = [t for t in dict.fromkeys(request.gpu_types or view.gpu_types) if t in view.gpu_types]
            allowed = tuple(t for t in types if quota.allows(job, t))
            if types and not allowed:  # why, in the words of its first type (as ``reasons`` says)
                found = self._allowed[key] = f"over quota: {quota.admits(job, types[0])}"
            elif len(allowed) == len(types):
                found = self._allowed[key] = request
            else:
                found = self._allowed[key] = replace(request, gpu_types=allowed)
        if isinstance(found, str):
            return found
        return job if found is request else replace(job, request=found)

    def limited(self, job: Job, own: tuple[str, ...], view: CapacityView) -> Job | None:
        """The job limited to the types of ``own`` it accepts; None where it accepts none of them."""
        request = job.request
        accepted = request.gpu_types or view.gpu_types
        kept = tuple(t for t in own if t in accepted)
        if not kept:
            return None
        if kept == request.gpu_types:
            return job
        found = self._limited.get((request, kept))
        if found is None:
            found = self._limited[(request, kept)] = replace(request, gpu_types=kept)
        return replace(job, request=found)

    def reasons(self, view: CapacityView) -> Callable[[Job, Request], str | None]:
        """Why its team's quota keeps out a job passed over because nothing free fits it, as the cycle leaves
        the quota (None where it does not): where no type it accepts (of those the cluster has) admits it, what
        the first one says (``QuotaLedger.admits``). Asked of thousands of groups of the queue per cycle."""
        quota, cluster_types = self.quota, view.gpu_types
        said: dict[tuple[str, float, str], str | None] = {}  # the quota's answer depends on these alone
        known: dict[QuotaKey, str | None] = {}

        def reason(job: Job, request: Request) -> str | None:
            if request.gpus_per_node <= 0:
                return None
            team, gpus = job.team, request.total_gpus
            key = (team, request.gpu_types, gpus)
            if key in known:
                return known[key]
            first = None
            for gpu_type in request.gpu_types or cluster_types:
                if gpu_type not in cluster_types:
                    continue
                asked = (team, gpus, gpu_type)
                problem = said[asked] if asked in said else said.setdefault(asked, quota.admits(job, gpu_type))
                if problem is None:  # a type admits it: not kept out
                    first = None
                    break
                first = first or problem
            found = known[key] = None if first is None else f"over quota: {first}"
            return found

        return reason
