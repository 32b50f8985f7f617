"""A cycle keeps each node's victim-search answer by all it depends on: plans with kept answers equal
plans with every answer worked out afresh."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from hypothesis import given, settings

from corral.model import FairShare, TeamQuota
from corral.sched import Snapshot, schedule
from corral.sched.victim_scan import NodeAnswers, cheapest_on_node
from corral.testing import live_alloc, make_job, make_node, running_job, snapshot

from .test_quota_properties import DEFAULT, NOW, quota_snapshots


@contextmanager
def answers_afresh() -> Iterator[None]:
    kept = NodeAnswers.cheapest

    def afresh(self: NodeAnswers, node, request, gpu_type, eligible, allowed, beat, also=()):  # type: ignore[no-untyped-def]
        return cheapest_on_node(node, request, gpu_type, eligible, self._held, self._sets, allowed, beat)

    NodeAnswers.cheapest = afresh  # type: ignore[method-assign]
    try:
        yield
    finally:
        NodeAnswers.cheapest = kept  # type: ignore[method-assign]


@settings(max_examples=300, deadline=None, derandomize=True)
@given(quota_snapshots())
def test_kept_victim_answers_give_the_plan_fresh_ones_give(snap: Snapshot) -> None:
    kept = schedule(snap, DEFAULT, NOW)
    with answers_afresh():
        fresh = schedule(snap, DEFAULT, NOW)
    assert (kept.placements, kept.preemptions, dict(kept.reasons)) == (
        fresh.placements,
        fresh.preemptions,
        dict(fresh.reasons),
    )


def test_a_kept_answer_is_not_reused_once_the_victims_team_borrows_less():
    """Team b (nominal 1 H100) runs three 1-GPU jobs: it borrows 2. Stopping b1 and b2 together for a job of
    team a would take from b more than it borrows, unless b borrows more than that already. The first of two
    like jobs of a finds b1 and b2 on n1 (cheaper than b3 alone on n1's bound, but not in total) and takes b3,
    with n2's free GPU, instead: b then borrows 1. The second job may not stop b1 and b2 now, although node,
    request, victims and team are what they were when the first job's search looked at n1."""
    nodes = [make_node("n1").gpus(2, "H100"), make_node("n2").gpus(2, "H100")]
    running = [running_job(job_id, NOW, ran_s=ran, team="b") for job_id, ran in (("b1", 100), ("b2", 200), ("b3", 150))]
    live = [live_alloc("b1", "n1", [0]), live_alloc("b2", "n1", [1]), live_alloc("b3", "n2", [0])]
    pending = [make_job(f"a{i}").gpus(2).team("a").priority(1).seq(i) for i in (1, 2)]
    quotas = {"a": {"H100": TeamQuota(4.0, None, None)}, "b": {"H100": TeamQuota(1.0, None, None)}}
    snap = snapshot(nodes, pending=pending, live=live, running=running, quotas=quotas)
    kept = schedule(snap, DEFAULT, NOW)
    assert [(p.victim_job_id, p.for_job_id) for p in kept.preemptions] == [("b3", "a1")]
    with answers_afresh():
        fresh = schedule(snap, DEFAULT, NOW)
    assert kept.preemptions == fresh.preemptions and dict(kept.reasons) == dict(fresh.reasons)


def test_a_job_that_found_no_victims_does_not_stop_a_like_job_of_another_team_searching():
    """a1 (team a) and c1 (team c) ask the same at the same priority; the only preemptible job is c's own,
    within c's quota, so a1 may not stop it, but c1 may. a1 comes first (a's share is lower) and finds
    nothing: c1 must still search, not take a1's answer for its own."""
    nodes = [make_node("n1").gpus(2, "H100")]
    running = [
        running_job("c-low", NOW, ran_s=100, team="c", preemptible=True),
        running_job("c-other", NOW, ran_s=100, team="c"),
    ]
    live = [live_alloc("c-low", "n1", [0]), live_alloc("c-other", "n1", [1])]
    pending = [make_job("a1").gpus(1).team("a").priority(1).seq(0), make_job("c1").gpus(1).team("c").priority(1).seq(1)]
    quotas = {"a": {"H100": TeamQuota(1.0, None, None)}, "c": {"H100": TeamQuota(4.0, None, None)}}
    fair = FairShare(teams={"a": {"H100": 0.0}, "c": {"H100": 1e6}})
    snap = snapshot(nodes, pending=pending, live=live, running=running, quotas=quotas, fair_share=fair)
    plan = schedule(snap, DEFAULT, NOW)
    assert list(plan.waiting) == ["a1", "c1"]  # a1 is tried first
    assert [(p.victim_job_id, p.for_job_id) for p in plan.preemptions] == [("c-low", "c1")]
