"""Team quotas with borrowing, reclaim and fair share, scenario by scenario."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from corral.model import FairShare, NodeState, TeamQuota
from corral.sched import QUOTA, RESOURCES, get_policy, schedule
from corral.testing import live_alloc, make_job, make_node, running_job, snapshot

NOW = datetime(2026, 1, 1, tzinfo=UTC)
DEFAULT = get_policy("default")


def nodes(count=2, gpus=8):
    return [make_node(f"n{i}").gpus(gpus, "H100") for i in range(count)]


def quotas(**nominal):
    """``quotas(a=8, b=(8, 4, None))``: nominal, or (nominal, borrowing limit, lending limit)."""
    table = {}
    for team, spec in nominal.items():
        value = spec if isinstance(spec, tuple) else (spec, None, None)
        table[team] = {"H100": TeamQuota(*value)}
    return table


def test_a_team_borrows_idle_quota_of_others():
    job = make_job("a1").gpus(8).nodes(2).team("a")
    plan = schedule(snapshot(nodes(), pending=[job], quotas=quotas(a=8, b=8)), DEFAULT, NOW)
    assert [p.job_id for p in plan.placements] == ["a1"]  # 8 own + 8 borrowed from b


def test_a_borrowing_limit_caps_how_far_a_team_goes_past_its_quota():
    job = make_job("a1").gpus(8).nodes(2).team("a")
    plan = schedule(snapshot(nodes(), pending=[job], quotas=quotas(a=(8, 4, None), b=8)), DEFAULT, NOW)
    assert plan.placements == ()
    reason = plan.reasons["a1"]
    assert reason.code == QUOTA
    assert reason.message == (  # 16 > 8 + 4 whatever the team runs: waiting would not help
        "over quota: team a uses 0 of its 8 H100; the job asks 16, more than the team may ever hold (12: its"
        " quota of 8 and borrowing limit of 4): ask for fewer GPUs or a larger quota"
    )


def test_a_job_past_the_borrowing_limit_with_what_its_team_runs_waits_for_the_team():
    running = [running_job("a0", NOW, team="a")]
    live = [live_alloc("a0", "n0", range(8))]
    job = make_job("a1").gpus(8).team("a")
    snap = snapshot(nodes(), pending=[job], live=live, running=running, quotas=quotas(a=(8, 4, None), b=8))
    plan = schedule(snap, DEFAULT, NOW)
    assert plan.placements == ()
    assert plan.reasons["a1"].message == (
        "over quota: team a uses 8 of its 8 H100; 8 more would borrow beyond its borrowing limit of 4"
    )


def test_a_lending_limit_keeps_part_of_the_unused_quota_for_its_owner():
    running = [running_job("b1", NOW, team="b")]
    live = [live_alloc("b1", "n1", range(8))]
    job = make_job("a1").gpus(4).team("a")
    snap = snapshot(nodes(), pending=[job], live=live, running=running, quotas=quotas(a=4, b=(12, None, 0)))
    plan = schedule(snap, DEFAULT, NOW)
    assert [p.job_id for p in plan.placements] == ["a1"]  # within its own nominal
    bigger = make_job("a2").gpus(8).team("a")
    snap = snapshot(nodes(), pending=[bigger], live=live, running=running, quotas=quotas(a=4, b=(12, None, 0)))
    plan = schedule(snap, DEFAULT, NOW)
    assert plan.placements == ()
    assert plan.reasons["a2"].message == (  # 4 of its own, 4 to borrow, and b lends none of its 4 idle
        "over quota: team a uses 0 of its 4 H100; no idle H100 can be lent now; the job needs to borrow 4 of its 8"
    )


def test_an_owner_reclaims_its_quota_from_a_borrower_even_without_priority():
    # b borrowed a's idle quota: its job runs on all 16 GPUs, not preemptible, high priority.
    running = [running_job("b1", NOW, ran_s=600, priority=100, team="b")]
    live = [live_alloc("b1", "n0", range(8)), live_alloc("b1", "n1", range(8))]
    job = make_job("a1").gpus(8).team("a")
    snap = snapshot(nodes(), pending=[job], live=live, running=running, quotas=quotas(a=8, b=8))
    plan = schedule(snap, DEFAULT, NOW)
    [preemption] = plan.preemptions
    assert preemption.victim_job_id == "b1" and preemption.reclaim
    assert preemption.reason == "preempted by job a1 (reclaiming team a's quota from team b)"


def test_a_team_within_its_quota_is_never_preempted_for_a_borrower():
    # a runs a preemptible low-priority job within its quota; b, already at its quota, wants more.
    running = [running_job("a1", NOW, preemptible=True, team="a"), running_job("b1", NOW, team="b")]
    live = [live_alloc("a1", "n0", range(8)), live_alloc("b1", "n1", range(8))]
    job = make_job("b2").gpus(8).priority(50).team("b")
    snap = snapshot(nodes(), pending=[job], live=live, running=running, quotas=quotas(a=8, b=8))
    plan = schedule(snap, DEFAULT, NOW)
    assert plan.preemptions == ()
    assert plan.reasons["b2"].code == QUOTA


def test_priority_preemption_still_works_inside_one_team():
    running = [running_job("a1", NOW, preemptible=True, team="a")]
    live = [live_alloc("a1", "n0", range(8))]
    job = make_job("a2").gpus(8).priority(5).team("a")
    snap = snapshot(nodes(1), pending=[job], live=live, running=running, quotas=quotas(a=8))
    plan = schedule(snap, DEFAULT, NOW)
    assert [p.victim_job_id for p in plan.preemptions] == ["a1"]
    assert not plan.preemptions[0].reclaim


def test_gpu_types_without_quotas_are_free_for_all():
    cluster = [make_node("h").gpus(8, "H100"), make_node("l").gpus(8, "L4")]
    job = make_job("a1").gpus(8).types("H100", "L4").team("a")
    plan = schedule(snapshot(cluster, pending=[job], quotas=quotas(b=8)), DEFAULT, NOW)
    # H100 is all b's quota (a may borrow it, b is idle): the preferred type still wins.
    assert plan.placements[0].gpu_type == "H100"
    busy = [running_job("b1", NOW, team="b")]
    snap = snapshot(cluster, pending=[job], live=[live_alloc("b1", "h", range(4))], running=busy, quotas=quotas(b=8))
    plan = schedule(snap, DEFAULT, NOW)
    assert plan.placements[0].gpu_type == "L4"  # b uses its H100 quota: a falls back to the ungoverned type


def test_fair_share_puts_the_team_that_used_less_first_within_a_priority():
    heavy = make_job("heavy").gpus(8).team("a").seq(1)
    light = make_job("light").gpus(8).team("b").seq(2)
    urgent = make_job("urgent").gpus(8).team("a").seq(3).priority(1)
    usage = FairShare(teams={"a": {"H100": 3600.0 * 8}, "b": {"H100": 60.0}})
    plan = schedule(snapshot(nodes(1), pending=[heavy, light, urgent], fair_share=usage), DEFAULT, NOW)
    assert [p.job_id for p in plan.placements] == ["urgent"]
    assert plan.position("light") == (1, 2) and plan.position("heavy") == (2, 2)
    weighted = FairShare(teams=usage.teams, weights={"a": 1000.0})
    plan = schedule(snapshot(nodes(1), pending=[heavy, light], fair_share=weighted), DEFAULT, NOW)
    assert [p.job_id for p in plan.placements] == ["heavy"]  # a's weight makes its share small


def test_fair_share_ranks_users_within_a_team():
    first = make_job("first").gpus(8).team("a").user("ann").seq(1)
    second = make_job("second").gpus(8).team("a").user("bob").seq(2)
    usage = FairShare(users={"ann": {"H100": 1000.0}})
    plan = schedule(snapshot(nodes(1), pending=[first, second], fair_share=usage), DEFAULT, NOW)
    assert [p.job_id for p in plan.placements] == ["second"]


def test_gpus_reclaimed_for_an_owner_go_to_the_owner_not_back_to_the_borrower():
    # b's job borrowed a's idle quota, was preempted when a needed it, and waits again. Both wait on an
    # empty node: b's job is older and of a higher priority, yet a's job (within its nominal) goes first,
    # and b's job would now borrow what a uses, so it waits.
    borrower = make_job("b1").gpus(8).team("b").priority(5).seq(0)
    owner = make_job("a1").gpus(4).team("a").priority(0).seq(1)
    snap = snapshot(nodes(count=1), pending=[borrower, owner], quotas=quotas(a=4, b=4))
    plan = schedule(snap, DEFAULT, NOW)
    assert [p.job_id for p in plan.placements] == ["a1"]
    assert plan.reasons["b1"].code == QUOTA


def test_jobs_within_their_nominal_quota_are_considered_before_jobs_that_would_borrow():
    within = make_job("a1").gpus(4).team("a").seq(2)
    borrowing = make_job("b1").gpus(8).team("b").priority(3).seq(0)
    snap = snapshot(nodes(count=2), pending=[borrowing, within], quotas=quotas(a=4, b=4))
    plan = schedule(snap, get_policy("priority"), NOW)
    assert [p.job_id for p in plan.placements] == ["a1", "b1"]  # both fit; the order says who went first


def with_a_busy_a100():
    """8 H100 (team quotas a=4, b=4) and one A100 no team has a quota for, held by another job."""
    cluster = [make_node("n0").gpus(8, "H100"), make_node("x").gpus(1, "A100")]
    running = [running_job("admin", NOW, ran_s=600)]
    return cluster, running, [live_alloc("admin", "x", range(1))]


@pytest.mark.parametrize("types", [("H100", "A100"), ()], ids=["H100 or A100", "any type"])
def test_a_borrower_that_accepts_a_type_without_quota_goes_after_the_owner(types):
    # b1 would borrow on H100; A100 has no quota, but none is free. a1 is within its nominal: it goes first,
    # though b1 is older and of a higher priority.
    cluster, running, live = with_a_busy_a100()
    borrower = make_job("b1").gpus(8).types(*types).team("b").priority(5).seq(0)
    owner = make_job("a1").gpus(4).types("H100").team("a").seq(1)
    snap = snapshot(cluster, pending=[borrower, owner], live=live, running=running, quotas=quotas(a=4, b=4))
    plan = schedule(snap, DEFAULT, NOW)
    assert [(p.job_id, p.gpu_type) for p in plan.placements] == [("a1", "H100")]
    assert plan.preemptions == ()
    assert "b1" in plan.reasons


@pytest.mark.parametrize("types", [("H100", "A100"), ()], ids=["H100 or A100", "any type"])
def test_a_reclaimed_borrower_does_not_take_the_reclaimed_gpus_back(types):
    # Three nodes of 4 H100 (a=8, b=4) and a busy A100. b runs 8 H100: b1 (any type) borrows 4 of a's, and a1
    # reclaims them. Once b1 has stopped, a1 gets them and b1 waits: it is not placed there again only to be
    # reclaimed again, cycle after cycle.
    cluster = [*(make_node(f"h{i}").gpus(4, "H100") for i in range(3)), make_node("x").gpus(4, "A100")]
    others = [
        running_job("admin", NOW, ran_s=600),
        running_job("a0", NOW, ran_s=600, team="a"),
        running_job("b2", NOW, ran_s=3600, team="b"),
    ]
    held = [live_alloc("admin", "x", range(4)), live_alloc("a0", "h0", range(4)), live_alloc("b2", "h2", range(4))]
    borrower = make_job("b1").gpus(4).types(*types).team("b").priority(5).seq(0)
    owner = make_job("a1").gpus(4).types("H100").team("a").seq(1)
    busy = snapshot(
        cluster,
        pending=[owner],
        live=[*held, live_alloc("b1", "h1", range(4))],
        running=[*others, running_job("b1", NOW, ran_s=60, priority=5, team="b")],
        quotas=quotas(a=8, b=4),
    )
    plan = schedule(busy, DEFAULT, NOW)
    assert [(p.victim_job_id, p.reclaim) for p in plan.preemptions] == [("b1", True)]
    stopped = snapshot(cluster, pending=[borrower, owner], live=held, running=others, quotas=quotas(a=8, b=4))
    plan = schedule(stopped, DEFAULT, NOW)
    assert [(p.job_id, p.allocations[0].node) for p in plan.placements] == [("a1", "h1")]
    assert plan.preemptions == ()
    assert "b1" in plan.reasons


def test_a_borrower_goes_to_the_type_without_quota_when_the_owner_takes_the_one_it_prefers():
    cluster = [make_node("h").gpus(8, "H100"), make_node("l").gpus(8, "L4")]
    borrower = make_job("b1").gpus(8).types("H100", "L4").team("b").priority(5).seq(0)
    owner = make_job("a1").gpus(8).types("H100").team("a").seq(1)
    plan = schedule(snapshot(cluster, pending=[borrower, owner], quotas=quotas(a=8)), DEFAULT, NOW)
    assert sorted((p.job_id, p.gpu_type) for p in plan.placements) == [("a1", "H100"), ("b1", "L4")]


def _drained_pair():
    return [make_node("n0").gpus(8, "H100"), make_node("n1").gpus(8, "H100").state(NodeState.DRAINED)]


@pytest.mark.parametrize("table", [quotas(a=16), quotas(a=8, b=8)], ids=["own-nominal", "shared"])
def test_a_job_over_quota_that_only_drained_nodes_could_hold_waits_for_them(table):
    """Its team could stop its own job to come within quota, but two nodes are needed and one is drained:
    the reason names what it waits for, not the quota."""
    running = [running_job("a1", NOW, team="a", preemptible=True)]
    live = [live_alloc("a1", "n0", range(8))]
    gang = make_job("a2").gpus(8).nodes(2).team("a").priority(3)
    plan = schedule(snapshot(_drained_pair(), pending=[gang], live=live, running=running, quotas=table), DEFAULT, NOW)
    assert plan.placements == () and plan.preemptions == ()
    reason = plan.reasons["a2"]
    assert reason.code == RESOURCES
    assert reason.message.endswith("1 matching node is drained or not ready")


def test_a_job_over_quota_waits_for_its_quota_while_ready_nodes_could_hold_it():
    running = [running_job("a1", NOW, team="a"), running_job("b1", NOW, team="b")]
    live = [live_alloc("a1", "n0", range(8)), live_alloc("b1", "n1", range(8))]
    gang = make_job("a2").gpus(8).nodes(2).team("a").priority(3)
    nodes = [
        *_drained_pair()[:1],
        make_node("n1").gpus(8, "H100"),
        make_node("n2").gpus(8, "H100").state(NodeState.DRAINED),
    ]
    plan = schedule(snapshot(nodes, pending=[gang], live=live, running=running, quotas=quotas(a=8, b=8)), DEFAULT, NOW)
    assert plan.reasons["a2"].code == QUOTA


def test_a_job_passed_over_for_its_request_waits_for_drained_nodes_not_its_quota():
    """The second job's request was already found not to fit, so it is not tried: its reason comes from
    the quota's answers for the rest of the queue, which also give way to the drained node."""
    first = make_job("b1").gpus(8).nodes(2).team("b").priority(3).seq(1)
    second = make_job("a2").gpus(8).nodes(2).team("a").priority(3).seq(2)
    running = [running_job("a1", NOW, team="a")]
    live = [live_alloc("a1", "n0", range(8))]
    snap = snapshot(_drained_pair(), pending=[first, second], live=live, running=running, quotas=quotas(a=0, b=16))
    plan = schedule(snap, get_policy("priority"), NOW)
    assert {job: plan.reasons[job].code for job in ("b1", "a2")} == {"b1": RESOURCES, "a2": RESOURCES}


