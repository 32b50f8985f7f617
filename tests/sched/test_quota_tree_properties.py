"""Quota invariants over generated team trees: every level's limit holds, and reclaim spares teams within quota."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from corral.model import EPSILON, LiveAllocation, Quotas, RunningJob, TeamQuota
from corral.sched import Plan, Snapshot, get_policy, schedule
from corral.sched.quota import QuotaLedger
from corral.testing import live_alloc, make_job, make_node, running_job, snapshot
from corral.testing.strategies import running_snapshots

NOW = datetime(2025, 1, 1, tzinfo=UTC)
FAST = settings(max_examples=100, deadline=None)
DEFAULT = get_policy("default")
NO_PREEMPTION = replace(DEFAULT, preemption=False, backfill=False)
TEAMS = ("g", "h", "a", "b", "c")  # a team's parent, if any, comes before it
GPU_TYPES = ("H100", "A100", "L4")


@st.composite
def trees(draw: st.DrawFn, most: int = 4) -> tuple[dict[str, str], Quotas]:
    """Random parents, and quotas where each parent's nominal holds its children's (as the config requires)."""
    parents: dict[str, str] = {}
    for index, team in enumerate(TEAMS):
        parent = draw(st.none() | st.sampled_from(TEAMS[:index])) if index else None
        if parent is not None:
            parents[team] = parent
    quotas: dict[str, dict[str, TeamQuota]] = {}
    for gpu_type in GPU_TYPES:
        held: dict[str, float] = defaultdict(float)  # the children's nominal, for each parent
        for team in reversed(TEAMS):
            nominal = held[team]
            if draw(st.booleans()):
                nominal += float(draw(st.integers(0, most)))
                borrowing = draw(st.none() | st.integers(0, most).map(float))
                lending = draw(st.none() | st.integers(0, int(nominal)).map(float))
                quotas.setdefault(team, {})[gpu_type] = TeamQuota(nominal, borrowing, lending)
            if team in parents:
                held[parents[team]] += nominal
    return parents, quotas


def chain(team: str, parents: dict[str, str]) -> list[str]:
    out = [team]
    while out[-1] in parents:
        out.append(parents[out[-1]])
    return out


def gpus(snap: Snapshot, job_id: str) -> float:
    job = next(j for j in snap.pending if j.id == job_id)
    return job.request.gpus_per_node * job.request.nodes


def check_levels(snap: Snapshot, plan: Plan, used: dict[tuple[str, str], float]) -> dict[tuple[str, str], float]:
    """Add the plan's placements to each level's use and check every borrowing limit; the new use."""
    used = defaultdict(float, used)
    teams = {j.id: j.team for j in snap.pending}
    for placement in plan.placements:
        if placement.gpu_type is not None:
            for level in chain(teams[placement.job_id], dict(snap.team_parents)):
                used[(level, placement.gpu_type)] += gpus(snap, placement.job_id)
    for (level, gpu_type), total in used.items():
        quota = snap.quotas.get(level, {}).get(gpu_type)
        if quota is not None and quota.borrowing_limit is not None:
            limit = quota.nominal + quota.borrowing_limit
            assert total <= limit + EPSILON, f"{level} uses {total} {gpu_type}, over its {limit}"
    return used


def running_from(plan: Plan, snap: Snapshot) -> tuple[tuple[RunningJob, ...], tuple[LiveAllocation, ...]]:
    teams = {j.id: j.team for j in snap.pending}
    running = tuple(RunningJob(id=p.job_id, started_at=NOW, team=teams[p.job_id]) for p in plan.placements)
    live = tuple(LiveAllocation(p.job_id, a) for p in plan.placements for a in p.allocations)
    return running, live


@st.composite
def busy_clusters(draw: st.DrawFn) -> Snapshot:
    """Nodes of 8 H100 or 8 A100 and whole-GPU jobs of random teams: quotas, not shapes, decide."""
    cluster = tuple(
        make_node(f"n{i}").gpus(8, draw(st.sampled_from(GPU_TYPES[:2]))).build() for i in range(draw(st.integers(1, 4)))
    )
    count = draw(st.integers(1, 10))
    pending = tuple(
        make_job(f"j{i}")
        .gpus(draw(st.sampled_from([1, 2, 4, 8])))
        .nodes(draw(st.sampled_from([1, 1, 2])))
        .types(*draw(st.sampled_from([(), ("H100",), ("A100",)])))
        .team(draw(st.sampled_from(TEAMS)))
        .seq(i)
        .build()
        for i in range(count)
    )
    return Snapshot(nodes=cluster, pending=pending)


@FAST
@given(busy_clusters(), busy_clusters(), trees())
def test_no_level_of_the_tree_goes_past_its_nominal_and_borrowing_limit(first, second, tree):
    parents, quotas = tree
    snap = replace(first, quotas=quotas, team_parents=parents)
    plan = schedule(snap, NO_PREEMPTION, NOW)
    used = check_levels(snap, plan, {})
    # A second cycle on top of what the first placed, with more jobs.
    running, live = running_from(plan, snap)
    more = tuple(replace(j, id=f"x{j.id}") for j in second.pending)
    snap = replace(snap, live=live, running=running, pending=more)
    check_levels(snap, schedule(snap, NO_PREEMPTION, NOW), used)


@st.composite
def tree_snapshots(draw: st.DrawFn) -> Snapshot:
    base = draw(running_snapshots(NOW))
    parents, quotas = draw(trees())
    team = st.sampled_from(TEAMS)
    running = tuple(replace(r, team=draw(team)) for r in base.running)
    pending = tuple(replace(j, team=draw(team)) for j in base.pending)
    return replace(base, running=running, pending=pending, quotas=quotas, team_parents=parents)


@st.composite
def full_clusters(draw: st.DrawFn) -> Snapshot:
    """Nodes of 8 H100 (half) filled by running jobs of random teams and priorities; pending jobs want some back."""
    parents, quotas = draw(trees(most=8))
    cluster, running, live = [], [], []
    for i in range(draw(st.integers(2, 4))):
        cluster.append(make_node(f"n{i}").gpus(8, "H100").build())
        for half in draw(st.sampled_from([((0, 8),), ((0, 4), (4, 8)), ((0, 4),), ((0, 4),)])):
            job_id = f"r{len(running)}"
            priority, preemptible = draw(st.integers(0, 2)), draw(st.booleans())
            team = draw(st.sampled_from(TEAMS))
            running.append(running_job(job_id, NOW, ran_s=600, priority=priority, preemptible=preemptible, team=team))
            live.append(live_alloc(job_id, f"n{i}", range(*half)))
    pending = [
        make_job(f"j{i}")
        .gpus(draw(st.sampled_from([4, 8, 8])))
        .priority(draw(st.sampled_from([0, 2, 3, 3])))
        .team(draw(st.sampled_from(TEAMS)))
        for i in range(draw(st.integers(1, 4)))
    ]
    return snapshot(cluster, pending=pending, live=live, running=running, quotas=quotas, team_parents=parents)


@FAST
@given(tree_snapshots() | full_clusters())
def test_a_team_within_its_quota_is_never_preempted_for_a_borrower(snap: Snapshot) -> None:
    ledger = QuotaLedger(snap)
    plan = schedule(snap, DEFAULT, NOW)
    pending = {j.id: j for j in snap.pending}
    running = {r.id: r for r in snap.running}
    preempted_from: dict[str, list[str]] = defaultdict(list)
    for p in plan.preemptions:
        preempted_from[running[p.victim_job_id].team].append(p.victim_job_id)
    for p in plan.preemptions:
        victim, job = running[p.victim_job_id], pending[p.for_job_id]
        if p.reclaim:
            assert ledger.borrowing(victim.id), f"{victim.id} of team {victim.team} reclaimed, yet within its quota"
        if victim.team == job.team or ledger.borrowing(victim.id):
            continue
        if job.request.gpus_per_node == 0 or victim.id not in ledger.holding:
            continue  # GPU quotas say nothing of CPU-only work
        gpu_type = ledger.holding[victim.id][1]
        if gpu_type not in ledger.governed:
            continue
        freed = ledger.held_by(preempted_from[job.team], gpu_type)
        need = job.request.gpus_per_node * job.request.nodes
        assert ledger.levels(gpu_type).within(job.team, need - freed), (
            f"{job.id} of team {job.team} would borrow, yet preempted {victim.id} of team {victim.team}"
        )


@FAST
@given(tree_snapshots())
def test_teams_under_one_group_without_quota_plan_as_if_the_tree_were_flat(snap: Snapshot) -> None:
    flat_quotas = {team: quotas for team, quotas in snap.quotas.items()}
    flat = replace(snap, quotas=flat_quotas, team_parents={})
    grouped = replace(flat, team_parents=dict.fromkeys(TEAMS, "everyone"))
    assert schedule(grouped, DEFAULT, NOW) == schedule(flat, DEFAULT, NOW)
