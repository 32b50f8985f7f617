"""What the team quotas let each queued job do during one cycle, asked once per team, GPU types and size.

A cycle asks the ``QuotaLedger`` about every job it tries; what the ledger says depends only on the
job's team, the GPU types it accepts and its size (``quota_key``), and on usage. So the answers are
kept per key: whether a job would borrow as usage stands at the start of the cycle (such jobs go
after the others), the types it may use now (kept while usage stays as it is), and why a job passed
over is kept out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from corral.model import Job, Request
from corral.sched.quota import QuotaLedger
from corral.sched.snapshot import CapacityView

_UNKNOWN: tuple[float, float] = (0.0, 0.0)  # not yet asked (a sentinel, by identity)

QuotaKey = tuple[str, tuple[str, ...], float]
"""A job's team, GPU types and GPUs: all that the quota's answers about it depend on, with usage."""


def quota_key(job: Job) -> QuotaKey:
    request = job.request
    return job.team, request.gpu_types, request.total_gpus


class QuotaGate:
    """The quota's answers for the jobs of one cycle (``quota`` changes as the cycle places and preempts)."""

    def __init__(self, quota: QuotaLedger) -> None:
        self.quota = quota
        self._own_at_start: dict[QuotaKey, tuple[str, ...]] = {}  # see ``borrows``
        # The request limited to the types its quota allows, or why none, while usage stays as it was when
        # ``_allowed_at`` was the quota's count of changes.
        self._allowed: dict[QuotaKey, Request | str] = {}
        self._allowed_at = -1
        self._limited: dict[tuple[Request, tuple[str, ...]], Request] = {}  # one object per value

    def borrows(self, gpu_types: tuple[str, ...]) -> Callable[[Job], bool]:
        """Whether a job would borrow (past its team's nominal quota on every type it accepts), as usage
        stands at the start of the cycle. Such jobs go last: GPUs an owner reclaims from borrowers then go
        to the owner, not back to the borrower whose preempted job waits again (as Kueue orders them). A
        job that would borrow on some of the types it accepts only has its other types noted
        (``own_types``): it is placed there, or preempts there, before the jobs that would borrow, and
        tried on all its types only after them."""
        quota, own_at_start = self.quota, self._own_at_start
        known: dict[QuotaKey, bool] = {}
        # (team, GPU type) → its usage and the most it may use within its nominal (``TypeQuotas.room``); None
        # where no team has a quota for the type. Asked once per team and type, not per size.
        rooms: dict[tuple[str, str], tuple[float, float] | None] = {}

        def within_nominal(team: str, gpu_type: str, gpus: float) -> bool:  # ``QuotaLedger.within_nominal``
            room = rooms.get((team, gpu_type), _UNKNOWN)
            if room is _UNKNOWN:
                governed = gpu_type in quota.governed
                room = rooms[(team, gpu_type)] = quota.levels(gpu_type).room(team) if governed else None
            return room is None or room[0] + gpus <= room[1]

        def borrows(job: Job) -> bool:
            request = job.request
            if request.gpus_per_node <= 0:
                return False
            team, gpus = job.team, request.gpus_per_node * request.nodes  # as the ledger counts them
            key = (team, request.gpu_types, request.total_gpus)  # ``quota_key``
            found = known.get(key)
            if found is None:
                types = request.gpu_types or gpu_types
                within = [within_nominal(team, t, gpus) for t in types]
                found = known[key] = bool(types) and not any(within)
                accepted = [t in gpu_types for t in types]
                if not all(w for w, a in zip(within, accepted, strict=True) if a):
                    own_at_start[key] = tuple(t for t, w, a in zip(types, within, accepted, strict=True) if a and w)
            return found

        return borrows

    def own_types(self, job: Job) -> tuple[str, ...] | None:
        """For a job that uses GPUs: the GPU types it accepts (of those the cluster has) where its team stays
        within its nominal quota with it, as usage stands at the start of the cycle, or that no team has a
        quota for; None when that is all the types it accepts (``borrows`` found them for every job)."""
        return self._own_at_start.get(quota_key(job))

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
            if types and not allowed:  # why, in the words of its first type (as ``_over_quota`` says)
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
        the quota (None where it does not)."""
        quota = self.quota
        said: dict[tuple[str, float, str], str | None] = {}  # the quota's answer depends on these alone
        known: dict[QuotaKey, str | None] = {}

        def admits(job: Job, gpu_type: str) -> str | None:
            key = (job.team, job.request.total_gpus, gpu_type)
            if key not in said:
                said[key] = quota.admits(job, gpu_type)
            return said[key]

        def reason(job: Job, request: Request) -> str | None:
            if request.gpus_per_node <= 0:
                return None
            key = (job.team, request.gpu_types, request.total_gpus)
            if key not in known:
                problems = _problems(admits, job, view)
                blocked = bool(problems) and all(problem is not None for problem in problems.values())
                known[key] = _over_quota(problems) if blocked else None
            return known[key]

        return reason


def _problems(admits: Callable[[Job, str], str | None], job: Job, view: CapacityView) -> dict[str, str | None]:
    """Per GPU type the job accepts (of those the cluster has, in its order): None where its team's
    quota admits it now (``QuotaLedger.admits``), else why not."""
    request = job.request
    return {t: admits(job, t) for t in (request.gpu_types or view.gpu_types) if t in view.gpu_types}


def _over_quota(problems: dict[str, str | None]) -> str:
    """The reason of a job no accepted type admits: what its first type says."""
    return f"over quota: {next(iter(problems.values()))}"
