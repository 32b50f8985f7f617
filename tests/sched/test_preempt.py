from datetime import UTC, datetime

from corral.model import TeamQuota
from corral.sched import PREEMPTING, RESOURCES, Plan, Preemption, Snapshot, get_policy, schedule
from corral.sched.preempt import Preemptor
from corral.sched.quota import QuotaLedger
from corral.sched.reason_map import Reasons
from corral.testing import JobBuilder, live_alloc, make_job, make_node, running_job, snapshot

NOW = datetime(2025, 1, 1, tzinfo=UTC)
HOUR = 3600.0


def run(snap: Snapshot, policy: str = "default") -> Plan:
    return schedule(snap, get_policy(policy), NOW)


def victims(plan: Plan) -> list[tuple[str, str]]:
    return [(p.victim_job_id, p.for_job_id) for p in plan.preemptions]


def full_node(*jobs: str, priority: int = 0, preemptible: bool = True, gpus: int = 8) -> Snapshot:
    """n1 with ``gpus`` GPUs, shared equally by the running ``jobs``."""
    each = gpus // len(jobs)
    return snapshot(
        nodes=[make_node("n1").gpus(gpus)],
        live=[live_alloc(j, "n1", range(i * each, (i + 1) * each)) for i, j in enumerate(jobs)],
        running=[running_job(j, NOW, ran_s=HOUR, priority=priority, preemptible=preemptible) for j in jobs],
    )


def with_pending(snap: Snapshot, *jobs: JobBuilder) -> Snapshot:
    return Snapshot(snap.nodes, snap.live, tuple(j.build() for j in jobs), snap.running)


def test_a_higher_priority_job_preempts_a_lower_preemptible_one() -> None:
    plan = run(with_pending(full_node("low"), make_job("high").gpus(8).priority(5)))
    assert victims(plan) == [("low", "high")]
    assert plan.preemptions[0].reason == "preempted by job high (priority 5 > 0)"
    assert plan.placements == ()  # placed in a later cycle, once the victim has stopped
    reason = plan.reasons["high"]
    assert reason.code == PREEMPTING
    assert reason.message == "preempting low (8 GPU-hours lost) to start"


def test_no_preemption_of_jobs_that_are_not_preemptible_or_not_lower() -> None:
    high = make_job("high").gpus(8).priority(5)
    assert run(with_pending(full_node("low", preemptible=False), high)).preemptions == ()
    assert run(with_pending(full_node("peer", priority=5), high)).preemptions == ()


def test_no_preemption_for_a_job_that_still_would_not_fit() -> None:
    snap = snapshot(
        nodes=[make_node("n1").gpus(8)],
        live=[live_alloc("low", "n1", range(4)), live_alloc("pinned", "n1", range(4, 8))],
        running=[
            running_job("low", NOW, ran_s=HOUR, preemptible=True),
            running_job("pinned", NOW, ran_s=HOUR),
        ],
        pending=[make_job("high").gpus(8).priority(5)],
    )
    plan = run(snap)
    assert plan.preemptions == ()
    assert plan.reasons["high"].code != PREEMPTING


def test_the_victims_that_lose_the_least_work_are_chosen() -> None:
    snap = snapshot(
        nodes=[make_node("n1").gpus(8), make_node("n2").gpus(8)],
        live=[live_alloc("saved", "n1", range(8)), live_alloc("unsaved", "n2", range(8))],
        running=[
            running_job("saved", NOW, ran_s=10 * HOUR, preemptible=True, checkpoint_s_ago=300),
            running_job("unsaved", NOW, ran_s=HOUR, preemptible=True),
        ],
        pending=[make_job("high").gpus(8).priority(1)],
    )
    assert victims(run(snap)) == [("saved", "high")]


