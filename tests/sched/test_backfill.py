import random
from datetime import UTC, datetime, timedelta

from corral.model import Job, LiveAllocation, Node, RunningJob
from corral.sched import (
    BACKFILL_BLOCKED,
    IN_ORDER,
    RESERVED,
    RESOURCES,
    Plan,
    Reason,
    Reservation,
    Snapshot,
    get_policy,
    schedule,
)
from corral.sched.backfill import find_reservation, release_times
from corral.sched.placement import find_placement
from corral.testing import JobBuilder, live_alloc, make_job, make_node, running_job, snapshot

NOW = datetime(2025, 1, 1, tzinfo=UTC)
HOUR = 3600.0


def run(snap: Snapshot, policy: str = "default") -> Plan:
    return schedule(snap, get_policy(policy), NOW)


def placed(plan: Plan) -> dict[str, list[tuple[str, tuple[int, ...]]]]:
    return {p.job_id: [(a.node, a.gpus) for a in p.allocations] for p in plan.placements}


def half_busy(*pending: JobBuilder, limit: float | None = 2 * HOUR) -> Snapshot:
    """n1 has 8 GPUs; r1 holds 4 of them and reaches its time limit in one hour."""
    return snapshot(
        nodes=[make_node("n1").gpus(8)],
        live=[live_alloc("r1", "n1", range(4))],
        running=[running_job("r1", NOW, ran_s=HOUR, time_limit_s=limit)],
        pending=pending,
    )


def test_the_blocked_job_gets_a_reservation_at_its_earliest_start() -> None:
    plan = run(half_busy(make_job("big").gpus(8).priority(5)))
    assert plan.placements == ()
    (reservation,) = plan.reservations
    assert reservation.job_id == "big"
    assert reservation.start == NOW + timedelta(hours=1)
    assert [(a.node, a.gpus) for a in reservation.allocations] == [("n1", tuple(range(8)))]
    reason = plan.reasons["big"]
    assert reason.code == RESERVED
    assert reason.expected_start == NOW + timedelta(hours=1)
    assert "expected to start at 2025-01-01 01:00:00 UTC (in 1h) on n1" in reason.message


def test_a_lower_job_that_ends_before_the_reservation_starts_now() -> None:
    plan = run(half_busy(make_job("big").gpus(8).priority(5), make_job("short").gpus(4).time_limit(1800)))
    assert placed(plan) == {"short": [("n1", (4, 5, 6, 7))]}
    assert plan.reservations[0].start == NOW + timedelta(hours=1)


def test_a_lower_job_that_would_delay_the_reservation_waits() -> None:
    plan = run(
        half_busy(
            make_job("big").gpus(8).priority(5).seq(1),
            make_job("long").gpus(4).time_limit(2 * HOUR).seq(2),
            make_job("unlimited").gpus(4).seq(3),
        )
    )
    assert plan.placements == ()
    assert plan.reasons["long"].code == BACKFILL_BLOCKED
    assert plan.reasons["unlimited"].code == BACKFILL_BLOCKED
    assert "would delay job big, reserved to start at 2025-01-01 01:00:00 UTC" in plan.reasons["long"].message
    assert plan.reasons["long"].describe(plan.position("long")).endswith("queue position 2 of 3")


def test_a_lower_job_may_use_capacity_the_reservation_does_not_need() -> None:
    snap = snapshot(
        nodes=[make_node("n1").gpus(8), make_node("n2").gpus(4)],
        live=[live_alloc("r1", "n1", range(4))],
        running=[running_job("r1", NOW, ran_s=HOUR, time_limit_s=2 * HOUR)],
        pending=[make_job("big").gpus(8).priority(5), make_job("small").gpus(4)],
    )
    plan = run(snap)
    assert placed(plan) == {"small": [("n2", (0, 1, 2, 3))]}
    assert plan.reservations[0].job_id == "big"


def test_without_known_ends_there_is_no_reservation_and_lower_jobs_start() -> None:
    plan = run(half_busy(make_job("big").gpus(8).priority(5), make_job("small").gpus(4), limit=None))
    assert plan.reservations == ()
    assert placed(plan) == {"small": [("n1", (4, 5, 6, 7))]}
    assert plan.reasons["big"].code == RESOURCES


def test_fifo_never_reserves_and_a_blocked_job_holds_back_later_ones() -> None:
    plan = run(half_busy(make_job("big").gpus(8).seq(1), make_job("small").gpus(4).seq(2)), "fifo")
    assert plan.reservations == ()
    assert placed(plan) == {}  # small fits, but it never starts before big, submitted earlier
    assert plan.reasons["big"].code == RESOURCES
    assert plan.reasons["small"] == Reason(IN_ORDER, "waiting behind job big: jobs start in submit order", True)


