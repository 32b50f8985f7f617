"""Least attained service, discretised: queues by GPU-seconds received, as in Tiresias (2D-LAS).

A job's queue is how many thresholds its attained service has crossed (0 = the highest).
Jobs are served queue by queue, FIFO (submit order) within one; a job whose service
crosses a threshold drops to the next queue, and a job in a higher queue preempts running
jobs in lower ones. Explicit priority ranks above all queues.
"""

from __future__ import annotations

from bisect import bisect_right

from corral.model import Job, RunningJob

TIRESIAS_THRESHOLDS = (3_250.0, 7_200.0)
"""GPU-seconds: the two thresholds of Tiresias' published runs (three queues)."""

QUEUES_PER_PRIORITY = 1_000
"""Room for the queue index inside a preemption level; more than any threshold list here."""

QUEUE_SLACK = 1e-6  # a job exactly at a threshold has crossed it


def queue_of(attained_gpu_s: float, thresholds: tuple[float, ...]) -> int:
    """How many thresholds the attained service has reached: 0 for a job with none."""
    return bisect_right(thresholds, attained_gpu_s + QUEUE_SLACK)


def tiresias_order(job: Job) -> tuple[int, ...]:
    return (-job.priority, queue_of(job.attained_gpu_s, TIRESIAS_THRESHOLDS), job.seq)


def tiresias_level(job: Job | RunningJob) -> int:
    return job.priority * QUEUES_PER_PRIORITY - queue_of(job.attained_gpu_s, TIRESIAS_THRESHOLDS)