def test_on_equal_lost_work_the_fewest_jobs_are_chosen() -> None:
    snap = snapshot(
        nodes=[make_node("n1").gpus(8), make_node("n2").gpus(8)],
        live=[live_alloc("a", "n1", range(4)), live_alloc("b", "n1", range(4, 8)), live_alloc("c", "n2", range(8))],
        running=[running_job(j, NOW, ran_s=HOUR, preemptible=True, checkpoint_s_ago=0) for j in "abc"],
        pending=[make_job("high").gpus(8).priority(1)],
    )
    assert victims(run(snap)) == [("c", "high")]


def test_only_as_many_victims_as_needed() -> None:
    plan = run(with_pending(full_node("a", "b", "c", "d"), make_job("high").gpus(4).priority(1)))
    assert len(plan.preemptions) == 2


def test_a_stopping_job_is_waited_for_rather_than_preempting_more() -> None:
    snap = snapshot(
        nodes=[make_node("n1").gpus(8)],
        live=[live_alloc("going", "n1", range(4)), live_alloc("low", "n1", range(4, 8))],
        running=[
            running_job("going", NOW, ran_s=HOUR, stopping=True),
            running_job("low", NOW, ran_s=HOUR, preemptible=True),
        ],
        pending=[make_job("high").gpus(4).priority(5)],
    )
    plan = run(snap)
    assert plan.preemptions == ()
    assert plan.reasons["high"].code == PREEMPTING
    assert plan.reasons["high"].message == "waiting for going to stop, then starts"


def test_a_gang_preempts_on_every_node_it_needs() -> None:
    snap = snapshot(
        nodes=[make_node("n1").gpus(8), make_node("n2").gpus(8), make_node("n3").gpus(8)],
        live=[live_alloc(j, n, range(8)) for j, n in (("a", "n1"), ("b", "n2"), ("c", "n3"))],
        running=[
            running_job("a", NOW, ran_s=HOUR, preemptible=True),
            running_job("b", NOW, ran_s=2 * HOUR, preemptible=True),
            running_job("c", NOW, ran_s=3 * HOUR, preemptible=True),
        ],
        pending=[make_job("gang").gpus(8).nodes(2).priority(1)],
    )
    assert victims(run(snap)) == [("a", "gang"), ("b", "gang")]


def test_a_gang_victim_is_preempted_whole_and_frees_all_its_nodes() -> None:
    snap = snapshot(
        nodes=[make_node("n1").gpus(8), make_node("n2").gpus(8)],
        live=[live_alloc("wide", "n1", range(8)), live_alloc("wide", "n2", range(8))],
        running=[running_job("wide", NOW, ran_s=HOUR, preemptible=True)],
        pending=[make_job("gang").gpus(8).nodes(2).priority(1)],
    )
    plan = run(snap)
    assert plan.preemptions == (Preemption("wide", "gang", "preempted by job gang (priority 1 > 0)"),)


def test_lower_jobs_do_not_take_what_the_preemptor_will_use() -> None:
    snap = snapshot(
        nodes=[make_node("n1").gpus(8)],
        live=[live_alloc("low", "n1", range(4))],
        running=[running_job("low", NOW, ran_s=HOUR, preemptible=True)],
        pending=[make_job("high").gpus(8).priority(5), make_job("filler").gpus(4)],
    )
    plan = run(snap)
    assert victims(plan) == [("low", "high")]
    assert plan.placements == ()


def test_a_victim_is_given_to_one_job_only() -> None:
    plan = run(with_pending(full_node("low"), make_job("h1").gpus(8).priority(5), make_job("h2").gpus(8).priority(5)))
    assert victims(plan) == [("low", "h1")]
    assert plan.reasons["h2"].code != PREEMPTING


def test_fifo_never_preempts() -> None:
    assert run(with_pending(full_node("low"), make_job("high").gpus(8).priority(5)), "fifo").preemptions == ()


