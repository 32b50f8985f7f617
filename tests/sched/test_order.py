"""A queue order carried from one cycle to the next equals a fresh sort, and so do the plans made with it."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from corral.model import FairShare, Gpu, Job, LiveAllocation, Node, NodeState, Request, RunningJob, TeamQuota
from corral.sched import Snapshot, get_policy, order, schedule
from corral.testing import make_job as build_job

NOW = datetime(2026, 1, 1, tzinfo=UTC)
TYPES = ("H100", "A100")


def make_job(rng: random.Random, seq: int) -> Job:
    request = Request(
        nodes=rng.choice((1, 1, 1, 2)),
        gpus_per_node=float(rng.choice((0, 0.5, 1, 2, 4))),
        gpu_types=tuple(rng.sample(TYPES, rng.randint(0, 2))),
    )
    return Job(
        id=f"j{seq:04d}",
        seq=seq,
        request=request,
        priority=rng.choice((0, 0, 1, 2)),
        submitted_at=NOW,
        user=f"u{rng.randrange(6)}",
        team=f"t{rng.randrange(3)}",
        time_limit_s=rng.choice((None, 600.0, 3600.0)),
        preemptible=rng.random() < 0.5,
        attained_gpu_s=rng.choice((0.0, 0.0, 10_000.0)),
    )


def per_job(borrows: Callable[[Job], bool]) -> order.Borrowing:
    """Whether each group borrows, asked of its first job (False for a group with no jobs)."""
    return lambda groups: np.array(
        [count > 0 and borrows(job) for job, count in zip(groups.first, groups.members, strict=True)], dtype=bool
    )


@pytest.mark.parametrize("slack", [1024, 0], ids=["kept", "forgetting"])
def test_the_carried_order_equals_a_fresh_sort_through_many_cycles(slack: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(order, "_SLACK", slack)  # 0: the requests and groups of jobs gone are forgotten often
    order.forget()
    rng = random.Random(5)
    pending = {job.id: job for job in (make_job(rng, seq) for seq in range(60))}
    seq = len(pending)
    flips = {(team, gpus): rng.random() < 0.5 for team in ("t0", "t1", "t2") for gpus in (0.5, 1, 2, 4, 8)}
    for step in range(200):
        for job_id in rng.sample(sorted(pending), rng.randint(0, 6)):
            del pending[job_id]
        for _ in range(rng.randint(0, 6)):
            pending[f"j{seq:04d}"] = make_job(rng, seq)
            seq += 1
        if pending and rng.random() < 0.3:  # the same job as a new, equal object, or changed
            job_id = rng.choice(sorted(pending))
            pending[job_id] = replace(pending[job_id], priority=rng.choice((pending[job_id].priority, 3)))
        flips = {group: was != (rng.random() < 0.1) for group, was in flips.items()}  # a few groups change
        shares = {f"t{t}": rng.choice((0.0, 0.5)) for t in range(3)} if step % 50 < 25 else {}

        def borrows(job: Job, flips: dict[tuple[str, float], bool] = flips) -> bool:
            return job.request.gpus_per_node > 0 and flips[(job.team, job.request.total_gpus)]

        def key(job: Job, shares: dict[str, float] = shares) -> tuple[object, ...]:
            return (-job.priority, shares.get(job.team, 0.0), job.seq, job.id)

        jobs = list(pending.values())
        rng.shuffle(jobs)
        inputs = ("test", tuple(sorted(shares.items())))
        with_borrowing = step % 7 != 3  # now and then a cycle without quotas
        late = per_job(borrows) if with_borrowing else None
        items = order.ordered(jobs, key, inputs, late)
        got, requests = list(map(order.job_of, items)), list(map(order.request_of, items))
        expected = sorted(jobs, key=lambda job: (with_borrowing and borrows(job), *key(job)))
        assert got == expected, f"step {step}"
        assert [item[:-4] for item in items] == [key(job) for job in got]
        assert list(map(order.id_of, items)) == [job.id for job in got]
        assert requests == [job.request for job in got]
        assert len({id(r) for r in requests}) == len(set(requests))  # equal requests: one object
        again = order.ordered_in_two(jobs, key, inputs, late)
        assert again[0].items.tolist() == items and again[2].requests() == set(requests), f"step {step}"


def cluster() -> tuple[Node, ...]:
    return tuple(
        Node(f"n{i:02d}", NodeState.READY, tuple(Gpu(g, TYPES[i % 2], 81920) for g in range(4)), 64.0, 1 << 18)
        for i in range(6)
    )


def test_plans_with_the_carried_order_equal_plans_without_it() -> None:
    rng = random.Random(7)
    nodes = cluster()
    quotas = {f"t{t}": {ty: TeamQuota(nominal=4.0, borrowing_limit=8.0) for ty in TYPES} for t in range(3)}
    fair = FairShare(teams={"t0": {"H100": 100.0}, "t1": {"A100": 50.0}}, users={"u1": {"H100": 10.0}})
    for name in ("default", "priority", "fifo", "tiresias"):
        policy = get_policy(name)
        pending = {job.id: job for job in (make_job(rng, seq) for seq in range(40))}
        live: dict[str, tuple[LiveAllocation, ...]] = {}
        running: dict[str, RunningJob] = {}
        seq, now = len(pending), NOW
        for step in range(12):
            snapshot = Snapshot(
                nodes=nodes,
                live=tuple(a for allocations in live.values() for a in allocations),
                pending=tuple(pending.values()),
                running=tuple(running.values()),
                quotas=quotas if step % 4 else {},
                fair_share=fair if step % 3 else None,
            )
            plan = schedule(snapshot, policy, now)
            order.forget()
            assert plan == schedule(snapshot, policy, now), f"{name}, step {step}"
            for placement in plan.placements:
                job = pending.pop(placement.job_id)
                live[job.id] = tuple(LiveAllocation(job.id, a) for a in placement.allocations)
                running[job.id] = RunningJob(
                    job.id, now, job.priority, job.preemptible, job.time_limit_s, None, False, job.user, job.team
                )
            for job_id in rng.sample(sorted(running), len(running) // 3):
                live.pop(job_id)
                running.pop(job_id)
            for _ in range(rng.randint(0, 8)):
                pending[f"j{seq:04d}"] = make_job(rng, seq)
                seq += 1
            now += timedelta(minutes=5)


def test_each_group_names_a_job_and_the_request_of_its_items() -> None:
    """A group's member is what a waiting job's reason is worked out from: a job of the group's team, and
    the request its items carry."""
    jobs = [build_job(f"j{i}").gpus(1 + i % 2).team("ab"[i % 3 % 2]).seq(i).build() for i in range(12)]
    items, _, groups = order.ordered_in_two(jobs, lambda job: (job.seq,), "member-test", None)
    for item in items.items:
        job, request = groups.member(order.group_of(item))
        assert job.team == order.job_of(item).team and request is order.request_of(item)
