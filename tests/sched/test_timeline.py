"""Backfill's timeline, kept from one snapshot to the next, equals one sorted from scratch."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from corral.model import RunningJob
from corral.sched.timeline import release_times
from corral.testing import running_job

START = datetime(2026, 1, 1, tzinfo=UTC)


def from_scratch(running: list[RunningJob], now: datetime, stopped: set[str]) -> list[tuple[datetime, str]]:
    times = []
    for job in running:
        end = now if job.stopping or job.id in stopped else job.expected_end
        if end is not None:
            times.append((max(end, now), job.id))
    return sorted(times)


def test_the_timeline_kept_through_many_snapshots_equals_one_sorted_from_scratch():
    """Through jobs that start and end, jobs told to stop, time limits that run out, and jobs listed again
    as equal values rather than the same objects (as the head reads them from its database)."""
    rng = random.Random(7)
    running: dict[str, RunningJob] = {}
    now = START
    for step in range(300):
        for job_id in rng.sample(sorted(running), min(len(running), rng.randint(0, 6))):
            del running[job_id]
        for k in range(rng.randint(0, 8)):
            limit = rng.choice((None, 60.0, 600.0, 3600.0))
            started = now - timedelta(seconds=rng.choice((0, 30, 300)))
            running[f"j{step}-{k}"] = running_job(f"j{step}-{k}", started, time_limit_s=limit)
        for job_id in rng.sample(sorted(running), min(len(running), rng.randint(0, 2))):
            running[job_id] = replace(running[job_id], stopping=True)
        listed = list(running.values())
        if rng.random() < 0.2:
            listed = [replace(r) for r in listed]
        rng.shuffle(listed)
        stopped = set(rng.sample(sorted(running), min(len(running), rng.randint(0, 3)))) | {"not-running"}
        assert list(release_times(listed, now, stopped)) == from_scratch(listed, now, stopped), f"step {step}"
        now += timedelta(seconds=rng.choice((0, 20, 60, 400)))


def test_the_timeline_of_a_snapshot_seen_before_is_its_own():
    """Going back to an earlier snapshot (as a caller comparing two may) gives that snapshot's timeline."""
    early = [running_job("a", START, time_limit_s=60.0), running_job("b", START, time_limit_s=30.0)]
    late = [running_job("b", START, time_limit_s=30.0), running_job("c", START, stopping=True)]
    for running in (early, late, early):
        assert list(release_times(running, START)) == from_scratch(running, START, set())
