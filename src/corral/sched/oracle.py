"""Clairvoyant shortest remaining GPU-time first: a bound to compare policies against, never a policy to run.

It reads ``oracle_gpu_s`` (the GPU-seconds a job still needs), which only the simulator
fills in from traced durations; the head refuses it. A job with less remaining GPU-time
preempts running jobs with more. Explicit priority ranks first.
"""

from __future__ import annotations

import math

from corral.model import Job, RunningJob

LEVELS_PER_PRIORITY = 2**48
"""Room for any remaining GPU-seconds (over 8,900 GPU-years) inside a preemption level."""


def remaining(job: Job | RunningJob) -> int:
    return math.ceil(job.oracle_gpu_s or 0.0)


def srpt_order(job: Job) -> tuple[int, ...]:
    return (-job.priority, remaining(job), job.seq)


def srpt_level(job: Job | RunningJob) -> int:
    return job.priority * LEVELS_PER_PRIORITY - remaining(job)
