"""A cycle keeps each node's victim-search answer by all it depends on: plans with kept answers equal
plans with every answer worked out afresh."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from hypothesis import given, settings

from corral.model import TeamQuota
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