def test_a_job_of_any_type_goes_where_its_team_does_not_borrow_before_lower_jobs_take_that_place():
    """Team a is within its H100 quota only for 1 GPU; A100 has no quota. Its 4-GPU job of any type would
    borrow on H100 and fits the A100 node: it goes there at once rather than after the jobs that borrow,
    where a lower-priority job of its team would have taken the A100s (to be preempted for it next cycle)."""
    cluster = [make_node("h0").gpus(4, "H100"), make_node("x").gpus(4, "A100")]
    jobs = [
        make_job("j0").gpus(4).team("a").priority(1).seq(0),
        make_job("j1").gpus(1).team("a").seq(1),
        make_job("j2").gpus(4).team("a").preemptible().seq(2),
    ]
    plan = schedule(snapshot(cluster, pending=jobs, quotas=quotas(a=1, b=0)), DEFAULT, NOW)
    assert {p.job_id: p.gpu_type for p in plan.placements} == {"j0": "A100", "j1": "H100"}


def test_reclaim_takes_back_only_what_the_other_team_borrows():
    """Team b uses 3 H100 on its nominal of 2: it borrows 1. Team a's 4-GPU job would need b's two jobs on
    the node as well as its own: stopping both would leave b within its quota once the first stops, and b's
    higher-priority job would take the place back next cycle, to be preempted again. So a's job waits."""
    cluster = [make_node("h0").gpus(4, "H100"), make_node("x").gpus(4, "A100")]
    running = [
        running_job("b3", NOW, team="b", priority=3, preemptible=True),
        running_job("a4", NOW, team="a", priority=0, preemptible=True),
        running_job("b5", NOW, team="b", priority=1),
    ]
    live = [live_alloc("b3", "h0", [0]), live_alloc("a4", "h0", [1]), live_alloc("b5", "h0", [2, 3])]
    job = make_job("a6").gpus(4).types("H100").team("a").priority(2)
    snap = snapshot(cluster, pending=[job], live=live, running=running, quotas=quotas(a=5, b=2))
    plan = schedule(snap, DEFAULT, NOW)
    assert plan.preemptions == ()
    assert plan.reasons["a6"].code == RESOURCES


def test_reclaim_may_stop_several_jobs_of_a_team_that_borrows_them_all():
    """Team b uses 4 H100 on its nominal of 1 (two 2-GPU jobs; the cluster's other H100 node is a's): stopping
    both still takes back only what it borrows, the first one stopped leaving b past its quota."""
    cluster = [make_node("h0").gpus(4, "H100"), make_node("h1").gpus(4, "H100")]
    running = [running_job("b1", NOW, team="b"), running_job("b2", NOW, team="b"), running_job("a1", NOW, team="a")]
    live = [live_alloc("b1", "h0", [0, 1]), live_alloc("b2", "h0", [2, 3]), live_alloc("a1", "h1", range(4))]
    job = make_job("a2").gpus(4).types("H100").team("a")
    snap = snapshot(cluster, pending=[job], live=live, running=running, quotas=quotas(a=8, b=1))
    plan = schedule(snap, DEFAULT, NOW)
    assert sorted(p.victim_job_id for p in plan.preemptions) == ["b1", "b2"]
    assert all(p.reclaim for p in plan.preemptions)
