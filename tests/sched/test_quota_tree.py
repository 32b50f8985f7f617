"""Quotas along the team tree: borrowing within a parent first, ancestors' limits, subtree lending, reclaim order."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from corral.model import TeamQuota
from corral.sched import QUOTA, Plan, Snapshot, get_policy, schedule
from corral.testing import JobBuilder, live_alloc, make_job, make_node, running_job, snapshot

NOW = datetime(2026, 1, 1, tzinfo=UTC)
DEFAULT = get_policy("default")

# acme ─┬─ research ─┬─ nlp
#       │            └─ vision
#       └─ infra
TREE = {"nlp": "research", "vision": "research"}


def nodes(count: int = 4) -> list[object]:
    return [make_node(f"n{i}").gpus(8, "H100") for i in range(count)]


def quotas(**specs: float | tuple[float, float | None, float | None]) -> dict[str, dict[str, TeamQuota]]:
    """``quotas(nlp=8, research=(16, 0, None))``: nominal, or (nominal, borrowing limit, lending limit)."""
    return {
        team: {"H100": TeamQuota(*(spec if isinstance(spec, tuple) else (spec, None, None)))}
        for team, spec in specs.items()
    }


def run(
    pending: list[JobBuilder],
    table: dict[str, dict[str, TeamQuota]],
    busy: dict[str, tuple[str, str]] | None = None,
    parents: dict[str, str] | None = None,
    count: int = 4,
) -> Plan:
    """``busy``: running job → (team, node), each on all 8 GPUs of its node."""
    busy = busy or {}
    running = [running_job(j, NOW, team=team, ran_s=600 * (i + 1)) for i, (j, (team, _)) in enumerate(busy.items())]
    live = [live_alloc(j, node, range(8)) for j, (_, node) in busy.items()]
    snap: Snapshot = snapshot(
        nodes(count),
        pending=pending,
        live=live,
        running=running,
        quotas=table,
        team_parents=TREE if parents is None else parents,
    )
    return schedule(snap, DEFAULT, NOW)


def test_a_team_borrows_its_siblings_idle_quota_within_its_parent():
    table = quotas(research=(16, 0, None), nlp=8, vision=8, infra=16)
    plan = run([make_job("nlp1").gpus(8).nodes(2).team("nlp")], table)
    assert [p.job_id for p in plan.placements] == ["nlp1"]  # vision's 8 are idle, research stays within 16


def test_a_parents_borrowing_limit_keeps_a_team_from_borrowing_outside_it():
    table = quotas(research=(16, 0, None), nlp=8, vision=8, infra=16)
    plan = run([make_job("nlp1").gpus(8).nodes(3).team("nlp")], table)
    assert plan.placements == ()
    assert plan.reasons["nlp1"].code == QUOTA
    assert plan.reasons["nlp1"].message == (
        "over quota: team nlp uses 0 of its 8 H100; 24 more would borrow beyond team research's borrowing limit of 0"
    )


def test_an_ancestors_borrowing_limit_caps_a_grandchild():
    # acme ─ research (8, may borrow 4) ─ lang (no quota of its own) ─ nlp (8)
    parents = {"lang": "research", "nlp": "lang"}
    table = quotas(research=(8, 4, None), nlp=8)
    plan = run([make_job("nlp2").gpus(8).team("nlp")], table, busy={"nlp1": ("nlp", "n0")}, parents=parents)
    assert plan.reasons["nlp2"].message == (
        "over quota: team nlp uses 8 of its 8 H100; 8 more would borrow beyond team research's borrowing limit of 4"
    )
    plan = run([make_job("nlp2").gpus(4).team("nlp")], table, busy={"nlp1": ("nlp", "n0")}, parents=parents)
    assert [p.job_id for p in plan.placements] == ["nlp2"]  # research at 12 = 8 + 4


def test_a_subtree_lends_at_most_its_lending_limit():
    # research keeps 12 of its idle 16 for its own teams: infra borrows 4 of them and no more.
    table = quotas(research=(16, None, 4), nlp=8, vision=8, infra=8)
    plan = run([make_job("infra1").gpus(8).nodes(2).team("infra")], table, count=3)
    assert plan.placements == ()
    assert plan.reasons["infra1"].message == (
        "over quota: team infra uses 0 of its 8 H100;"
        " only 4 idle H100 can be lent now; the job needs to borrow 8 of its 16"
    )
    plan = run([make_job("infra1").gpus(4).nodes(3).team("infra")], table, count=3)
    assert [p.job_id for p in plan.placements] == ["infra1"]  # 8 own + 4 lent by research
    # Within research, nlp may still borrow all of vision's idle quota.
    plan = run([make_job("nlp1").gpus(8).nodes(2).team("nlp")], table, count=3)
    assert [p.job_id for p in plan.placements] == ["nlp1"]


def test_reclaim_takes_from_a_borrower_in_another_branch_before_a_sibling():
    # The cluster is full. vision borrows nlp's idle quota within research; ops borrows infra's.
    # ops's job lost more work (it ran longer), yet it goes first: it borrows from further away.
    table = quotas(research=16, nlp=8, vision=8, infra=16)
    busy = {"vis1": ("vision", "n0"), "vis2": ("vision", "n1"), "inf1": ("infra", "n2"), "ops1": ("ops", "n3")}
    plan = run([make_job("nlp1").gpus(8).team("nlp")], table, busy=busy)
    [preemption] = plan.preemptions
    assert preemption.victim_job_id == "ops1" and preemption.reclaim
    assert preemption.reason == "preempted by job nlp1 (reclaiming team nlp's quota from team ops)"


def test_reclaim_takes_from_a_sibling_when_no_borrower_is_further_away():
    table = quotas(research=16, nlp=8, vision=8, infra=16)
    busy = {"vis1": ("vision", "n0"), "vis2": ("vision", "n1"), "inf1": ("infra", "n2"), "inf2": ("infra", "n3")}
    plan = run([make_job("nlp1").gpus(8).team("nlp")], table, busy=busy)
    [preemption] = plan.preemptions
    assert preemption.victim_job_id in {"vis1", "vis2"} and preemption.reclaim  # never infra's: within its quota


def test_a_parents_borrowing_limit_is_honoured_by_reclaim_from_a_sibling():
    # research may not borrow, so nlp's quota is held by its sibling vision, not by another branch:
    # the free node stays free, and vision gives nlp's quota back.
    table = quotas(research=(16, 0, None), nlp=8, vision=8, infra=8)
    busy = {"vis1": ("vision", "n0"), "vis2": ("vision", "n1")}
    plan = run([make_job("nlp1").gpus(8).team("nlp")], table, busy=busy, count=3)
    assert plan.placements == ()
    [preemption] = plan.preemptions
    assert preemption.victim_job_id in {"vis1", "vis2"} and preemption.reclaim
    assert plan.reasons["nlp1"].message.startswith("preempting")


def test_a_team_within_its_quota_is_not_reclaimed_when_only_its_group_is_over():
    # research borrows 8 beyond its 16 through vision; nlp is within its own 8: only vision's jobs may go.
    table = quotas(research=16, nlp=8, vision=8, infra=16)
    busy = {"nlp1": ("nlp", "n0"), "vis1": ("vision", "n1"), "vis2": ("vision", "n2"), "inf1": ("infra", "n3")}
    plan = run([make_job("inf2").gpus(8).team("infra")], table, busy=busy)
    assert [p.victim_job_id for p in plan.preemptions] in (["vis1"], ["vis2"])


def test_a_tree_whose_teams_sit_under_one_group_without_quota_plans_as_the_flat_one():
    table = quotas(nlp=(8, 4, None), vision=(8, None, 0), infra=8)
    busy = {"vis1": ("vision", "n0"), "inf1": ("infra", "n1"), "inf2": ("infra", "n2")}
    pending = [make_job("nlp1").gpus(8).nodes(2).team("nlp"), make_job("vis2").gpus(8).team("vision")]
    flat = run(pending, table, busy=busy, parents={})
    grouped = run(pending, table, busy=busy, parents={"nlp": "all", "vision": "all", "infra": "all"})
    assert grouped == flat


def test_a_borrower_never_preempts_a_team_within_its_quota_even_at_a_higher_priority():
    # Idle quota is there (research's unassigned 8), but split over two nodes: vision could only
    # start by stopping nlp's low-priority, preemptible jobs, and nlp is within its quota.
    table = quotas(research=24, nlp=8, vision=8)
    running = [running_job(j, NOW, preemptible=True, team="nlp") for j in ("nlp1", "nlp2")]
    live = [live_alloc("nlp1", "n0", range(4)), live_alloc("nlp2", "n1", range(4))]
    busy = [running_job("vis1", NOW, team="vision")]
    job = make_job("vis2").gpus(8).priority(5).team("vision")
    snap = snapshot(
        nodes(3),
        pending=[job],
        live=[*live, live_alloc("vis1", "n2", range(8))],
        running=[*running, *busy],
        quotas=table,
        team_parents=TREE,
    )
    plan = schedule(snap, DEFAULT, NOW)
    assert plan.preemptions == () and plan.placements == ()


# The worked example of docs/scheduling.md ("Quotas and borrowing"): 56 H100 under acme.
EXAMPLE_TREE = {"nlp": "research", "vision": "research", "infra": "platform"}
EXAMPLE = quotas(research=(32, 8, None), nlp=16, vision=8, platform=(16, None, 4), infra=16)


def example(pending: list[JobBuilder], nlp: int, infra: int = 0) -> Plan:
    """nlp runs ``nlp`` 8-GPU jobs on n0, n1, ...; infra ``infra`` on the nodes after them."""
    busy = {f"nlp{i}": ("nlp", f"n{i}") for i in range(nlp)}
    busy.update({f"infra{i}": ("infra", f"n{nlp + i}") for i in range(infra)})
    return run(pending, EXAMPLE, busy=busy, parents=EXAMPLE_TREE, count=7)


def test_the_documented_example():
    more = make_job("more").gpus(8).nodes(2).team("nlp")
    assert [p.job_id for p in example([more], nlp=2).placements] == ["more"]  # within research's 32
    more = make_job("more").gpus(8).team("nlp")
    assert [p.job_id for p in example([more], nlp=4).placements] == ["more"]  # research borrows 8 of acme
    plan = example([more], nlp=5)
    assert plan.reasons["more"].message == (
        "over quota: team nlp uses 40 of its 16 H100; 8 more would borrow beyond team research's borrowing limit of 8"
    )
    unlimited = {**EXAMPLE, "research": quotas(research=32)["research"]}
    snap = snapshot(
        nodes(7), pending=[make_job("more").gpus(4).team("nlp")], quotas=unlimited, team_parents=EXAMPLE_TREE
    )
    busy = [running_job(f"nlp{i}", NOW, team="nlp") for i in range(5)]
    snap = replace(snap, running=tuple(busy), live=tuple(live_alloc(f"nlp{i}", f"n{i}", range(8)) for i in range(5)))
    assert [p.job_id for p in schedule(snap, DEFAULT, NOW).placements] == ["more"]  # acme lends 4 more
    snap = replace(snap, pending=(make_job("more").gpus(5).team("nlp").build(),))
    assert schedule(snap, DEFAULT, NOW).reasons["more"].message == (
        "over quota: team nlp uses 40 of its 16 H100; only 4 idle H100 can be lent now; the job needs 5"
    )
    plan = example([make_job("vis1").gpus(8).team("vision")], nlp=5)
    assert [p.victim_job_id for p in plan.preemptions] == ["nlp0"] and plan.preemptions[0].reclaim
    plan = example([make_job("vis1").gpus(8).team("vision")], nlp=3, infra=4)
    assert [p.victim_job_id for p in plan.preemptions] == ["infra0"]  # not nlp's, though they lost less work


def test_a_team_within_its_quota_reclaims_even_where_it_fits_now_without_victims():
    # research (nominal 2, may borrow 1) runs nlp's 3 jobs: nlp's own 1, vision's idle 1 and 1 borrowed.
    # A GPU is free, but vision's job would take research past its borrowing limit: it must reclaim from
    # nlp, though the free GPU's node has nlp's cheapest job and the job fits there without it.
    table = {**quotas(research=(2, 1, None), nlp=1, vision=1, other=2)}
    running = [
        running_job("nlp0", NOW, team="nlp", ran_s=600, preemptible=True),
        running_job("nlp1", NOW, team="nlp", ran_s=500, preemptible=True),
        running_job("nlp2", NOW, team="nlp", ran_s=10, preemptible=True),
    ]
    live = [live_alloc("nlp0", "n1", [0]), live_alloc("nlp1", "n1", [1]), live_alloc("nlp2", "n2", [0])]
    snap = snapshot(
        [make_node("n1").gpus(2, "H100"), make_node("n2").gpus(2, "H100")],
        pending=[make_job("vis").gpus(1).team("vision")],
        live=live,
        running=running,
        quotas=table,
        team_parents=TREE,
    )
    plan = schedule(snap, DEFAULT, NOW)
    assert plan.placements == ()
    [preemption] = plan.preemptions
    assert (preemption.victim_job_id, preemption.reclaim) == ("nlp2", True)
    assert plan.reasons["vis"].message.startswith("preempting nlp2")


def test_a_child_team_reclaims_its_nominal_from_its_parents_own_jobs():
    # research has no quota of its own beyond its children's (16 = nlp 8 + vision 8), yet its own jobs hold
    # 16 GPUs, the children's idle nominal; infra holds its own 16. vision wants its 8 back.
    table = quotas(research=16, nlp=8, vision=8, infra=16)
    busy = {"res1": ("research", "n0"), "res2": ("research", "n1"), "inf1": ("infra", "n2"), "inf2": ("infra", "n3")}
    plan = run([make_job("vis1").gpus(8).team("vision")], table, busy=busy)
    [preemption] = plan.preemptions
    assert preemption.victim_job_id in {"res1", "res2"} and preemption.reclaim
    assert preemption.reason == "preempted by job vis1 (reclaiming team vision's quota from team research)"


def test_a_parents_own_jobs_within_its_unassigned_quota_are_not_reclaimed():
    table = quotas(research=24, nlp=8, vision=8, infra=8)  # research keeps 8 unassigned for its own jobs
    busy = {"res1": ("research", "n0"), "nlp1": ("nlp", "n1"), "inf1": ("infra", "n2")}
    plan = run([make_job("vis1").gpus(8).team("vision")], table, busy=busy, count=3)
    assert plan.preemptions == () and plan.placements == ()


def test_a_team_within_its_quota_is_never_preempted_for_another_team_by_priority_alone():
    # vision is within its nominal; its quota is held by research's own jobs (which borrow it). infra's
    # preemptible job, within infra's nominal, would lose less work and vision2 ranks above it (a higher
    # priority), but infra borrows nothing: research's job is reclaimed instead.
    table = quotas(research=8, vision=8, infra=8)
    running = [
        running_job("res1", NOW, team="research", ran_s=3600),
        running_job("inf1", NOW, team="infra", preemptible=True, ran_s=60),
    ]
    live = [live_alloc("res1", "n0", range(8)), live_alloc("inf1", "n1", range(8))]
    pending = [make_job("vis2").gpus(8).team("vision").priority(9)]
    snap = snapshot(nodes(2), pending=pending, live=live, running=running, quotas=table, team_parents=TREE)
    plan = schedule(snap, DEFAULT, NOW)
    assert [(p.victim_job_id, p.reclaim) for p in plan.preemptions] == [("res1", True)]


def test_a_job_preempting_by_level_at_the_same_priority_says_so_in_words():
    old = replace(running_job("old", NOW, preemptible=True, ran_s=3 * 3600, team="nlp"), attained_gpu_s=3 * 3600.0)
    running = [old]  # demoted: past 2 GPU-hours of service
    live = [live_alloc("old", "n0", range(8))]
    snap = snapshot(nodes(1), pending=[make_job("new").gpus(8).team("nlp")], live=live, running=running)
    plan = schedule(snap, DEFAULT, NOW)
    [preemption] = plan.preemptions
    assert preemption.reason.startswith("preempted by job new (same priority, ranked above it by the scheduling policy")
