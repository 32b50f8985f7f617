"""Allocations grouped by job, and what each running job holds, brought up to date from one snapshot to
the next, equal what a count from scratch gives, whatever snapshots came before."""

from __future__ import annotations

import math
import random
from dataclasses import replace
from datetime import UTC, datetime

from corral.model import Allocation, Gpu, LiveAllocation, Node, NodeState, RunningJob
from corral.sched import holdings
from corral.sched.snapshot import Snapshot
from corral.testing.builders import running_job

from .test_carry import churn, cluster

TEAMS = ("a", "b", "c")
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def grouped_from_scratch(live: tuple[LiveAllocation, ...]) -> dict[str, tuple[Allocation, ...]]:
    by_job: dict[str, list[Allocation]] = {}
    for a in live:
        by_job.setdefault(a.job_id, []).append(a.allocation)
    key = lambda a: (a.node, a.gpus, a.gpu_fraction, a.cpus, a.memory_mb)  # noqa: E731
    return {job_id: tuple(sorted(allocations, key=key)) for job_id, allocations in by_job.items()}


def holdings_from_scratch(snapshot: Snapshot) -> holdings.Holdings:
    type_at = {(n.name, g.index): g.type for n in snapshot.nodes for g in n.gpus}
    teams = {r.id: r.team for r in snapshot.running}
    holding: dict[str, tuple[str, str, float]] = {}
    members: dict[tuple[str, str], list[float]] = {}
    for job_id, allocations in grouped_from_scratch(snapshot.live).items():
        gpus = sum(len(a.gpus) * a.gpu_fraction for a in allocations)
        known = [type_at[(a.node, i)] for a in allocations for i in a.gpus if (a.node, i) in type_at]
        if gpus > 0 and known and job_id in teams:
            holding[job_id] = (teams[job_id], known[0], gpus)
            members.setdefault((teams[job_id], known[0]), []).append(gpus)
    used = {key: math.fsum(gpus) for key, gpus in sorted(members.items())}
    return holdings.Holdings(holding, used)


def running(
    job_ids: list[str], rng: random.Random, team_of: dict[str, str], made: dict[str, RunningJob] | None = None
) -> tuple[RunningJob, ...]:
    """Running jobs; with ``made``, most of them the same objects as the last time they were listed."""
    out = []
    for job_id in sorted(job_ids):
        if rng.random() < 0.05:
            continue  # held but not listed as running: no team, left out of the quota's count
        if job_id not in team_of or rng.random() < 0.03:  # now and then a job's team changes
            team_of[job_id] = rng.choice(TEAMS)
        job = None if made is None else made.get(job_id)
        if job is None or job.team != team_of[job_id] or rng.random() < 0.1:  # a new object, equal or not
            job = running_job(job_id, NOW, team=team_of[job_id])
            if made is not None:
                made[job_id] = job
        out.append(job)
    return tuple(out)


def test_groupings_and_holdings_equal_a_count_from_scratch_through_many_snapshots():
    """Through jobs that come and go, gangs over several nodes, shares of a GPU that do not add up exactly
    in binary (0.3), the same allocation listed twice, values rebuilt rather than reused (as the head reads
    them from its database), nodes that change GPU type, jobs whose team changes and held jobs that are
    not running; running jobs mostly the same objects from one snapshot to the next, now and then all new."""
    rng = random.Random(41)
    nodes = cluster(rng)
    live: dict[str, LiveAllocation] = {}
    used: dict[tuple[str, int], float] = {}
    team_of: dict[str, str] = {}
    made: dict[str, RunningJob] = {}
    for step in range(300):
        if rng.random() < 0.05:  # a node is replaced by one with GPUs of the other type
            i = rng.randrange(len(nodes))
            node = nodes[i]
            other = "A100" if node.gpus and node.gpus[0].type == "H100" else "H100"
            gpus = tuple(Gpu(index=g.index, type=other, memory_mb=g.memory_mb) for g in node.gpus)
            nodes = (
                *nodes[:i],
                Node(node.name, node.state, gpus, node.cpus, node.memory_mb, node.labels),
                *nodes[i + 1 :],
            )
        churn(rng, nodes, live, used, step, ends=4, starts=5)
        held = list(live.values())
        if len(held) >= 3 and rng.random() < 0.4:  # a gang: one job's allocations on several nodes
            held[1] = LiveAllocation(held[0].job_id, held[1].allocation)
            held[2] = LiveAllocation(held[0].job_id, held[2].allocation)
        if held and rng.random() < 0.05:
            held.append(held[-1])  # listed twice: counts twice
        if rng.random() < 0.3:  # equal values, not the same objects
            held = [LiveAllocation(a.job_id, replace(a.allocation)) for a in held]
        rng.shuffle(held)
        snapshot = Snapshot(
            nodes=nodes,
            live=tuple(held),
            running=running(sorted({a.job_id for a in held}), rng, team_of, None if step % 10 == 9 else made),
        )
        assert dict(snapshot.allocations_of()) == grouped_from_scratch(snapshot.live), f"step {step}"
        found, expected = holdings.team_holdings(snapshot), holdings_from_scratch(snapshot)
        assert dict(found.holding) == expected.holding, f"step {step}"
        assert list(found.used.items()) == list(expected.used.items()), f"step {step}"


def test_a_job_whose_allocations_stay_the_same_keeps_its_grouping():
    """Only the jobs whose allocations changed are grouped again: the others keep the same tuple."""
    nodes = (Node("n1", NodeState.READY, tuple(Gpu(i, "H100", 81920) for i in range(8)), 32.0, 1 << 18),)
    held = [LiveAllocation(f"j{i}", Allocation("n1", (i,))) for i in range(8)]
    before = Snapshot(nodes=nodes, live=tuple(held)).allocations_of()
    held[3] = LiveAllocation("other", Allocation("n1", (3,)))
    after = Snapshot(nodes=nodes, live=tuple(held)).allocations_of()
    assert all(after[f"j{i}"] is before[f"j{i}"] for i in range(8) if i != 3)
    assert "j3" not in after and after["other"] == (Allocation("n1", (3,)),)