def test_a_plan_names_the_searches_that_went_through_every_node() -> None:
    # n1's victim loses the least, so the search stops before n2: it did not need the later nodes.
    two_nodes = snapshot(
        nodes=[make_node("n1").gpus(8), make_node("n2").gpus(8)],
        live=[live_alloc("saved", "n1", range(8)), live_alloc("unsaved", "n2", range(8))],
        running=[
            running_job("saved", NOW, ran_s=10 * HOUR, preemptible=True, checkpoint_s_ago=300),
            running_job("unsaved", NOW, ran_s=HOUR, preemptible=True),
        ],
        pending=[make_job("high").gpus(8).priority(1)],
    )
    assert run(two_nodes).exhausted_searches == ()
    # With n1 alone the search ends because the nodes do, not because none later could do better.
    one_node = with_pending(full_node("low"), make_job("high").gpus(8).priority(5))
    assert run(one_node).exhausted_searches == ("high",)
    # So does a search that finds nothing.
    pinned = snapshot(
        nodes=[make_node("n1").gpus(8)],
        live=[live_alloc("low", "n1", range(4)), live_alloc("pinned", "n1", range(4, 8))],
        running=[running_job("low", NOW, ran_s=HOUR, preemptible=True), running_job("pinned", NOW, ran_s=HOUR)],
        pending=[make_job("high").gpus(8).priority(5)],
    )
    assert run(pinned).exhausted_searches == ("high",)


def test_nodes_passed_over_by_level_still_end_a_search_early_when_they_could_not_do_better() -> None:
    """A job over its team's nominal quota scans only nodes with a victim below its level; a node passed
    over that comes after the best option in cost order still means the search did not need the rest."""

    def search(high_ran_s: float) -> tuple[str, ...]:
        snap = snapshot(
            nodes=[make_node("n1").gpus(8), make_node("n2").gpus(8)],
            live=[live_alloc("low", "n1", range(8)), live_alloc("higher", "n2", range(8))],
            running=[
                running_job("low", NOW, ran_s=HOUR, preemptible=True, team="t"),
                running_job("higher", NOW, ran_s=high_ran_s, priority=9, preemptible=True, team="t"),
            ],
            quotas={"t": {"H100": TeamQuota(nominal=0.0)}},  # every job of t borrows
        )
        job = make_job("high").gpus(8).priority(5).team("t").build()
        quota = QuotaLedger(snap)
        assert not quota.within_nominal(job, "H100")
        preemptor = Preemptor(snap, NOW, get_policy("default").level, quota)
        found = preemptor.find(snap.view(get_policy("default").gpu_ranker, get_policy("default").cpu_ranker), job)
        assert found is not None and found[1] == ("low",)
        return tuple(preemptor.exhausted)

    assert search(high_ran_s=2 * HOUR) == ()  # n2 (passed over) costs more: the scan would stop there
    assert search(high_ran_s=HOUR / 2) == ("high",)  # n2 comes first: after n1 the nodes ran out


def test_a_node_needing_several_victims_is_bounded_by_its_cheapest_ones_and_the_fewest_that_could_do() -> None:
    snap = snapshot(
        nodes=[make_node("n1").gpus(8), make_node("n2").gpus(8)],
        live=[
            live_alloc("one", "n1", [0]),  # loses 1 GPU-hour
            live_alloc("two", "n1", [1]),  # 2
            live_alloc("six", "n1", range(2, 8)),  # 6 GPUs × 1 hour = 6
            live_alloc("half", "n2", range(4)),  # n2: half its GPUs held by a job that may not be stopped
            live_alloc("pinned", "n2", range(4, 8)),
        ],
        running=[
            running_job("one", NOW, ran_s=HOUR, preemptible=True),
            running_job("two", NOW, ran_s=2 * HOUR, preemptible=True),
            running_job("six", NOW, ran_s=HOUR, preemptible=True),
            running_job("half", NOW, ran_s=HOUR, preemptible=True),
            running_job("pinned", NOW, ran_s=HOUR),
        ],
    )
    policy = get_policy("default")
    view = snap.view(policy.gpu_ranker, policy.cpu_ranker)
    bounds = Preemptor(snap, NOW, policy.level)._bounds
    n1, n2 = view.nodes["n1"], view.nodes["n2"]
    lost = {gpus: bounds.least_lost(n1, make_job("j").gpus(gpus).build().request, "H100") for gpus in (1, 6, 7, 8)}
    assert lost == {1: 0.0, 6: HOUR, 7: 3 * HOUR, 8: 9 * HOUR}  # 1, 1 + 2 and 1 + 2 + 6 GPU-hours at least
    assert bounds.least_lost(n2, make_job("j").gpus(8).build().request, "H100") == float("inf")
    assert bounds.least_lost(n2, make_job("j").gpus(4).build().request, "H100") == 4 * HOUR
    best = (8 * HOUR, 2)
    assert bounds.beyond(n1, make_job("j").gpus(8).build().request, "H100", best)
    assert not bounds.beyond(n1, make_job("j").gpus(7).build().request, "H100", best)


