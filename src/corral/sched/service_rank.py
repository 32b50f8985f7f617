"""Corral's default order: explicit priority, then demotion by service, then expected size, then FIFO.

Non-clairvoyant: it reads what a head knows, never a job's future.

1. Priority, highest first (as set on the job).
2. Attained GPU-seconds: a job that has received ``DEMOTE_AFTER_GPU_S`` drops below every
   job that has not (least attained service, two queues). Long jobs therefore yield to new
   work, and a burst of short jobs is not held behind them.
3. Expected size: ``Job.expected_gpu_s`` (the median GPU-seconds of the user's or team's
   finished jobs), in powers of two; ``UNKNOWN_GPU_S`` without history. Teams whose jobs
   are known to be short go first.
4. Submit order.

A job preempts running jobs only of a lower (priority, queue, size class): never one in its
own class, so jobs alike run first come, first served, to completion or demotion.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from functools import lru_cache

from corral.model import Job, RunningJob
from corral.sched.las import QUEUE_SLACK

DEMOTE_AFTER_GPU_S = 7_200.0
"""Two GPU-hours received: a job past this is considered long."""

THRESHOLDS = (DEMOTE_AFTER_GPU_S,)

UNKNOWN_GPU_S = 3_600.0
"""The size assumed for a job with no finished job of its user or team: one GPU-hour."""

_CLASSES = 128  # size classes: powers of two from 1 to 2**127 GPU-seconds
_QUEUES = 2


def size_class(job: Job | RunningJob) -> int:
    """``ceil(log2(expected GPU-seconds))``, clamped to 0..127."""
    return _class_of(job.expected_gpu_s)


@lru_cache(maxsize=4096)
def _class_of(expected_gpu_s: float | None) -> int:
    expected = expected_gpu_s if expected_gpu_s is not None else UNKNOWN_GPU_S
    return min(_CLASSES - 1, max(0, math.ceil(math.log2(max(1.0, expected)))))


# The two below key every pending job and rank every victim: ``queue_of`` and ``size_class`` written inline.


def default_order(job: Job) -> tuple[int, ...]:
    queue = bisect_right(THRESHOLDS, job.attained_gpu_s + QUEUE_SLACK)  # ``queue_of``
    return (-job.priority, queue, _class_of(job.expected_gpu_s), job.seq)


def default_level(job: Job | RunningJob) -> int:
    queue = bisect_right(THRESHOLDS, job.attained_gpu_s + QUEUE_SLACK)  # ``queue_of``
    return (job.priority * _QUEUES - queue) * _CLASSES - _class_of(job.expected_gpu_s)
