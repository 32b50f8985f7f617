"""Heterogeneous GPUs: wait for a faster GPU type when that finishes the job sooner.

With a speed table (``gpu_speed: {H100: 1.0, A100: 0.55, L4: 0.2}``; unlisted types 1.0), a job
that fits now only on a later type of its preference list is held back when an earlier, faster
type is expected to free up soon enough: ``wait + T / speed(fast) < T / speed(slow)``. ``T`` is
the job's expected run time at speed 1.0: its expected GPU-seconds (from finished jobs like it)
per GPU, else its time limit; a job with neither runs where it fits now. ``wait`` comes from the
backfill timeline (running jobs' time limits); a type with no known release is not waited for.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import datetime

from corral.model import EPSILON, Allocation, Job
from corral.sched.backfill import find_reservation
from corral.sched.policy import Policy
from corral.sched.snapshot import Snapshot

CHECKS_PER_CYCLE = 32  # timeline searches per cycle; beyond them jobs run where they fit now


def reference_seconds(job: Job) -> float | None:
    """The job's expected run time at speed 1.0, or None when nothing tells."""
    gpus = job.request.total_gpus
    if job.expected_gpu_s is not None and gpus > EPSILON:
        return job.expected_gpu_s / gpus
    return job.time_limit_s


def faster_soon(
    job: Job,
    chosen_type: str,
    speeds: Mapping[str, float],
    snapshot: Snapshot,
    policy: Policy,
    now: datetime,
    taken: Iterable[Allocation],
) -> tuple[str, float] | None:
    """(faster type, seconds until it frees up) when waiting for it finishes the job sooner; else None."""
    seconds = reference_seconds(job)
    preferred = job.request.gpu_types
    if seconds is None or chosen_type not in preferred:
        return None
    here = seconds / speeds.get(chosen_type, 1.0)
    allocations = list(taken)
    for gpu_type in preferred[: preferred.index(chosen_type)]:
        speed = speeds.get(gpu_type, 1.0)
        if seconds / speed >= here:
            continue  # not faster: nothing to wait for
        only = replace(job, request=replace(job.request, gpu_types=(gpu_type,)))
        reservation = find_reservation(only, snapshot, policy, now, allocations)
        if reservation is None:
            continue
        wait = max(0.0, (reservation.start - now).total_seconds())
        if wait + seconds / speed < here:
            return gpu_type, wait
    return None