def test_a_fractional_job_shares_a_stopping_jobs_gpu_with_another_rather_than_preempting_more() -> None:
    snap = snapshot(
        nodes=[make_node("n1").gpus(2)],
        live=[live_alloc("stopping", "n1", [0]), live_alloc("low", "n1", [1])],
        running=[
            running_job("stopping", NOW, ran_s=HOUR, stopping=True),
            running_job("low", NOW, ran_s=HOUR, preemptible=True),
        ],
        pending=[make_job("a").gpus(0.25).priority(1).seq(1), make_job("b").gpus(0.25).priority(1).seq(2)],
    )
    plan = run(snap)
    assert plan.preemptions == ()
    assert plan.reasons["a"].message == plan.reasons["b"].message == "waiting for stopping to stop, then starts"


def test_a_job_waits_for_the_rest_of_a_victim_preempted_for_another_rather_than_preempting_more() -> None:
    snap = snapshot(
        nodes=[make_node("n1").gpus(4), make_node("n2").gpus(2)],
        live=[live_alloc("big", "n1", range(4)), live_alloc("other", "n2", range(2))],
        running=[
            running_job("big", NOW, ran_s=HOUR / 4, preemptible=True),  # loses 1 GPU-hour, "other" 2
            running_job("other", NOW, ran_s=HOUR, preemptible=True),
        ],
        pending=[make_job("a").gpus(2).priority(1).seq(1), make_job("b").gpus(2).priority(1).seq(2)],
    )
    plan = run(snap)
    assert victims(plan) == [("big", "a")]  # b waits for the two GPUs a leaves of big's four
    assert plan.reasons["a"].message == "preempting big (1 GPU-hours lost) to start"
    assert plan.reasons["b"].message == "waiting for big to stop, then starts"


def test_what_a_victim_leaves_over_counts_as_free_so_a_job_preempts_only_the_rest() -> None:
    snap = snapshot(
        nodes=[make_node("n1").gpus(8)],
        live=[live_alloc("big", "n1", range(4)), live_alloc("small", "n1", [4, 5]), live_alloc("kept", "n1", [6, 7])],
        running=[
            running_job("big", NOW, ran_s=HOUR / 4, preemptible=True),  # loses 1 GPU-hour, "small" 2
            running_job("small", NOW, ran_s=HOUR, preemptible=True),
            running_job("kept", NOW, ran_s=HOUR),
        ],
        pending=[make_job("a").gpus(2).priority(1).seq(1), make_job("b").gpus(4).priority(1).seq(2)],
    )
    plan = run(snap)
    # b takes the two GPUs a leaves of big's four, and small's two: before, big's four counted as taken.
    assert victims(plan) == [("big", "a"), ("small", "b")]
    assert plan.reasons["b"].message == "preempting small (2 GPU-hours lost) and waiting for big to stop, then starts"


