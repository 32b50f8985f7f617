"""Corral's default order: priority, then demotion past 2 GPU-hours, then expected size from history, then FIFO."""

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from corral.model import Job, RunningJob
from corral.sched import Plan, Snapshot, get_policy, schedule
from corral.sched.history import FinishedJobs
from corral.sched.service_rank import DEMOTE_AFTER_GPU_S, UNKNOWN_GPU_S, size_class
from corral.testing import live_alloc, make_job, make_node, running_job, snapshot

NOW = datetime(2025, 1, 1, tzinfo=UTC)
DEFAULT = get_policy("default")


def pending(job_id: str, seq: int = 0, expected: float | None = None, attained: float = 0.0, priority: int = 0) -> Job:
    job = make_job(job_id).gpus(1).seq(seq).priority(priority).build()
    return replace(job, expected_gpu_s=expected, attained_gpu_s=attained)


def running(job_id: str, expected: float | None = None, attained: float = 600.0, priority: int = 0) -> RunningJob:
    job = running_job(job_id, NOW, ran_s=600, preemptible=True, priority=priority)
    return replace(job, expected_gpu_s=expected, attained_gpu_s=attained)


def one_gpu(*jobs: Job) -> Snapshot:
    return snapshot(nodes=[make_node("n1").gpus(1)], pending=jobs)


def busy(victim: RunningJob, *jobs: Job) -> Snapshot:
    return snapshot(
        nodes=[make_node("n1").gpus(1)], live=[live_alloc(victim.id, "n1", [0])], running=[victim], pending=jobs
    )


def placed(plan: Plan) -> list[str]:
    return [p.job_id for p in plan.placements]


def preempted(plan: Plan) -> list[tuple[str, str]]:
    return [(p.victim_job_id, p.for_job_id) for p in plan.preemptions]


def test_without_history_or_service_it_is_priority_then_submit_order() -> None:
    assert placed(schedule(one_gpu(pending("a", seq=1), pending("b", seq=2)), DEFAULT, NOW)) == ["a"]
    assert placed(schedule(one_gpu(pending("a", seq=1), pending("b", seq=2, priority=1)), DEFAULT, NOW)) == ["b"]


def test_a_job_expected_to_be_small_goes_first() -> None:
    plan = schedule(one_gpu(pending("big", seq=1, expected=30_000), pending("small", seq=2, expected=60)), DEFAULT, NOW)
    assert placed(plan) == ["small"]


def test_priority_comes_before_expected_size() -> None:
    jobs = (pending("urgent", seq=1, expected=30_000, priority=1), pending("small", seq=2, expected=60))
    assert placed(schedule(one_gpu(*jobs), DEFAULT, NOW)) == ["urgent"]


def test_a_job_past_two_gpu_hours_goes_after_every_other() -> None:
    jobs = (pending("served", seq=1, expected=60, attained=DEMOTE_AFTER_GPU_S), pending("fresh", seq=2))
    assert placed(schedule(one_gpu(*jobs), DEFAULT, NOW)) == ["fresh"]


def test_sizes_within_a_factor_of_two_keep_submit_order() -> None:
    jobs = (pending("first", seq=1, expected=3_000), pending("second", seq=2, expected=2_100))
    assert placed(schedule(one_gpu(*jobs), DEFAULT, NOW)) == ["first"]


def test_a_job_expected_to_be_small_preempts_a_larger_class() -> None:
    plan = schedule(busy(running("big", expected=30_000), pending("small", expected=60)), DEFAULT, NOW)
    assert preempted(plan) == [("big", "small")]


def test_a_demoted_job_is_preempted_by_a_fresh_one() -> None:
    plan = schedule(busy(running("long", attained=DEMOTE_AFTER_GPU_S + 1), pending("fresh")), DEFAULT, NOW)
    assert preempted(plan) == [("long", "fresh")]


def test_jobs_of_one_class_do_not_preempt_each_other() -> None:
    assert schedule(busy(running("peer"), pending("fresh")), DEFAULT, NOW).preemptions == ()


def test_a_higher_priority_job_is_never_preempted() -> None:
    victim = running("vip", expected=30_000, attained=50_000, priority=1)
    assert schedule(busy(victim, pending("small", expected=60)), DEFAULT, NOW).preemptions == ()


@pytest.mark.parametrize(("expected", "cls"), [(None, 12), (1.0, 0), (60.0, 6), (3_600.0, 12), (1e300, 127)])
def test_size_classes_are_powers_of_two(expected: float | None, cls: int) -> None:
    assert UNKNOWN_GPU_S == 3_600.0
    assert size_class(pending("j", expected=expected)) == cls


def test_history_is_the_median_of_the_users_finished_jobs_else_the_teams() -> None:
    history = FinishedJobs()
    assert history.expected("ann", "vision") is None
    for gpu_s in (100.0, 300.0, 200.0):
        history.add("", "vision", gpu_s)
    assert history.expected("ann", "vision") == 200.0
    history.add("ann", "vision", 5_000.0)
    assert history.expected("ann", "vision") == 5_000.0
    assert history.expected("bob", "vision") == 300.0  # team: 100, 200, 300, 5000


def test_history_keeps_only_recent_jobs() -> None:
    history = FinishedJobs(recent=2)
    for gpu_s in (1.0, 1_000.0, 2_000.0):
        history.add("", "t", gpu_s)
    assert history.expected("", "t") == 2_000.0  # 1,000 and 2,000 remain
