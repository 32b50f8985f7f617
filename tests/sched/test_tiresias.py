"""The tiresias policy: queues by attained GPU-seconds, FIFO within a queue, higher queues preempt lower ones."""

from dataclasses import replace
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from corral.model import Job, RunningJob
from corral.sched import Plan, Snapshot, get_policy, schedule
from corral.sched.las import TIRESIAS_THRESHOLDS, queue_of
from corral.testing import live_alloc, make_job, make_node, running_job, snapshot
from corral.testing.strategies import running_snapshots

NOW = datetime(2025, 1, 1, tzinfo=UTC)
TIRESIAS = get_policy("tiresias")


def pending(job_id: str, attained: float = 0.0, seq: int = 0, gpus: float = 1) -> Job:
    return replace(make_job(job_id).gpus(gpus).seq(seq).build(), attained_gpu_s=attained)


def running(job_id: str, attained: float, preemptible: bool = True, priority: int = 0) -> RunningJob:
    return replace(
        running_job(job_id, NOW, ran_s=600, preemptible=preemptible, priority=priority), attained_gpu_s=attained
    )


def one_gpu_busy(victim: RunningJob, *jobs: Job) -> Snapshot:
    return snapshot(
        nodes=[make_node("n1").gpus(1)], live=[live_alloc(victim.id, "n1", [0])], running=[victim], pending=jobs
    )


def run(snap: Snapshot) -> Plan:
    return schedule(snap, TIRESIAS, NOW)


def test_queues_split_at_the_published_thresholds() -> None:
    assert TIRESIAS_THRESHOLDS == (3_250.0, 7_200.0)
    assert [queue_of(s, TIRESIAS_THRESHOLDS) for s in (0, 3_249, 3_250, 7_199, 7_200, 1e9)] == [0, 0, 1, 1, 2, 2]


def test_a_job_with_less_service_goes_first_whatever_its_submit_order() -> None:
    snap = snapshot(nodes=[make_node("n1").gpus(1)], pending=[pending("old", 5_000, seq=1), pending("new", 0, seq=2)])
    assert [p.job_id for p in run(snap).placements] == ["new"]


def test_within_a_queue_jobs_go_first_come_first_served() -> None:
    snap = snapshot(nodes=[make_node("n1").gpus(1)], pending=[pending("b", 3_000, seq=2), pending("a", 100, seq=1)])
    assert [p.job_id for p in run(snap).placements] == ["a"]


def test_a_job_in_a_higher_queue_preempts_a_demoted_one() -> None:
    plan = run(one_gpu_busy(running("demoted", 4_000), pending("fresh")))
    assert [(p.victim_job_id, p.for_job_id) for p in plan.preemptions] == [("demoted", "fresh")]


def test_no_preemption_within_a_queue() -> None:
    plan = run(one_gpu_busy(running("peer", 3_000), pending("fresh")))
    assert plan.preemptions == ()


def test_explicit_priority_ranks_above_every_queue() -> None:
    plan = run(one_gpu_busy(running("important", 50_000, priority=5), pending("fresh")))
    assert plan.preemptions == ()


def test_only_preemptible_jobs_are_stopped() -> None:
    plan = run(one_gpu_busy(running("pinned", 50_000, preemptible=False), pending("fresh")))
    assert plan.preemptions == ()


@st.composite
def served_snapshots(draw: st.DrawFn) -> Snapshot:
    """Generated clusters whose pending and running jobs carry random attained service."""
    snap = draw(running_snapshots(NOW))
    amounts = st.sampled_from([0.0, 1_000.0, 3_250.0, 5_000.0, 7_200.0, 50_000.0])
    jobs = tuple(replace(j, attained_gpu_s=draw(amounts)) for j in snap.pending)
    runs = tuple(replace(r, attained_gpu_s=draw(amounts)) for r in snap.running)
    return Snapshot(snap.nodes, snap.live, jobs, runs)


@settings(max_examples=100, deadline=None)
@given(served_snapshots())
def test_las_never_preempts_a_job_in_a_higher_or_equal_queue(snap: Snapshot) -> None:
    plan = run(snap)
    jobs = {j.id: j for j in snap.pending}
    victims = {r.id: r for r in snap.running}
    for p in plan.preemptions:
        job, victim = jobs[p.for_job_id], victims[p.victim_job_id]
        assert victim.preemptible
        assert (victim.priority, -queue_of(victim.attained_gpu_s, TIRESIAS_THRESHOLDS)) < (
            job.priority,
            -queue_of(job.attained_gpu_s, TIRESIAS_THRESHOLDS),
        )


@settings(max_examples=50, deadline=None)
@given(served_snapshots(), st.sampled_from(["tiresias", "default", "srpt-oracle"]))
def test_the_same_snapshot_gives_the_same_plan(snap: Snapshot, policy: str) -> None:
    assert schedule(snap, get_policy(policy), NOW) == schedule(snap, get_policy(policy), NOW)