def test_a_shared_gpu_counts_what_a_stopping_job_leaves_over_beside_another_stopping_job() -> None:
    snap = snapshot(
        nodes=[make_node("n1").gpus(1)],
        live=[live_alloc(j, "n1", [0], fraction=0.3) for j in ("first", "low", "second")],
        running=[
            running_job("first", NOW, ran_s=HOUR, stopping=True),
            running_job("low", NOW, ran_s=HOUR, preemptible=True),
            running_job("second", NOW, ran_s=HOUR, stopping=True),
        ],
        pending=[make_job("a").gpus(0.3).priority(1).seq(1), make_job("b").gpus(0.25).priority(1).seq(2)],
    )
    plan = run(snap)
    # a takes first's share; b fits in the tenth left free and second's share: nobody needs preempting.
    assert plan.preemptions == ()
    assert plan.reasons["a"].message == "waiting for first to stop, then starts"
    assert plan.reasons["b"].message == "waiting for first and second to stop, then starts"


def test_equal_victims_are_chosen_by_node_name_whatever_else_runs_on_the_nodes() -> None:
    # n9's victim and n3's lose the same work; n9 also runs a higher-priority preemptible job that would
    # lose nothing, which made n9 come first in the scan. The choice is n3's victim (the name breaks the
    # tie), as when that job may not be preempted at all: what else runs on a node does not change it.
    def snap(bystander: bool) -> Snapshot:
        live = [live_alloc("victim9", "n9", range(4)), live_alloc("victim3", "n3", range(4, 8))]
        running = [running_job(v, NOW, ran_s=HOUR, preemptible=True) for v in ("victim9", "victim3")]
        live.append(live_alloc("bystander", "n9", range(4, 8)))
        running.append(running_job("bystander", NOW, ran_s=HOUR, priority=9, preemptible=bystander, checkpoint_s_ago=0))
        return snapshot(
            nodes=[make_node("n9").gpus(8), make_node("n3").gpus(8)],
            live=[*live, live_alloc("pinned", "n3", range(4))],
            running=[*running, running_job("pinned", NOW, ran_s=HOUR)],
            pending=[make_job("high").gpus(4).priority(5)],
        )

    assert victims(run(snap(bystander=True))) == [("victim3", "high")]
    assert victims(run(snap(bystander=False))) == [("victim3", "high")]


def test_jobs_waiting_as_their_group_does_keep_their_places_among_those_looked_at_one_by_one() -> None:
    # While victim searches are left, the queue is gone through to its end: a job like one already found
    # not to fit (and with no victims below it) waits as its group does, between jobs tried one by one.
    plan = schedule(
        with_pending(
            full_node("low", priority=0),
            make_job("a1").gpus(4).seq(1),
            make_job("a2").gpus(4).seq(2),
            make_job("b").gpus(2).seq(3),
            make_job("a3").gpus(4).seq(4),
            make_job("urgent").gpus(8).priority(1).seq(5),
            make_job("a4").gpus(4).seq(6),
        ),
        get_policy("default"),
        NOW,
    )
    assert victims(plan) == [("low", "urgent")]
    assert plan.waiting == ("urgent", "a1", "a2", "b", "a3", "a4")
    assert plan.reasons["urgent"].code == PREEMPTING
    assert plan.reasons["a1"] is plan.reasons["a2"] is plan.reasons["a3"] is plan.reasons["a4"]
    assert plan.reasons["a1"].code == plan.reasons["b"].code == RESOURCES
    assert [plan.position(j) for j in ("a2", "b", "a4")] == [(3, 6), (4, 6), (6, 6)]
    assert list(plan.reasons) == list(plan.waiting) and dict(plan.reasons.items()) == dict(plan.reasons)
    assert isinstance(plan.reasons, Reasons)
    assert sorted(plan.reasons._own) == ["a1", "b", "urgent"]  # a2, a3 and a4 wait as a1's group does