def test_priority_order_without_backfill_lets_a_later_job_start_past_a_blocked_one() -> None:
    plan = run(half_busy(make_job("big").gpus(8).seq(1), make_job("small").gpus(4).seq(2)), "priority")
    assert plan.reservations == ()
    assert placed(plan) == {"small": [("n1", (4, 5, 6, 7))]}


def test_the_reservation_waits_for_enough_jobs_to_end() -> None:
    snap = snapshot(
        nodes=[make_node("n1").gpus(4), make_node("n2").gpus(4)],
        live=[live_alloc("a", "n1", range(4)), live_alloc("b", "n2", range(4))],
        running=[
            running_job("a", NOW, time_limit_s=HOUR),
            running_job("b", NOW, time_limit_s=3 * HOUR),
        ],
        pending=[make_job("gang").gpus(4).nodes(2)],
    )
    (reservation,) = run(snap).reservations
    assert reservation.start == NOW + timedelta(hours=3)
    assert sorted(a.node for a in reservation.allocations) == ["n1", "n2"]


def test_an_overdue_job_is_expected_to_end_now() -> None:
    plan = run(half_busy(make_job("big").gpus(8), limit=HOUR / 2))
    assert plan.reservations[0].start == NOW


def test_only_the_first_blocked_job_is_reserved() -> None:
    plan = run(half_busy(make_job("big").gpus(8).priority(5), make_job("big2").gpus(8).priority(4)))
    assert [r.job_id for r in plan.reservations] == ["big"]
    assert plan.reasons["big2"].code == RESOURCES


def test_a_job_that_never_fits_is_not_reserved() -> None:
    plan = run(half_busy(make_job("huge").gpus(16).priority(9), make_job("big").gpus(8)))
    assert [r.job_id for r in plan.reservations] == ["big"]


def _reservation_releasing_everything(job: Job, snap: Snapshot) -> Reservation | None:
    """The reservation as the timeline defines it: every release, on every node, in time order."""
    view = snap.view(get_policy("default").gpu_ranker, get_policy("default").cpu_ranker)
    held = snap.allocations_of()
    events = list(release_times(snap, NOW))
    for when in sorted({when for when, _ in events}):
        view.release(a for at, job_id in events if at == when for a in held.get(job_id, ()))
        placement = find_placement(view, job)
        if placement is not None:
            return Reservation(job.id, when, placement.gpu_type, placement.allocations)
    return None


def test_a_reservation_for_some_gpu_types_equals_one_releasing_every_node() -> None:
    """Releases on nodes without the job's types are skipped; the reservation must not change."""
    rng = random.Random(17)
    types = ("H100", "A100", "L4")
    for trial in range(150):
        nodes: list[Node] = []
        for i in range(rng.randint(1, 6)):
            built = make_node(f"n{i}").gpus(rng.choice((2, 4, 8)), rng.choice(types)).cpus(16)
            if rng.random() < 0.2:  # a node with two types
                built = built.gpus(2, rng.choice(types))
            nodes.append(built.build())
        live: list[LiveAllocation] = []
        running: list[RunningJob] = []
        for n, node in enumerate(nodes):
            free = [g.index for g in node.gpus]
            rng.shuffle(free)
            while free and rng.random() < 0.8:
                taken = [free.pop() for _ in range(min(len(free), rng.randint(1, 4)))]
                job_id = f"r{n}-{len(live)}"
                live.append(live_alloc(job_id, node.name, sorted(taken), cpus=rng.choice((0, 2, 8))))
                limit = rng.choice((None, HOUR, 2 * HOUR, 3 * HOUR))
                running.append(running_job(job_id, NOW, ran_s=rng.choice((0.0, 600.0)), time_limit_s=limit))
        builder = make_job("blocked").gpus(rng.choice((1, 2, 4, 8))).nodes(rng.choice((1, 1, 2)))
        builder = builder.types(*rng.sample(types, rng.randint(0, 2)))
        job = (builder.cpus(4) if rng.random() < 0.5 else builder).build()
        snap = snapshot(nodes=nodes, live=live, running=running, pending=[job])
        expected = _reservation_releasing_everything(job, snap)
        got = find_reservation(job, snap, get_policy("default"), NOW, taken=())
        assert got == expected, f"trial {trial}"


def test_a_job_placed_earlier_in_the_cycle_frees_its_gpus_at_its_time_limit_for_the_reservation() -> None:
    snap = snapshot(
        nodes=[make_node("n1").gpus(2)],
        pending=[
            make_job("a").gpus(1).time_limit(600).seq(1),
            make_job("b").gpus(2).seq(2),
            make_job("c").gpus(1).seq(3),  # no time limit: it would hold a GPU past b's start
        ],
    )
    plan = run(snap)
    assert placed(plan) == {"a": [("n1", (0,))]}
    (reservation,) = plan.reservations
    assert (reservation.job_id, reservation.start) == ("b", NOW + timedelta(seconds=600))
    assert plan.reasons["b"].code == RESERVED
    assert plan.reasons["c"].code == BACKFILL_BLOCKED
