"""The srpt-oracle bound: least remaining GPU-seconds first, preemptive; only the simulator fills its data."""

from dataclasses import replace
from datetime import UTC, datetime

from corral.model import Job, RunningJob
from corral.sched import get_policy, schedule
from corral.testing import live_alloc, make_job, make_node, running_job, snapshot

NOW = datetime(2025, 1, 1, tzinfo=UTC)
ORACLE = get_policy("srpt-oracle")


def pending(job_id: str, remaining: float, seq: int = 0) -> Job:
    return replace(make_job(job_id).gpus(1).seq(seq).build(), oracle_gpu_s=remaining)


def running(job_id: str, remaining: float) -> RunningJob:
    return replace(running_job(job_id, NOW, ran_s=60, preemptible=True), oracle_gpu_s=remaining)


def test_it_is_marked_as_simulation_only() -> None:
    assert ORACLE.simulation_only
    assert "bound" in ORACLE.description


def test_the_job_with_least_remaining_work_goes_first() -> None:
    snap = snapshot(nodes=[make_node("n1").gpus(1)], pending=[pending("long", 900, seq=1), pending("short", 90, seq=2)])
    assert [p.job_id for p in schedule(snap, ORACLE, NOW).placements] == ["short"]


def test_a_job_with_less_remaining_work_preempts_one_with_more() -> None:
    snap = snapshot(
        nodes=[make_node("n1").gpus(1)],
        live=[live_alloc("big", "n1", [0])],
        running=[running("big", 5_000)],
        pending=[pending("small", 100)],
    )
    plan = schedule(snap, ORACLE, NOW)
    assert [(p.victim_job_id, p.for_job_id) for p in plan.preemptions] == [("big", "small")]


def test_a_job_nearly_done_is_kept() -> None:
    snap = snapshot(
        nodes=[make_node("n1").gpus(1)],
        live=[live_alloc("done-soon", "n1", [0])],
        running=[running("done-soon", 50)],
        pending=[pending("small", 100)],
    )
    assert schedule(snap, ORACLE, NOW).preemptions == ()
